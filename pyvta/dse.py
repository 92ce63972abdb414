"""Design-space exploration over hardware configs: resources, timing, ResNet-18 latency.

For each config: synthesis (``hw.timing``: resources, the worst cell-delay path), the fit on each
board part (``hw.synth.BOARD_DEVICES``), ResNet-18's accelerator cycles on the simulator (the zoo
network compiled with ``compile_model(..., hw=cfg)``; the shipped tuned configs where they were
tuned for the config (``tuner.network.pretuned_log``: the default config), else analytic
default schedules; the table says which), and the latency
at the clock the design can reach. The reachable clock is an estimate: the cell-delay lower bound
(Artix-7 -1 cell models, no routing) taken as ``1 - ROUTING_SHARE`` of the period.

Every config, the UltraScale+ ones too, is synthesised with ``-family xc7`` (why: ``hw.synth``); the
clock estimate is the slower family's (a -1 Zynq UltraScale+ is faster).

Every stage's result is cached per config as JSON under ``~/.cache/pyvta/dse`` (synthesis also by
``hw.timing``'s own cache), so an interrupted sweep resumes where it stopped; a stage that fails
(e.g. a synthesis past its timeout) is recorded as missing and retried on the next run. The timing
stage records the hw/ sources it was synthesised from and is redone (from ``hw.timing``'s cache
where it has them) when they change; ``reuse_timing`` instead takes the newest synthesis of a config
from any sources, which the table notes. The ResNet-18 stage likewise records the compiler's,
simulator's and ISA's sources and the tuned log it used, and is redone when they change.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyvta import isa

ROUTING_SHARE = 0.4  # of the period left for routing (the issue's 6 ns of a 10 ns period)
RESOURCES = ("lut", "ff", "bram36", "dsp")
PLOT_RESOURCES = ("lut", "dsp", "bram36")


@dataclass
class DsePoint:
    """One config's figures; a field left None was not measured (its stage failed or was off)."""

    name: str
    tag: str
    resources: dict[str, float] | None = None  # lut, ff, bram36, dsp
    share: dict[str, dict[str, float]] | None = None  # board -> resource -> used / available
    fits: dict[str, bool] | None = None  # board -> fits
    cell_delay_ns: float | None = None
    logic_levels: int | None = None
    resnet18_cycles: int | None = None
    timing_sources: str | None = None  # hw.timing's source key of the synthesis used
    resnet18_schedules: str | None = None  # "tuned configs (LOG)" or "analytic defaults"
    resnet18_sources: str | None = None  # resnet18_sources() of the run
    notes: list[str] = field(default_factory=list)

    @property
    def clock_mhz(self) -> float | None:
        """The estimated reachable clock: cell delay = (1 - ROUTING_SHARE) of the period."""
        if not self.cell_delay_ns:
            return None
        return 1e3 * (1 - ROUTING_SHARE) / self.cell_delay_ns

    @property
    def latency_ms(self) -> float | None:
        if self.resnet18_cycles is None or self.clock_mhz is None:
            return None
        return self.resnet18_cycles / (self.clock_mhz * 1e3)


