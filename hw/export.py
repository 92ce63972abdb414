"""Verilog and RTLIL export of the accelerator for a ``HwConfig``.

Amaranth elaborates to RTLIL; its Verilog is that RTLIL passed through yosys (``proc -nomux
-norom``, ``write_verilog``). Synthesis (``hw.timing``, ``hw.synth``) reads the RTLIL itself: the
same design without the round trip. On the UltraScale config (1x32, 1 MiB weight buffer) yosys's
Verilog frontend had not finished reading the Verilog after 7 minutes (the zero-initialised 8 Mbit
weight buffer is written as 1024 ``initial`` assignments of 8192 bits; with those removed, reading
took 80 s and ``proc_prune`` on the re-read processes 3.5 minutes more); ``read_rtlil`` and
``proc`` take 6 s (``benchmarks/hw_synth_input.py``).
"""

from __future__ import annotations

from amaranth.back import rtlil as _rtlil
from amaranth.back import verilog as _verilog
from amaranth.hdl import ClockDomain, DomainRenamer, Elaboratable, Module, Signal

from pyvta import isa
from pyvta.hw.top import Vta

TOP_NAME = "vta"


def verilog(cfg: isa.HwConfig = isa.DEFAULT_CONFIG, reset_register: bool = False, **kwargs) -> str:
    """Verilog text of the top level ``vta`` (ports ``clk``, ``rst``, ``m_axi__*``, ``s_axil__*``,
    ``irq``). ``kwargs`` go to ``hw.top.Vta`` (e.g. ``dsp_products``, ``cmd_queue_depth``).
    ``reset_register``: ``rst`` passes a register first (``RegisteredReset``; same ports)."""
    top = Vta(cfg, **kwargs)
    if not reset_register:
        return _verilog.convert(top, name=TOP_NAME, emit_src=False)
    outer = RegisteredReset(top)
    ports = [sig for _, _, sig in top.signature.flatten(top)] + [outer.sync.clk, outer.sync.rst]
    return _verilog.convert(outer, name=TOP_NAME, ports=ports, emit_src=False)


class RegisteredReset(Elaboratable):
    """``top`` (a component in the ``sync`` domain) with its synchronous reset taken from a
    register of the ``rst`` input: the reset acts one cycle later, and no logic of ``top`` depends
    combinationally on ``rst``. For cycle simulators that evaluate every input-driven net at each
    evaluation (Verilator's input-combinational region): with ``rst`` a port, every register's
    reset mux put all next-state logic there (``driver.rtl_build``)."""

    def __init__(self, top: Elaboratable):
        self.top = top
        self.sync = ClockDomain("sync")

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.sync
        m.domains.core = core = ClockDomain("core")
        rst_q = Signal(reset_less=True)
        m.d.sync += rst_q.eq(self.sync.rst)
        m.d.comb += [core.clk.eq(self.sync.clk), core.rst.eq(rst_q)]
        m.submodules.vta = DomainRenamer("core")(self.top)
        return m


def rtlil(cfg: isa.HwConfig = isa.DEFAULT_CONFIG, **kwargs) -> str:
    """RTLIL text of the same top level as ``verilog`` (what yosys ``read_rtlil`` reads)."""
    top = Vta(cfg, **kwargs)
    return _rtlil.convert(top, name=TOP_NAME, emit_src=False)
