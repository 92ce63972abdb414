"""Verilog export of the accelerator for a ``HwConfig``."""

from __future__ import annotations

from amaranth.back import verilog as _verilog

from pyvta import isa
from pyvta.hw.top import Vta

TOP_NAME = "vta"


def verilog(cfg: isa.HwConfig = isa.DEFAULT_CONFIG, **kwargs) -> str:
    """Verilog text of the top level ``vta`` (ports ``clk``, ``rst``, ``m_axi__*``, ``s_axil__*``,
    ``irq``). ``kwargs`` go to ``hw.top.Vta`` (e.g. ``dsp_products``, ``cmd_queue_depth``)."""
    top = Vta(cfg, **kwargs)
    return _verilog.convert(top, name=TOP_NAME, emit_src=False)
