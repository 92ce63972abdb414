"""Plain functions behind ``pyvta hw ...`` (the CLI only parses arguments and prints; ``hw run``
is a user of ``driver.open("rtl")``).

pyvta hw verilog [--config FILE] -o vta.v                          -> write_verilog
pyvta hw synth [--config FILE]                                     -> synth_table
pyvta hw timing [--config FILE] [--quick]                          -> timing_table
pyvta hw regmap                                                    -> regmap_markdown
"""

from __future__ import annotations

from pathlib import Path

from pyvta import isa
from pyvta.isa import regmap


def _config(config: str | Path | None) -> isa.HwConfig:
    return isa.HwConfig.load(config) if config else isa.DEFAULT_CONFIG


def write_verilog(out: str | Path = "vta.v", config: str | Path | None = None) -> Path:
    from pyvta.hw.export import verilog

    path = Path(out)
    path.write_text(verilog(_config(config)))
    return path


def synth_table(config: str | Path | None = None) -> str:
    """Synthesise for xc7z020 and return the resource table (markdown)."""
    from pyvta.hw.synth import synth

    return synth(_config(config)).table()


def timing_table(config: str | Path | None = None, quick: bool = False) -> str:
    """Synthesise (cached by source hash) and return the cell-delay timing report (markdown)."""
    from pyvta.hw.timing import QUICK_CONFIG, timing

    return timing(QUICK_CONFIG if quick else _config(config)).table()


def regmap_markdown() -> str:
    return regmap.markdown()
