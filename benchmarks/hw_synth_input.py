"""Synthesis input: yosys reading the design as RTLIL (what ``hw.timing`` and ``hw.synth`` do) next
to reading Amaranth's Verilog of the same design (what they did before), in the same run.

    nice -n 19 python benchmarks/hw_synth_input.py [--config FILE] [--timeout 600]

For each input, the seconds yosys takes to read the design and turn its processes into netlists
(``read_*; hierarchy -check; proc``: the front of ``synth_xilinx``), and the ratio. The Verilog
frontend is what made the UltraScale config (1x32, then with a 1 MiB weight buffer) intractable: its
zero-initialised memories are written as one ``initial`` assignment per row (8 Mbit of weight buffer
as 1024 8192-bit constants), and ``proc_prune`` on the re-read processes takes minutes more. A run
past ``--timeout`` is printed as a lower bound.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from pyvta import isa
from pyvta.hw.export import TOP_NAME, rtlil, verilog
from pyvta.hw.runner import default_cache_dir
from pyvta.hw.synth import run_yosys

INPUTS = {
    "rtlil": ("vta.il", "read_rtlil", rtlil),
    "verilog": ("vta.v", "read_verilog", verilog),
}


def front_seconds(cfg: isa.HwConfig, kind: str, timeout_s: float) -> float | None:
    """Seconds yosys takes to read ``cfg`` as ``kind`` and run ``proc``; None past the timeout."""
    name, reader, export = INPUTS[kind]
    out = default_cache_dir() / "synth-input" / f"{cfg.tag}-{kind}"
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(export(cfg))
    t0 = time.monotonic()
    try:
        run_yosys(f"{reader} {name}; hierarchy -check -top {TOP_NAME}; proc", out, timeout_s)
    except subprocess.TimeoutExpired:
        return None
    return time.monotonic() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="bitstreams/configs/ultrascale.json", metavar="FILE")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per input (default 600)")
    args = ap.parse_args(argv)
    cfg = isa.HwConfig.load(args.config)
    seconds = {kind: front_seconds(cfg, kind, args.timeout) for kind in INPUTS}
    for kind, s in seconds.items():
        shown = f"{s:.1f} s" if s is not None else f"> {args.timeout:.0f} s (timed out)"
        print(f"{cfg.tag} {kind:8s} read + proc: {shown}")
    fast, slow = seconds["rtlil"], seconds["verilog"]
    if fast:
        ratio = (slow or args.timeout) / fast
        print(f"verilog / rtlil: {'>= ' if slow is None else ''}{ratio:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
