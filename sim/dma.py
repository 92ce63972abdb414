"""LOAD and STORE semantics: 2-D strided DMA between DRAM and an SRAM, with zero padding on loads."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pyvta.isa import PADDED_MEM_TYPES, MemInsn, MemType
from pyvta.sim.errors import OutOfBoundsError, ProgramError
from pyvta.sim.state import SramState

# numpy element dtype of each SRAM, and of the DRAM rows an ACC_8BIT load reads.
_DTYPE = {"inp": np.int8, "wgt": np.int8, "acc": np.dtype("<i4"), "out": np.int8, "uop": "<u4"}


def _dram_rows(dram: np.ndarray, insn: MemInsn, elem_bytes: int, index: int) -> np.ndarray:
    """A (y_size, x_size * elem_bytes) strided view of the DRAM bytes the instruction touches."""
    start = insn.dram_base * elem_bytes
    span = ((insn.y_size - 1) * insn.x_stride + insn.x_size) * elem_bytes
    if start + span > dram.size:
        raise OutOfBoundsError(
            f"instruction {index} ({'STORE' if insn.is_store else 'LOAD'} {insn.memory_type.name}):"
            f" DRAM bytes [{start:#x}, {start + span:#x}) run past the end of DRAM"
            f" ({dram.size} bytes)"
        )
    row_bytes = insn.x_size * elem_bytes
    return as_strided(
        dram[start:],
        shape=(insn.y_size, row_bytes),
        strides=(insn.x_stride * elem_bytes, 1),
        writeable=insn.is_store,
    )


def load(st: SramState, dram: np.ndarray, insn: MemInsn, index: int) -> None:
    """Execute a LOAD: DRAM rows (plus zero padding for INP/ACC) into consecutive SRAM rows."""
    if insn.x_size == 0 or insn.y_size == 0:
        return  # a dependency-only instruction
    cfg = st.cfg
    mt = insn.memory_type
    sram_name = mt.sram
    sram = st.buffer(sram_name)
    pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
    if mt not in PADDED_MEM_TYPES:
        pads = (0, 0, 0, 0)
    y0, y1, x0, x1 = pads
    rows, width = y0 + insn.y_size + y1, x0 + insn.x_size + x1
    total = rows * width
    if insn.sram_base + total > sram.shape[0]:
        raise OutOfBoundsError(
            f"instruction {index} (LOAD {mt.name}): writes {sram_name.upper()} rows"
            f" [{insn.sram_base}, {insn.sram_base + total}) but the buffer has"
            f" {sram.shape[0]} rows"
        )
    elem_bytes = cfg.elem_bytes_of(mt.dram_elem)
    raw = _dram_rows(dram, insn, elem_bytes, index)
    dtype = _DTYPE["out" if mt is MemType.ACC_8BIT else sram_name]
    data = (
        np.ascontiguousarray(raw).view(dtype).reshape((insn.y_size, insn.x_size) + sram.shape[1:])
    )
    dest = sram[insn.sram_base : insn.sram_base + total]
    if total == insn.y_size * insn.x_size:
        dest[...] = data.reshape(dest.shape)
    else:
        block = np.zeros((rows, width) + sram.shape[1:], sram.dtype)
        block[y0 : y0 + insn.y_size, x0 : x0 + insn.x_size] = data
        dest[...] = block.reshape(dest.shape)


def store(st: SramState, dram: np.ndarray, insn: MemInsn, index: int) -> None:
    """Execute a STORE: consecutive OUT rows to strided DRAM rows. Padding is not allowed."""
    if any((insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)):
        raise ProgramError(
            f"instruction {index} (STORE): padding fields must be 0 for a store (got"
            f" y_pad={insn.y_pad_0},{insn.y_pad_1} x_pad={insn.x_pad_0},{insn.x_pad_1})"
        )
    if insn.x_size == 0 or insn.y_size == 0:
        return
    n = insn.y_size * insn.x_size
    if insn.sram_base + n > st.out.shape[0]:
        raise OutOfBoundsError(
            f"instruction {index} (STORE): reads OUT rows [{insn.sram_base},"
            f" {insn.sram_base + n}) but the buffer has {st.out.shape[0]} rows"
        )
    elem_bytes = st.cfg.out_elem_bytes
    dst = _dram_rows(dram, insn, elem_bytes, index)
    src = st.out[insn.sram_base : insn.sram_base + n].view(np.uint8).reshape(dst.shape)
    if insn.x_stride >= insn.x_size or insn.y_size == 1:
        dst[...] = src
    else:  # overlapping rows: later rows win, as in a row-by-row DMA
        for r in range(insn.y_size):
            dst[r] = src[r]
