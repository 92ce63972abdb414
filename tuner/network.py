"""Tune every accelerator layer of a network, and hand the best configs back to the compiler.

    layers = network_layers("resnet18.onnx")          # distinct (workload, epilogue), counts
    summary = tune_network(layers, 200, log="resnet18.jsonl", plot="resnet18.png")
    configs = network_configs("resnet18.jsonl", layers) # for accelerator_for(configs=...)
    write_best("resnet18.jsonl", "best.jsonl")          # one line per layer, to ship (tuner.log)

A layer is tuned exactly as it runs in the network: its padding, its fused epilogue and the
lowering choices its bias values allow (``compiler.backend.vta.graph_backend.accelerator_layers``
reads them from the compiled graph; nothing runs). The first trials of each layer are the backend's
analytic default and its most promising candidates (``task.prior``), so the tuned config is
never worse than the untuned default. All
layers append to one log; ``resume=True`` continues a killed run layer by layer.
``pretuned/`` holds such best-config logs for the zoo's models (``pretuned_log``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from pyvta.tuner.log import apply_best
from pyvta.tuner.task import Task
from pyvta.tuner.tune import TuneResult, tune
from pyvta.tuner.vta import conv_config, default_vta_config, vta_layer_task


def network_layers(model, progress=print) -> list:
    """The distinct accelerator layers (``graph_backend.Layer``) of ``model``: an ONNX path, a
    compiled artifact (``.npz``) or a ``CompiledModel`` (compiled for ``"vta"``)."""
    from pyvta.compiler.backend.vta.graph_backend import accelerator_layers
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.targets import get_target
    from pyvta.runtime.compiled_model import CompiledModel

    if not isinstance(model, CompiledModel):
        path = Path(model)
        if not path.exists():
            raise FileNotFoundError(f"no model file {path}")
        if path.suffix == ".npz":
            model = CompiledModel.load(path)
        else:
            t0 = time.perf_counter()
            model = compile_model(path, "vta", lower=False)
            if progress:
                progress(f"compiled {path.name} for VTA in {time.perf_counter() - t0:.1f} s")
    if not get_target(model.target).accelerator:
        raise ValueError(
            f"the model was compiled for {model.target!r}; tuning needs an accelerator target"
            " ('vta')"
        )
    return accelerator_layers(model.graph)


def layer_task(layer) -> Task:
    return vta_layer_task(layer.workload, layer.epilogue)


def layer_name(layer) -> str:
    ep = layer.epilogue
    extra = "+res" if ep.residual else ""
    return f"{layer.workload}{extra}"


def budget_tasks(layers, first: int = 12) -> list:
    """``tuner.budget.BudgetTask`` per layer: weighted by its launches, its first slice the
    compiler's analytic default (what the untuned compiler runs) and then the backend's ``first``
    most promising candidates (``task.prior``)."""
    from pyvta.tuner.budget import BudgetTask

    tasks = []
    for layer in layers:
        task = layer_task(layer)
        default = default_vta_config(task)
        cands = [default] + [c for c in task.prior(first) if c != default]
        tasks.append(BudgetTask(task, layer.count, cands, layer_name(layer)))
    return tasks


@dataclass
class LayerResult:
    layer: object
    task: Task
    default_cycles: float  # the backend's analytic default (``default_vta_config``)
    result: TuneResult

    @property
    def tuned_cycles(self) -> float:
        return self.result.best_cost


@dataclass
class NetworkTuneSummary:
    layers: list = field(default_factory=list)  # LayerResult per distinct layer
    wall_s: float = 0.0

    def cycles(self, which: str = "tuned") -> float:
        """Accelerator cycles of one inference (each layer times its launches)."""
        attr = "tuned_cycles" if which == "tuned" else "default_cycles"
        return sum(getattr(r, attr) * r.layer.count for r in self.layers)

    def table(self) -> str:
        rows = [
            f"{'layer':44s} {'n':>2s} {'default':>10s} {'tuned':>10s} {'speedup':>7s}"
            f" {'util':>6s} {'trials':>6s}"
        ]
        for r in self.layers:
            ideal = r.layer.workload.gemm_uops
            rows.append(
                f"{layer_name(r.layer):44s} {r.layer.count:2d} {r.default_cycles:10.0f}"
                f" {r.tuned_cycles:10.0f} {r.default_cycles / r.tuned_cycles:7.3f}"
                f" {100 * ideal / r.tuned_cycles:5.1f}% {len(r.result.history):6d}"
            )
        d, t = self.cycles("default"), self.cycles("tuned")
        rows.append(
            f"one inference: default {d / 1e6:.3f} M cycles, tuned {t / 1e6:.3f} M cycles"
            f" ({d / t:.3f}x); tuning took {self.wall_s:.0f} s"
        )
        return "\n".join(rows)


def tune_network(
    layers,
    n_trials: int,
    log: str | None = None,
    tuner: str = "xgb",
    seed: int = 0,
    resume: bool = False,
    first: int = 12,
    batch_size: int = 32,
    progress: bool = True,
    plot: str | None = None,
    measurer=None,
) -> NetworkTuneSummary:
    """Tune each layer for ``n_trials``: first the compiler's analytic default (the baseline
    of the summary), then the backend's ``first`` most promising candidates (``task.prior``).
    Layers are tuned largest first (by cycles x launches of their default)."""
    from pyvta.tuner.tune import default_measurer

    t0 = time.perf_counter()
    summary = NetworkTuneSummary()
    tasks = [layer_task(layer) for layer in layers]
    own = measurer is None
    if own:
        measurer = default_measurer(tasks[0]) if tasks else None
    try:
        starts = []
        for task in tasks:
            default = default_vta_config(task)  # what the untuned compiler runs
            cands = [default] + [c for c in task.prior(first) if c != default]
            default_res = measurer.measure(task, cands[:1])[0]
            starts.append((cands, default_res.cost))
        order = sorted(range(len(tasks)), key=lambda i: -starts[i][1] * layers[i].count)
        for n, i in enumerate(order):
            layer, task = layers[i], tasks[i]
            cands, default_cycles = starts[i]
            if progress:
                print(f"[{n + 1}/{len(tasks)}] {layer_name(layer)} x{layer.count}", flush=True)
            res = tune(
                task,
                n_trials,
                measurer,
                tuner=tuner,
                batch_size=batch_size,
                log=log,
                resume=resume,
                seed=seed,
                progress=progress,
                initial=cands,
                desc=layer_name(layer),
            )
            summary.layers.append(LayerResult(layer, task, default_cycles, res))
    finally:
        if own and measurer is not None:
            measurer.close()
    summary.wall_s = time.perf_counter() - t0
    if plot is not None and summary.layers:
        plot_network(summary, plot)
    return summary


def plot_network(summary: NetworkTuneSummary, path: str) -> str:
    """Per layer: the best-so-far speed-up over the default against trials, and the whole
    network's cycles (sum over layers) after the same number of trials per layer."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=100)
    ax, ax2 = fig.subplots(1, 2)
    n = max(len(r.result.best_curve) for r in summary.layers)
    total = np.zeros(n)
    for r in summary.layers:
        curve = np.array(r.result.best_curve, dtype=float)
        curve = np.concatenate([curve, np.full(n - len(curve), curve[-1] if len(curve) else 0)])
        ok = np.isfinite(curve)
        ax.plot(np.arange(1, n + 1)[ok], r.default_cycles / curve[ok], lw=1)
        total += np.where(ok, curve, r.default_cycles) * r.layer.count
    ax.set_xlabel("trials per layer")
    ax.set_ylabel("speed-up over the default config")
    ax.set_title(f"{len(summary.layers)} layers")
    ax.grid(alpha=0.3)
    ax2.plot(np.arange(1, n + 1), total / 1e6, color="k")
    ax2.axhline(summary.cycles("default") / 1e6, ls="--", color="gray", label="default configs")
    ax2.set_xlabel("trials per layer")
    ax2.set_ylabel("M cycles per inference")
    ax2.set_title("network")
    ax2.grid(alpha=0.3)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path