def _key(cfg: isa.HwConfig, options: dict) -> str:
    text = cfg.to_json() + json.dumps(options, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def measure_timing(cfg: isa.HwConfig, timeout_s: float, reuse: bool = False) -> dict:
    """Stage 1: synthesis and timing (``hw.timing``); with ``reuse``, the newest cached
    synthesis of ``cfg`` even where hw/ has changed since (synthesised only if there is none)."""
    from pyvta.hw.synth import BOARD_DEVICES
    from pyvta.hw.timing import latest_report, timing

    r = (latest_report(cfg) if reuse else None) or timing(cfg, timeout_s=timeout_s)
    res = r.resources
    used = {k: getattr(res, k) for k in RESOURCES}
    return {
        "resources": used,
        "share": {d.name: {k: used[k] / getattr(d, k) for k in RESOURCES} for d in BOARD_DEVICES},
        "fits": {d.name: res.fits(d) for d in BOARD_DEVICES},
        "cell_delay_ns": r.period_lower_bound_ns,
        "logic_levels": r.logic_levels,
        "timing_sources": r.source_key,
    }


def current_timing_sources(cfg: isa.HwConfig) -> str:
    from pyvta.hw.timing import report_key

    return report_key(cfg)


def latest_timing_sources(cfg: isa.HwConfig) -> str:
    """The sources of the newest cached synthesis of ``cfg`` (the current ones if none)."""
    from pyvta.hw.timing import latest_report

    r = latest_report(cfg)
    return r.source_key if r else current_timing_sources(cfg)


def _tuned_log(cfg: isa.HwConfig, size: int) -> Path | None:
    """The shipped tuned log of ResNet-18 at ``size`` if it was tuned for ``cfg`` (the VTA tuning
    tasks are the default config's), else None."""
    from pyvta.tuner.network import pretuned_log

    return pretuned_log(f"resnet18_{size}") if cfg.tag == isa.DEFAULT_CONFIG.tag else None


def resnet18_sources(cfg: isa.HwConfig, size: int) -> str:
    """Hash of what ResNet-18's cycles depend on: the compiler's, simulator's and ISA's sources
    and the tuned log used (if any)."""
    from pyvta.compiler.backend.llvm.cache import source_digest

    log = _tuned_log(cfg, size)
    h = hashlib.sha256(source_digest("compiler", "sim", "isa").encode())
    h.update(log.read_bytes() if log else b"no log")
    return h.hexdigest()[:16]


def measure_resnet18(cfg: isa.HwConfig, size: int) -> dict:
    """Stage 2: ResNet-18 (zoo, ``size`` x ``size``) accelerator cycles on the simulator, with the
    shipped tuned configs where they fit ``cfg`` (``_tuned_log``), else analytic defaults."""
    import tempfile

    import numpy as np

    from pyvta.compiler.backend.vta.graph_backend import accelerator_for
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.zoo import save_model
    from pyvta.driver import SimDevice
    from pyvta.runtime.compiled_model import run_model

    with tempfile.TemporaryDirectory() as tmp:
        path = save_model("resnet18", str(Path(tmp) / "resnet18.onnx"), size=size)
        cm = compile_model(path, "vta", lower=False, hw=cfg)
    configs, schedules = None, "analytic defaults"
    log = _tuned_log(cfg, size)
    if log is not None:
        from pyvta.tuner.network import network_configs, network_layers

        configs = network_configs(str(log), network_layers(cm))
        schedules = f"tuned configs ({log.name})"
    vta = accelerator_for(cm.graph, SimDevice(config=cfg), configs)
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    run_model(cm, x, backends={"vta": vta})
    return {
        "resnet18_cycles": int(vta.total_cycles),
        "resnet18_schedules": schedules,
        "resnet18_sources": resnet18_sources(cfg, size),
    }


@dataclass
class Explorer:
    """Runs the stages for each config, reading and writing the per-config cache."""

    cache_dir: Path
    size: int = 224
    synth: bool = True
    synth_timeout_s: float = 3600
    reuse_timing: bool = False  # take the newest synthesis of a config, from any hw/ sources
    stages: dict[str, Callable[[isa.HwConfig], dict]] = field(default_factory=dict)
    log: Callable[[str], None] = print
    # stage -> the sources its cached result must have been measured from (else it is rerun)
    sources: dict[str, Callable[[isa.HwConfig], str]] = field(default_factory=dict)

    def __post_init__(self):
        if not self.stages:
            if self.synth:
                self.stages["timing"] = lambda cfg: measure_timing(
                    cfg, self.synth_timeout_s, self.reuse_timing
                )
                self.sources.setdefault(
                    "timing", latest_timing_sources if self.reuse_timing else current_timing_sources
                )
            self.stages["resnet18"] = lambda cfg: measure_resnet18(cfg, self.size)
            self.sources.setdefault("resnet18", lambda cfg: resnet18_sources(cfg, self.size))

    def _now_sources(self, cfg: isa.HwConfig) -> str:
        """The hw sources a synthesis is compared with for the table's note: those on disk."""
        if self.reuse_timing:
            return current_timing_sources(cfg)
        return self.sources.get("timing", current_timing_sources)(cfg)

    def _cached(self, stage: str, cfg: isa.HwConfig, cached: dict) -> bool:
        if stage not in cached:
            return False
        want = self.sources.get(stage)
        return want is None or cached[stage].get(f"{stage}_sources") == want(cfg)

    def point(self, name: str, cfg: isa.HwConfig) -> DsePoint:
        path = self.cache_dir / f"{cfg.tag}-{_key(cfg, {'size': self.size})}.json"
        cached = json.loads(path.read_text()) if path.exists() else {}
        p = DsePoint(name, cfg.tag)
        for stage, fn in self.stages.items():
            if self._cached(stage, cfg, cached):
                continue
            t0 = time.monotonic()
            try:
                cached[stage] = fn(cfg)
            except Exception as exc:  # recorded, retried on the next run
                p.notes.append(f"{stage} failed: {type(exc).__name__}: {exc}"[:200])
                self.log(f"{name}: {p.notes[-1]}")
                continue
            self.log(f"{name}: {stage} in {time.monotonic() - t0:.0f} s")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cached, indent=1))
        for values in cached.values():  # every stage done so far, also those not run this time
            for k, v in values.items():
                setattr(p, k, v)
        if "timing" not in cached and not self.synth:
            p.notes.append("no synthesis yet (run without --no-synth)")
        elif "timing" in cached and not p.timing_sources:
            p.notes.append("synthesis of unrecorded hw sources (an earlier pyvta): rerun it")
        elif p.timing_sources and p.timing_sources != (now := self._now_sources(cfg)):
            p.notes.append(
                f"synthesis of hw sources {p.timing_sources}, not the current {now}"
                " (hw/ changed since)"
            )
        return p

    def explore(self, configs: dict[str, isa.HwConfig]) -> list[DsePoint]:
        return [self.point(name, cfg) for name, cfg in configs.items()]


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def overuse(p: DsePoint) -> str | None:
    """Which resources keep ``p`` off which boards (``"xczu7ev: BRAM36 113%"``), or None."""
    if not p.fits or all(p.fits.values()):
        return None
    over = [
        f"{board}: "
        + ", ".join(f"{k.upper()} {100 * v:.0f}%" for k, v in p.share[board].items() if v > 1)
        for board, fits in p.fits.items()
        if not fits
    ]
    return "over " + "; ".join(over) + " (block RAM only: URAM not counted)"


