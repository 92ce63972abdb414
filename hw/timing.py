"""A timing estimate without place and route: yosys ``sta`` on the Xilinx 7-series cell models.

After ``synth_xilinx -family xc7 -flatten`` the netlist is annotated with the cell library's
``specify`` delays (``read_verilog -lib -specify +/xilinx/cells_sim.v``: prjxray-derived Artix-7 -1
figures) and ``sta`` finds the latest-arriving endpoint. Wires have no delay, so the worst path is a
*lower bound* on the clock period; routing typically adds 40-60 % on 7-series. Flip-flops and
LUT-RAMs have no timing arcs in the models, so paths start at their outputs at time 0 (no
clock-to-out) and end at their inputs (no setup time); BRAM and DSP clock-to-out are counted. The fabric logic depth
comes from ``ltp -noff`` restricted to LUT / CARRY4 / MUXF7 / MUXF8 cells (plain ``ltp`` treats
BRAM and DSP cells as combinational and reports nonsense paths through them); ``deep_endpoints``
lists, from the same netlist, every register that such a path of near the longest length ends at,
with the register it starts from (``ltp`` names only the longest, by opaque nets).

One yosys synthesis of the design's RTLIL (``hw.export.rtlil``; the Verilog frontend is what made
the large configs intractable) gives the resources (``stat -json``) and the netlist that the
analysis (seconds) reads. The report is cached as JSON under ``~/.cache/pyvta/timing/reports/<tag>-<source key>.json``
(the key hashes hw/'s sources, the config and the scripts, as ``hw.runner`` keys its builds), so a
rerun of unchanged sources reads it at once; the netlist under ``timing/<tag>-<RTLIL hash>``, so
an edit to hw/ that leaves the exported RTLIL unchanged re-exports but does not resynthesise.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyvta import isa
from pyvta.hw.export import TOP_NAME, rtlil
from pyvta.hw.runner import default_cache_dir, source_key
from pyvta.hw.synth import SynthReport, parse_stat, run_yosys

FABRIC_CELLS = ("LUT*", "CARRY4", "MUXF7", "MUXF8")
FABRIC_PREFIXES = tuple(c.rstrip("*") for c in FABRIC_CELLS)
DEEP_MARGIN_LEVELS = 2  # the report lists the ends within this many levels of the longest path
DEEP_ROWS = 24
# The quick mode's config: 2x2 GEMM, small buffers (a regression check that synthesises in seconds).
QUICK_CONFIG = isa.HwConfig(
    LOG_BLOCK=1,
    LOG_UOP_BUFF_SIZE=8,
    LOG_INP_BUFF_SIZE=8,
    LOG_WGT_BUFF_SIZE=8,
    LOG_ACC_BUFF_SIZE=8,
    LOG_BUS_WIDTH=6,
)
# Stage 1 (slow, cached by source key): synthesis, resources, the netlist.
SYNTH_SCRIPT = (
    f"read_rtlil vta.il; synth_xilinx -family xc7 -flatten -noiopad -noclkbuf -top {TOP_NAME};"
    " tee -q -o stat.json stat -json; write_rtlil netlist.il"
)
# Stage 2 (seconds): cell-delay STA and the fabric-only logic depth on the stored netlist. ltp
# walks the selected wires through the selected cells: all wires, fabric cells only. The JSON
# (for deep_endpoints) is written before the cell library is read (its models have processes).
ANALYSIS_SCRIPT = (
    "read_rtlil netlist.il; write_json netlist.json;"
    " read_verilog -lib -specify +/xilinx/cells_sim.v;"
    " tee -q -o sta.txt sta;"
    " select -set fabric " + " ".join(f"t:{c}" for c in FABRIC_CELLS) + ";"
    " tee -q -o ltp.txt ltp -noff @fabric w:*"
)
# ``cell (TYPE.IN->OUT)`` on the way; ``cell (TYPE.PIN)`` where the path ends at a cell's input
# (its arrival includes that pin's setup into the cell's internal register, e.g. a DSP's PCIN)
_STEP = re.compile(r"^\s*(\d+)\s+(\S+)\s+\((\w+)\.(\w+)(?:->(\w+))?\)\s*$")
_WORST = re.compile(r"Latest arrival time in '?(\S+?)'? is (\d+)")
_LTP = re.compile(r"Longest topological path in \S+ \(length=(-?\d+)\)")


@dataclass(frozen=True)
class PathStep:
    """One cell on the worst path: ``arc`` is ``input->output`` (``CLK->DOADO``: clock-to-out)."""

    cell: str
    cell_type: str
    arc: str
    delay_ps: int
    arrival_ps: int


@dataclass
class TimingReport:
    """Cell-delay timing of one synthesised config (picoseconds; no routing delay)."""

    tag: str
    source_key: str
    worst_ps: int
    path: list[PathStep]
    logic_levels: int  # fabric cells (LUT, CARRY4, MUXF7/8) on the longest combinational path
    fabric_path: list[str]
    resources: SynthReport
    endpoints_unannotated: int = 0
    extra: dict = field(default_factory=dict)
    # (levels, start net, end register) of the deepest fabric paths, one per end (deep_endpoints)
    deep: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def period_lower_bound_ns(self) -> float:
        return self.worst_ps / 1000

    @property
    def fmax_upper_bound_mhz(self) -> float:
        return 1e6 / self.worst_ps if self.worst_ps else float("inf")

    def breakdown(self) -> list[tuple[str, str, int, int]]:
        """(cell type, arc, count, total delay ps) of the worst path, in path order of first use."""
        counts: Counter = Counter()
        totals: Counter = Counter()
        order: list[tuple[str, str]] = []
        for step in self.path:
            key = (step.cell_type, step.arc)
            if key not in counts:
                order.append(key)
            counts[key] += 1
            totals[key] += step.delay_ps
        return [(t, a, counts[(t, a)], totals[(t, a)]) for t, a in order]

    def table(self) -> str:
        lines = [
            f"config {self.tag} (sources {self.source_key}): worst cell-delay path"
            f" {self.period_lower_bound_ns:.2f} ns -> at most {self.fmax_upper_bound_mhz:.0f} MHz"
            " before routing",
            "",
            "| cell | arc | count | delay ns |",
            "|---|---|---:|---:|",
        ]
        for cell_type, arc, count, total_ps in self.breakdown():
            lines.append(f"| {cell_type} | {arc} | {count} | {total_ps / 1000:.2f} |")
        lines.append("")
        lines.append(
            f"fabric logic levels (LUT/CARRY4/MUXF7/MUXF8, longest path): {self.logic_levels}"
        )
        if self.fabric_path:
            lines.append(f"  from {self.fabric_path[0]}")
            lines.append(f"  to   {self.fabric_path[-1]}")
        if self.deep:
            lines.append(
                f"deepest ends (within {DEEP_MARGIN_LEVELS} levels; levels: start -> end):"
            )
            lines.extend(f"  {n:3d}: {start} -> {end}" for n, start, end in self.deep)
        lines.append("")
        lines.append(self.resources.table())
        return "\n".join(lines)

    def to_json(self) -> str:
        d = asdict(self)
        d["resources"].pop("device")
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str) -> TimingReport:
        d = json.loads(text)
        d["path"] = [PathStep(**s) for s in d["path"]]
        d["deep"] = [tuple(row) for row in d.get("deep", [])]
        d["resources"] = SynthReport(**d["resources"])
        return cls(**d)


def parse_sta(text: str) -> tuple[int, list[PathStep], int]:
    """(worst arrival ps, the worst path from its start point, endpoints without an arrival).

    yosys prints the path from the endpoint back to the start: an arrival time and
    ``cell (TYPE.IN->OUT)`` per cell, net names in between. A cell's delay is its arrival minus the
    previous cell's.
    """
    m = _WORST.search(text)
    if not m:
        raise RuntimeError("yosys sta printed no 'Latest arrival time' line (see synth.log)")
    worst = int(m.group(2))
    steps = []
    for line in text[m.end() :].splitlines():
        if line.startswith("Warning") or line.startswith("Arrival histogram"):
            if steps:
                break
            continue
        s = _STEP.match(line)
        if s:
            arc = f"{s.group(4)}->{s.group(5)}" if s.group(5) else f"{s.group(4)} setup"
            steps.append((int(s.group(1)), s.group(2), s.group(3), arc))
    path = []
    previous = 0
    for arrival, cell, cell_type, arc in reversed(steps):
        path.append(PathStep(cell, cell_type, arc, arrival - previous, arrival))
        previous = arrival
    unannotated = text.count("has no (* sta_arrival *) value")
    return worst, path, unannotated


def parse_ltp(text: str) -> tuple[int, list[str]]:
    """(longest path length in cells, its nets) from ``ltp`` output; 0 when nothing is selected."""
    m = _LTP.search(text)
    if not m:
        raise RuntimeError("yosys ltp printed no 'Longest topological path' line (see synth.log)")
    nets = re.findall(r"^\s*\d+:\s*(\S+)", text[m.end() :], flags=re.MULTILINE)
    return max(int(m.group(1)), 0), nets


def deep_endpoints(netlist: dict, min_levels: int) -> list[tuple[int, str, str]]:
    """(levels, start, end) of the fabric paths at least ``min_levels`` deep, deepest first, one
    per end register: from yosys ``write_json`` of the synthesised netlist. ``start``/``end`` are
    the nets' public names where they have one (a register's output, e.g. ``compute.dma.insn``);
    an end is the register (or memory, DSP, port) the path's last fabric cell feeds."""
    top = next(m for m in netlist["modules"].values() if m.get("attributes", {}).get("top"))
    names: dict[int, str] = {}
    for name, net in top["netnames"].items():
        for bit in net["bits"]:
            if isinstance(bit, int) and (bit not in names or names[bit].startswith("$")):
                names[bit] = name
    drivers: dict[int, list[int]] = {}  # fabric cell output bit -> the cell's input bits
    ends: dict[int, set[str]] = {}  # fabric-driven bit -> what it feeds outside the fabric
    for cell_name, cell in top["cells"].items():
        dirs, conns = cell["port_directions"], cell["connections"]
        ins = [b for p, bits in conns.items() if dirs.get(p) == "input" for b in bits]
        ins = [b for b in ins if isinstance(b, int)]
        if cell["type"].startswith(FABRIC_PREFIXES):
            for p, bits in conns.items():
                if dirs.get(p) == "output":
                    drivers.update((b, ins) for b in bits if isinstance(b, int))
            continue
        outs = [b for p, bits in conns.items() if dirs.get(p) == "output" for b in bits]
        label = names.get(outs[0], cell_name) if outs and isinstance(outs[0], int) else cell_name
        for b in ins:
            ends.setdefault(b, set()).add(label.split("[")[0])
    for port, p in top["ports"].items():
        if p["direction"] == "output":
            for b in p["bits"]:
                if isinstance(b, int):
                    ends.setdefault(b, set()).add(port)
    depth: dict[int, int] = {}
    back: dict[int, int] = {}
    visiting: set[int] = set()
    for root in ends:
        stack = [root]
        while stack:
            bit = stack[-1]
            if bit in depth:
                stack.pop()
                continue
            if bit in visiting and any(b not in depth for b in drivers.get(bit, ())):
                depth[bit] = 0  # a combinational loop: cut it here
                stack.pop()
                continue
            visiting.add(bit)
            ins = drivers.get(bit)
            if ins is None:
                depth[bit] = 0
                stack.pop()
                continue
            todo = [b for b in ins if b not in depth]
            if todo:
                stack.extend(todo)
                continue
            deepest = max(ins, key=depth.__getitem__, default=None)
            depth[bit] = 1 + (depth[deepest] if deepest is not None else 0)
            if deepest is not None:
                back[bit] = deepest
            stack.pop()
    best: dict[str, tuple[int, str]] = {}
    for bit, labels in ends.items():
        if depth[bit] < min_levels:
            continue
        start = bit
        while start in back:
            start = back[start]
        for label in labels:
            if depth[bit] > best.get(label, (0, ""))[0]:
                best[label] = (depth[bit], names.get(start, str(start)))
    # ends that differ only in numbers (lanes, bits: ``alu.simple_3``) and share the path: one row
    groups: dict[tuple[int, str, str], list[str]] = {}
    for end, (levels, start) in best.items():
        groups.setdefault((levels, start, re.sub(r"\d+", "#", end)), []).append(end)
    rows = [
        (levels, start, ends[0] if len(ends) == 1 else f"{pattern} ({len(ends)} ends)")
        for (levels, start, pattern), ends in groups.items()
    ]
    return sorted(rows, key=lambda r: (-r[0], r[2]))


