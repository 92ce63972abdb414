"""The on-chip buffers: shapes from ``HwConfig``, and the write-port interface the DMA engines drive."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

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


ACC_BANKS = 2  # ACC and OUT: two banks by the top row bit, each with its own ports


def bank_shape(shape: SramShape) -> SramShape:
    """One of the ``ACC_BANKS`` banks of buffer ``shape`` (its rows split by the top index bit)."""
    return dataclasses.replace(shape, depth=shape.depth // ACC_BANKS)


def bank_of(row):
    """The bank of row index ``row`` (an Amaranth value as wide as the buffer's addresses)."""
    return row[-1]


def bank_row(row):
    """Row index ``row`` within its bank."""
    return row[:-1]


class BankedMemory(wiring.Component):
    """A buffer in ``ACC_BANKS`` banks: a write port per bank (``wr``, addresses within the bank)
    and one read port over all rows (``rd``/``data``, the ``sram_read_signature`` timing: data the
    next cycle, held while ``en`` is low). The OUT buffer: each compute lane writes its bank."""

    def __init__(self, shape: SramShape):
        self.shape = shape
        self.bank = bank_shape(shape)
        super().__init__(
            {
                "wr": In(sram_write_signature(self.bank)).array(ACC_BANKS),
                "rd": In(sram_read_signature(shape)),
                "data": Out(shape.row_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        assert ACC_BANKS == 2
        selected = Signal()
        data = []
        for b in range(ACC_BANKS):
            mem = memory.Memory(shape=self.bank.row_bits, depth=self.bank.depth, init=[])
            m.submodules[f"bank{b}"] = mem
            wr = mem.write_port(granularity=self.bank.granularity_bits)
            rd = mem.read_port()
            m.d.comb += [
                wr.addr.eq(self.wr[b].addr),
                wr.data.eq(self.wr[b].data),
                wr.en.eq(self.wr[b].en),
                rd.addr.eq(bank_row(self.rd.addr)),
                rd.en.eq(self.rd.en),
            ]
            data.append(rd.data)
        with m.If(self.rd.en):
            m.d.sync += selected.eq(bank_of(self.rd.addr))
        m.d.comb += self.data.eq(Mux(selected, data[1], data[0]))
        return m