def table(points: list[DsePoint]) -> str:
    """Markdown: resources, board fit, timing, ResNet-18 cycles and latency per config."""
    from pyvta.hw.synth import BOARD_DEVICES

    boards = [d.name for d in BOARD_DEVICES]
    head = (
        "| config | tag | LUT | FF | BRAM36 | DSP | "
        + " | ".join(f"fits {b}" for b in boards)
        + " | cell delay ns | logic levels | clock MHz (est.) | ResNet-18 M cycles | latency ms |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in points:
        r = p.resources or {}
        fits = [("yes" if p.fits[b] else "no") if p.fits else "-" for b in boards]
        cycles = None if p.resnet18_cycles is None else p.resnet18_cycles / 1e6
        lines.append(
            f"| {p.name} | {p.tag} | {_fmt(r.get('lut'), 'g')} | {_fmt(r.get('ff'), 'g')}"
            f" | {_fmt(r.get('bram36'), 'g')} | {_fmt(r.get('dsp'), 'g')} | "
            + " | ".join(fits)
            + f" | {_fmt(p.cell_delay_ns, '.2f')} | {_fmt(p.logic_levels, 'd')}"
            f" | {_fmt(p.clock_mhz, '.0f')} | {_fmt(cycles, '.2f')} | {_fmt(p.latency_ms, '.2f')} |"
        )
    notes = [
        f"- {p.name}: ResNet-18 with {p.resnet18_schedules}" for p in points if p.resnet18_schedules
    ]
    notes += [f"- {p.name}: {o}" for p in points if (o := overuse(p))]
    notes += [f"- {p.name}: {n}" for p in points for n in p.notes]
    lines.append(
        f"\nclock estimate: the cell-delay path (Artix-7 -1 models, no routing) taken as"
        f" {100 * (1 - ROUTING_SHARE):.0f}% of the period."
    )
    return "\n".join(lines + notes)


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (cost, latency) that no other point beats in both (lower is better)."""
    front = []
    for i, (c, lat) in enumerate(points):
        dominated = any(
            (c2 <= c and l2 <= lat) and (c2 < c or l2 < lat)
            for j, (c2, l2) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def plot(points: list[DsePoint], path: str | Path, board: str = "xczu7ev") -> Path:
    """PNG: latency against the LUT, DSP and BRAM share of ``board``, Pareto front marked."""
    from matplotlib.figure import Figure  # Agg canvas; no pyplot global state

    done = [p for p in points if p.latency_ms is not None and p.share]
    fig = Figure(figsize=(12, 4), dpi=100)
    axes = fig.subplots(1, len(PLOT_RESOURCES), sharey=True)
    for ax, res in zip(axes, PLOT_RESOURCES, strict=True):
        xy = [(100 * p.share[board][res], p.latency_ms) for p in done]
        front = sorted((xy[i] for i in pareto(xy)), key=lambda t: t[0])
        ax.scatter([x for x, _ in xy], [y for _, y in xy])
        for p, (x, y) in zip(done, xy, strict=True):
            ax.annotate(p.name, (x, y), textcoords="offset points", xytext=(4, 4))
        if front:
            ax.plot([x for x, _ in front], [y for _, y in front], "--", alpha=0.6, label="Pareto")
            ax.legend()
        ax.set_xlabel(f"{res.upper()} share of {board} (%)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ResNet-18 latency (ms, estimated clock)")
    fig.suptitle("pyvta design-space exploration")
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)


def to_json(points: list[DsePoint]) -> str:
    return json.dumps(
        [asdict(p) | {"clock_mhz": p.clock_mhz, "latency_ms": p.latency_ms} for p in points],
        indent=1,
    )