def report_key(cfg: isa.HwConfig, **vta_kwargs) -> str:
    """The cache key of ``cfg``'s report: hw/'s and isa/'s sources, the config, the scripts."""
    return source_key(cfg, f"yosys: {SYNTH_SCRIPT}\n{ANALYSIS_SCRIPT}", vta_kwargs)


def _root(build_dir: str | Path | None) -> Path:
    return Path(build_dir) if build_dir else default_cache_dir() / "timing"


def latest_report(cfg: isa.HwConfig, build_dir: str | Path | None = None) -> TimingReport | None:
    """The newest cached report of ``cfg`` whatever sources it was made from (its
    ``source_key`` says which; compare ``report_key(cfg)``), or None."""
    reports = sorted(
        _root(build_dir).glob(f"reports/{cfg.tag}-*.json"), key=lambda p: p.stat().st_mtime
    )
    return TimingReport.from_json(reports[-1].read_text()) if reports else None


def timing(
    cfg: isa.HwConfig = isa.DEFAULT_CONFIG,
    build_dir: str | Path | None = None,
    timeout_s: float = 7200,
    use_cache: bool = True,
    **vta_kwargs,
) -> TimingReport:
    """Synthesise ``cfg`` and estimate its timing (a cached report when the sources are unchanged).

    ``build_dir`` must lie outside the system temp folder (yowasp maps its own over it).
    On 2 shared cores (load about 3): the default config about 17 minutes, the UltraScale one
    (1x32, 1 MiB weight buffer) about 30 (ABC9 14 of them, 2.2 GB); ``QUICK_CONFIG``: well under
    a minute.
    """
    key = report_key(cfg, **vta_kwargs)
    root = _root(build_dir)
    report_path = root / "reports" / f"{cfg.tag}-{key}.json"
    if use_cache and report_path.exists():
        return TimingReport.from_json(report_path.read_text())
    text = rtlil(cfg, **vta_kwargs)
    # The netlist is keyed by the RTLIL itself: edits to hw/ that leave the RTL alone reuse it.
    netlist_key = hashlib.sha256(f"{SYNTH_SCRIPT}\n{text}".encode()).hexdigest()[:16]
    out = root / f"{cfg.tag}-{netlist_key}"
    out.mkdir(parents=True, exist_ok=True)
    if not (use_cache and (out / "netlist.il").exists()):
        (out / "vta.il").write_text(text)
        run_yosys(SYNTH_SCRIPT, out, timeout_s)
    run_yosys(ANALYSIS_SCRIPT, out, timeout_s, log="analysis.log")
    worst, path, unannotated = parse_sta((out / "sta.txt").read_text())
    levels, fabric_path = parse_ltp((out / "ltp.txt").read_text())
    netlist = json.loads((out / "netlist.json").read_text())
    deep = deep_endpoints(netlist, max(1, levels - DEEP_MARGIN_LEVELS))[:DEEP_ROWS]
    (out / "netlist.json").unlink()  # large (60 MB on the default config); the .il stays
    report = TimingReport(
        tag=cfg.tag,
        source_key=key,
        worst_ps=worst,
        path=path,
        logic_levels=levels,
        fabric_path=fabric_path,
        resources=parse_stat(json.loads((out / "stat.json").read_text())),
        endpoints_unannotated=unannotated,
        deep=deep,
    )
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(report.to_json())
    return report
