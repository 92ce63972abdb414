"""AXI4 master / AXI4-Lite signatures and the internal read-client interface.

Signal names follow the AMBA spec (``awaddr``, ``rdata``...), so at the top level Amaranth names them
``m_axi__awaddr`` and cocotbext-axi finds them with the prefix ``m_axi_``.
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

ADDR_BITS = 32
ID_BITS = 1
AXI_MAX_BURST_BEATS = 256
AXI_BOUNDARY_BYTES = 4096
AXI_BURST_INCR = 1


def axi4_signature(data_bits: int, addr_bits: int = ADDR_BITS) -> wiring.Signature:
    """An AXI4 master port (INCR bursts, one ID); flip it for a slave."""
    return wiring.Signature(
        {
            "awid": Out(ID_BITS),
            "awaddr": Out(addr_bits),
            "awlen": Out(8),
            "awsize": Out(3),
            "awburst": Out(2),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata": Out(data_bits),
            "wstrb": Out(data_bits // 8),
            "wlast": Out(1),
            "wvalid": Out(1),
            "wready": In(1),
            "bid": In(ID_BITS),
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            "arid": Out(ID_BITS),
            "araddr": Out(addr_bits),
            "arlen": Out(8),
            "arsize": Out(3),
            "arburst": Out(2),
            "arvalid": Out(1),
            "arready": In(1),
            "rid": In(ID_BITS),
            "rdata": In(data_bits),
            "rresp": In(2),
            "rlast": In(1),
            "rvalid": In(1),
            "rready": Out(1),
        }
    )


def axil_signature(addr_bits: int = 12, data_bits: int = 32) -> wiring.Signature:
    """An AXI4-Lite master port; the accelerator's control slave is ``In(axil_signature())``."""
    return wiring.Signature(
        {
            "awaddr": Out(addr_bits),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata": Out(data_bits),
            "wstrb": Out(data_bits // 8),
            "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            "araddr": Out(addr_bits),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata": In(data_bits),
            "rresp": In(2),
            "rvalid": In(1),
            "rready": Out(1),
        }
    )


def burst_layout() -> data.StructLayout:
    """One AXI burst request: byte address, len (beats - 1), size (log2 bytes per beat)."""
    return data.StructLayout({"addr": unsigned(ADDR_BITS), "len": unsigned(8), "size": unsigned(3)})


def beat_layout(data_bits: int) -> data.StructLayout:
    return data.StructLayout({"data": unsigned(data_bits), "last": unsigned(1)})


def read_client_signature(data_bits: int) -> wiring.Signature:
    """What a unit that reads DRAM drives: burst requests out, read beats in (in request order)."""
    return wiring.Signature(
        {
            "ar": Out(stream.Signature(burst_layout())),
            "r": In(stream.Signature(beat_layout(data_bits))),
        }
    )


def wbeat_layout(data_bits: int) -> data.StructLayout:
    return data.StructLayout(
        {"data": unsigned(data_bits), "strb": unsigned(data_bits // 8), "last": unsigned(1)}
    )


def write_client_signature(data_bits: int) -> wiring.Signature:
    """What a unit that writes DRAM drives: AW bursts, W beats, and B responses back."""
    return wiring.Signature(
        {
            "aw": Out(stream.Signature(burst_layout())),
            "w": Out(stream.Signature(wbeat_layout(data_bits))),
            "b": In(stream.Signature(unsigned(2))),
        }
    )
