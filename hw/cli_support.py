"""Plain functions behind ``pyvta hw ...`` (the CLI only parses arguments and prints).

pyvta hw run BUNDLE.npz --out RESULT.npz [--sim verilator|icarus]  -> run_bundle
pyvta hw verilog [--config FILE] -o vta.v                          -> write_verilog
pyvta hw synth [--config FILE]                                     -> synth_table
pyvta hw timing [--config FILE] [--quick]                          -> timing_table
pyvta hw regmap                                                    -> regmap_markdown
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pyvta import isa
from pyvta.hw import regmap


def _config(config: str | Path | None) -> isa.HwConfig:
    return isa.HwConfig.load(config) if config else isa.DEFAULT_CONFIG


def run_bundle(
    bundle: str | Path,
    out: str | Path,
    simulator: str = "verilator",
    backpressure: bool = False,
) -> dict:
    """Run a program bundle on the RTL; write RESULT.npz (``dram``, ``cycles``, ``counters`` JSON).

    Returns {"cycles": int, "status": str, "counters": dict}. Raises RuntimeError on a deadlock
    (the message carries the watchdog's report of the token and command queues).
    """
    import json

    from pyvta.hw.runner import run_programs
    from pyvta.sim.program import Program

    program = Program.load(bundle)
    (result,) = run_programs([program], simulator=simulator, backpressure=backpressure)
    if result.status != "done":
        raise RuntimeError(f"RTL run did not finish ({result.status}): {result.message}")
    np.savez_compressed(
        out,
        dram=result.dram,
        cycles=np.int64(result.cycles),
        counters=np.array(json.dumps(result.counters)),
    )
    return {"cycles": result.cycles, "status": result.status, "counters": result.counters}


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