PRETUNED = Path(__file__).resolve().parent / "pretuned"


def pretuned_log(model: str) -> Path | None:
    """The shipped best-config log for a zoo model (e.g. ``"resnet18_224"``), if there is one.
    Made with ``pyvta tune`` (400 trials per layer) and ``tuner.log.write_best``."""
    path = PRETUNED / f"{model}_vta-sim.jsonl"
    return path if path.exists() else None


# shifts a layer's tuned config is looked up under when its own has no record (a shift's value
# is an ALU immediate: the instruction stream and its cycles do not depend on it)
SHIFT_VALUES = range(1, 32)


def network_configs(log: str, layers) -> dict:
    """``{(ConvWorkload, Epilogue): ConvConfig}``: the best logged config of each layer (layers
    without a valid record are left out), for ``AcceleratorBackend(configs=...)``. A layer
    whose own task has no record takes the record of the same workload and epilogue with
    another non-zero requantizing shift, nearest first (a recalibration moves shifts by a bit
    or two, e.g. the whole partition's max pool keeping the stem's scale; the SHR's immediate
    does not change the schedule, so the config runs in the same cycles)."""
    out = {}
    for layer in layers:
        best = apply_best(log, layer_task(layer))
        ep = layer.epilogue
        if best is None and ep.shift:
            others = sorted(
                (s for s in SHIFT_VALUES if s != ep.shift), key=lambda s: abs(s - ep.shift)
            )
            for s in others:
                best = apply_best(log, vta_layer_task(layer.workload, replace(ep, shift=s)))
                if best is not None:
                    break
        if best is not None:
            out[(layer.workload, layer.epilogue)] = conv_config(best)
    return out


def best_cycles(log: str, layers) -> float:
    """Cycles of one inference with the best logged config of every layer (inf if any layer
    has none)."""
    from pyvta.tuner.log import best_record, read_records

    total = 0.0
    for layer in layers:
        rec = best_record(read_records(log, layer_task(layer)))
        total += math.inf if rec is None else rec.result.cost * layer.count
    return total
