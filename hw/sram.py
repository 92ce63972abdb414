"""The on-chip buffers: shapes from ``HwConfig``, and the write-port interface the DMA engines drive."""

from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from pyvta import isa


@dataclass(frozen=True)
class SramShape:
    name: str
    row_bits: int
    depth: int
    granularity_bits: int
    elems_per_row: int = 1  # >1: several ISA elements share a row (the UOP buffer)

    @property
    def elem_bits(self) -> int:
        return self.row_bits // self.elems_per_row

    @property
    def log_elems_per_row(self) -> int:
        return self.elems_per_row.bit_length() - 1

    @property
    def addr_bits(self) -> int:
        return max(1, (self.depth - 1).bit_length())

    @property
    def lanes(self) -> int:
        return self.row_bits // self.granularity_bits


@dataclass(frozen=True)
class MemTypeInfo:
    """How a LOAD/STORE of one memory type moves data.

    ``chunk_bytes`` is the AXI beat size used (the DRAM element or the bus width, whichever is
    smaller; narrower elements use narrow AXI transfers); ``sram_chunk_bits`` is what one chunk fills
    in the SRAM row (four times the DRAM bits for ACC_8BIT, which sign-extends int8 to int32).
    """

    mem: isa.MemType
    sram: str
    dram_elem_bytes: int
    chunk_bytes: int
    sram_chunk_bits: int
    padded: bool
    sign_extend: bool

    @property
    def log_elem_bytes(self) -> int:
        return self.dram_elem_bytes.bit_length() - 1

    @property
    def log_chunk_bytes(self) -> int:
        return self.chunk_bytes.bit_length() - 1

    @property
    def log_chunks_per_elem(self) -> int:
        return self.log_elem_bytes - self.log_chunk_bytes


def mem_type_info(cfg: isa.HwConfig, mem: isa.MemType) -> MemTypeInfo:
    elem = cfg.elem_bytes_of(mem.dram_elem)
    chunk = min(elem, cfg.bus_width_bytes)
    sign_extend = mem is isa.MemType.ACC_8BIT
    widen = cfg.acc_width_bits // cfg.out_width_bits if sign_extend else 1
    return MemTypeInfo(
        mem=mem,
        sram=mem.sram,
        dram_elem_bytes=elem,
        chunk_bytes=chunk,
        sram_chunk_bits=chunk * 8 * widen,
        padded=mem in isa.PADDED_MEM_TYPES,
        sign_extend=sign_extend,
    )


def sram_shape(cfg: isa.HwConfig, name: str, writers: tuple[isa.MemType, ...] = ()) -> SramShape:
    """Shape of buffer ``name``; its write granularity serves every memory type in ``writers``.

    The UOP buffer packs several 32-bit micro-ops per row so that it is no deeper than the data
    buffers (2048 x 128 bits for the default config; same BRAM count, 4x faster CTRL.CLEAR).
    """
    elem_bits = cfg.elem_bytes_of(name) * 8
    gran = elem_bits
    for mem in writers:
        gran = math.gcd(gran, mem_type_info(cfg, mem).sram_chunk_bits)
    depth = cfg.depth_of(name)
    per_row = 1
    if name == "uop":
        data_depth = max(cfg.depth_of(n) for n in ("inp", "wgt", "acc"))
        per_row = max(1, min(depth // data_depth, 4))
    return SramShape(name, elem_bits * per_row, depth // per_row, gran, per_row)


def sram_write_signature(shape: SramShape) -> wiring.Signature:
    return wiring.Signature(
        {"addr": Out(shape.addr_bits), "data": Out(shape.row_bits), "en": Out(shape.lanes)}
    )


def sram_read_signature(shape: SramShape) -> wiring.Signature:
    """A synchronous read port request (data arrives the next cycle and holds while ``en`` is 0)."""
    return wiring.Signature({"addr": Out(shape.addr_bits), "en": Out(1)})


def clear_rows(cfg: isa.HwConfig) -> int:
    """Cycles CTRL.CLEAR takes: the depth of the deepest buffer (rows, as stored)."""
    return max(sram_shape(cfg, n).depth for n in ("uop", "inp", "wgt", "acc"))
