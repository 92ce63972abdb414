"""The VTA instruction set (v0.0.2): hardware config, opcodes, instruction and micro-op formats.

The single source of truth for field widths and opcode numbers; imports nothing else of pyvta.
"""

from pyvta.isa.config import DEFAULT_CONFIG, ISA_VERSION, HwConfig
from pyvta.isa.errors import ConfigError, DecodeError, FieldRangeError, PyvtaError
from pyvta.isa.insn import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    Load,
    MemInsn,
    Store,
    Uop,
    decode,
)
from pyvta.isa.layout import Field, Layout, alu_layout, gemm_layout, mem_layout, uop_layout
from pyvta.isa.opcodes import (
    DEP_FLAG_NAMES,
    DEP_QUEUES,
    LOAD_MODULE,
    PADDED_MEM_TYPES,
    AluOp,
    DepQueue,
    MemType,
    Module,
    Opcode,
    clip_bounds,
    clip_imm,
)
from pyvta.isa.stream import (
    INSN_BYTES,
    UOP_BYTES,
    decode_insns,
    decode_uop_fields,
    decode_uops,
    disassemble,
    encode_insns,
    encode_uops,
)

__all__ = [
    "DEFAULT_CONFIG",
    "DEP_FLAG_NAMES",
    "DEP_QUEUES",
    "INSN_BYTES",
    "ISA_VERSION",
    "LOAD_MODULE",
    "PADDED_MEM_TYPES",
    "UOP_BYTES",
    "AluInsn",
    "AluOp",
    "ConfigError",
    "DecodeError",
    "DepQueue",
    "Field",
    "FieldRangeError",
    "FinishInsn",
    "GemmInsn",
    "HwConfig",
    "Insn",
    "Layout",
    "Load",
    "MemInsn",
    "MemType",
    "Module",
    "Opcode",
    "PyvtaError",
    "Store",
    "Uop",
    "alu_layout",
    "clip_bounds",
    "clip_imm",
    "decode",
    "decode_insns",
    "decode_uop_fields",
    "decode_uops",
    "disassemble",
    "encode_insns",
    "encode_uops",
    "gemm_layout",
    "mem_layout",
    "uop_layout",
]
