"""The instruction checker: fetch runs every word through it before staging it for dispatch.

It flags, as an ``isa.regmap.Fault``, what the simulator refuses for one instruction:

- DECODE: an opcode, memory type (per LOAD / STORE) or ALU opcode outside ``isa.opcodes``, or a
  GEMM / ALU with ``uop_bgn > uop_end`` (``isa.decode``'s DecodeError);
- DEP_QUEUE: a dependency flag whose module has no queue (``isa.DEP_QUEUES``; sim's QueueUsageError);
- STORE_PAD: a STORE with a nonzero pad field (``sim.dma.store``'s ProgramError);
- OUT_OF_BOUNDS: a LOAD / STORE with x_size and y_size nonzero whose SRAM rows
  ``[sram_base, sram_base + rows * width)`` pass the buffer's depth (pads counted for
  ``isa.PADDED_MEM_TYPES``), as ``sim.dma`` checks them.

One kind per word, in that priority (the simulator's order for a single instruction).
Latency ``CHECK_LATENCY_CYCLES`` (2): stage 1 decodes the fields and forms rows, width and the
room left in the buffer; stage 2 multiplies rows x width (registered in and out, one DSP);
the comparison is on the output. Throughput one word per cycle; no back-pressure.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.fields import INSN_WORD_BITS, any_of, dispatch_module, insn_view
from pyvta.isa import regmap
from pyvta.isa.layout import MEMOP_PAD_BITS, MEMOP_SIZE_BITS, MEMOP_SRAM_ADDR_BITS
from pyvta.isa.opcodes import STORE_MEM_TYPES
from pyvta.isa.regmap import Fault

CHECK_LATENCY_CYCLES = 2
# rows / width of a LOAD: a 16-bit size plus two 4-bit pads
_EXTENT_BITS = max(MEMOP_SIZE_BITS, MEMOP_PAD_BITS + 1) + 1


class InsnCheck(wiring.Component):
    """``word`` / ``valid`` in; the same word, ``valid`` and its ``fault`` (regmap.Fault) out
    ``CHECK_LATENCY_CYCLES`` later."""

    def __init__(self, cfg: isa.HwConfig):
        self.cfg = cfg
        super().__init__(
            {
                "word": In(INSN_WORD_BITS),
                "valid": In(1),
                "word_out": Out(INSN_WORD_BITS),
                "valid_out": Out(1),
                "fault": Out(regmap.FAULT_BITS),
            }
        )

    def elaborate(self, platform):
        m = Module()
        mem = insn_view("mem", self.cfg, self.word)
        is_mem = (mem.opcode == isa.Opcode.LOAD) | (mem.opcode == isa.Opcode.STORE)
        rows, width, room = self._extent(m, mem)
        sized = is_mem & (mem.x_size != 0) & (mem.y_size != 0)

        # stage 1: the kinds that need no arithmetic, and the operands of the bounds check
        kind1 = Signal(regmap.FAULT_BITS)
        bounds1 = Signal()
        rows1, width1 = Signal(_EXTENT_BITS), Signal(_EXTENT_BITS)
        room1 = Signal(signed(MEMOP_SRAM_ADDR_BITS + 2))
        valid1, word1 = Signal(), Signal(INSN_WORD_BITS)
        m.d.sync += [
            kind1.eq(self._plain_fault(m, mem)),
            bounds1.eq(sized),
            rows1.eq(rows),
            width1.eq(width),
            room1.eq(room),
            valid1.eq(self.valid),
            word1.eq(self.word),
        ]

        # stage 2: the product
        product2 = Signal(2 * _EXTENT_BITS)
        kind2, bounds2 = Signal.like(kind1), Signal()
        room2 = Signal.like(room1)
        m.d.sync += [
            product2.eq(rows1 * width1),
            kind2.eq(kind1),
            bounds2.eq(bounds1),
            room2.eq(room1),
            self.valid_out.eq(valid1),
            self.word_out.eq(word1),
        ]
        past_end = bounds2 & (product2 > room2)
        m.d.comb += self.fault.eq(
            Mux(kind2 != Fault.NONE, kind2, Mux(past_end, Fault.OUT_OF_BOUNDS, Fault.NONE))
        )
        return m

    def _plain_fault(self, m, mem):
        """DECODE, DEP_QUEUE or STORE_PAD of the word (combinational), NONE if none applies."""
        cfg, op = self.cfg, mem.opcode
        loop = insn_view("gemm", cfg, self.word)  # GEMM and ALU share the loop header
        alu = insn_view("alu", cfg, self.word)
        is_load, is_store = op == isa.Opcode.LOAD, op == isa.Opcode.STORE
        is_alu = op == isa.Opcode.ALU
        is_loop = (op == isa.Opcode.GEMM) | is_alu
        undecodable = (
            ~any_of(op == o for o in isa.Opcode)
            | (is_load & ~any_of(mem.memory_type == t for t in isa.LOAD_MODULE))
            | (is_store & ~any_of(mem.memory_type == t for t in STORE_MEM_TYPES))
            | (is_loop & (loop.uop_bgn > loop.uop_end))
            | (is_alu & ~any_of(alu.alu_opcode == a for a in isa.AluOp))
        )
        target = dispatch_module(self.word, cfg)
        no_queue = any_of(
            target[module] & getattr(mem, flag)
            for module, queues in isa.DEP_QUEUES.items()
            for flag, queue in zip(isa.DEP_FLAG_NAMES, queues, strict=True)
            if queue is None
        )
        padded = (mem.y_pad_0 != 0) | (mem.y_pad_1 != 0) | (mem.x_pad_0 != 0) | (mem.x_pad_1 != 0)
        kind = Signal(regmap.FAULT_BITS)
        with m.If(undecodable):
            m.d.comb += kind.eq(Fault.DECODE)
        with m.Elif(no_queue):
            m.d.comb += kind.eq(Fault.DEP_QUEUE)
        with m.Elif(is_store & padded):
            m.d.comb += kind.eq(Fault.STORE_PAD)
        return kind

    def _extent(self, m, mem):
        """(rows, width, room): the SRAM rows a LOAD / STORE touches are rows x width from
        ``sram_base``; room = the buffer's depth - sram_base (negative past the end)."""
        padded = (mem.opcode == isa.Opcode.LOAD) & any_of(
            mem.memory_type == t for t in isa.PADDED_MEM_TYPES
        )
        rows = mem.y_size + Mux(padded, mem.y_pad_0 + mem.y_pad_1, 0)
        width = mem.x_size + Mux(padded, mem.x_pad_0 + mem.x_pad_1, 0)
        depth = Signal(range(max(self.cfg.depth_of(t.sram) for t in isa.MemType) + 1))
        with m.Switch(mem.memory_type):
            for t in isa.MemType:
                with m.Case(t):
                    m.d.comb += depth.eq(self.cfg.depth_of(t.sram))
        return rows, width, depth - mem.sram_base
