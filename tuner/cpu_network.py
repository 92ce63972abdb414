"""Tune every CPU conv layer of a network, and hand the best schedules back to the compiler.

    layers = cpu_network_layers("resnet18.onnx")        # distinct conv workloads, counts
    tune_cpu_network(layers, 32, log="resnet18_cpu.jsonl")
    schedules = cpu_schedules("resnet18_cpu.jsonl", layers)
    compile_model("resnet18.onnx", "cpu", cpu_schedules=schedules)

A layer is a ``compiler.targets.cpu.kernels.ConvWorkload`` exactly as the layout plan runs it
(its channel blocks, padding, stride). Each has a task per template that applies (direct
NCHWc; Winograd for 3x3 stride 1; pointwise for 1x1 stride 1; depthwise for a depthwise
layer, its only one), so "Winograd where it wins" is decided by measurement.
Each task first measures the compiler's untuned choice (for the direct template; for
Winograd the first tile that fits) and then spends its share of the trial budget: the
budget is spread over the tasks in proportion to their expected gain, the time their layer
takes per inference with the default schedule (measured: default cost x launches).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pyvta.tuner.log import best_record, read_records

PRETUNED = Path(__file__).resolve().parent / "pretuned"
MIN_TRIALS = 4
SIDE_BY_SIDE = "side by side"  # the msg of compare_templates' records


@dataclass(frozen=True)
class CpuLayer:
    workload: object  # compiler.targets.cpu.kernels.ConvWorkload
    count: int  # launches per inference


def cpu_network_layers(model) -> list[CpuLayer]:
    """The distinct tunable conv layers of ``model`` (an ONNX path or a ``CompiledModel``
    compiled for ``"cpu"``), in network order."""
    from dataclasses import replace

    from pyvta.compiler.graph.onnx_import import import_onnx
    from pyvta.compiler.graph.pipeline import options_for, run_pipeline
    from pyvta.compiler.targets.cpu.kernels import node_workload
    from pyvta.runtime.compiled_model import CompiledModel

    if isinstance(model, CompiledModel):
        graph = model.graph
    else:  # the layout plan only: no kernels built
        options = replace(options_for("cpu"), cpu_build=False)
        graph = run_pipeline(import_onnx(model), options)
    counts: dict = {}
    for n in graph.nodes:
        if n.op == "cpu_conv2d":
            wl = node_workload(n, graph.values[n.inputs[0]].shape)
            counts[wl] = counts.get(wl, 0) + 1
    return [CpuLayer(wl, c) for wl, c in counts.items()]


def network_measurer(layers: list[CpuLayer]):
    """The measurer of a network's layers: each candidate timed after the network's weights
    (``network_evict_bytes``) passed through the caches, as it runs there
    (``CpuBackend(cache="cold")``); alone and warm, a layer's weights stay in the caches and
    configs with more of them (Winograd's larger tiles) look better than they run."""
    from pyvta.tuner.cpu_measure import CpuBackend, network_evict_bytes
    from pyvta.tuner.measure import LocalMeasurer

    weights = sum(layer.count * layer.workload.weight_bytes for layer in layers)
    return LocalMeasurer(CpuBackend(cache="cold", evict_bytes=network_evict_bytes(weights)))


def _tasks(layer: CpuLayer):
    from pyvta.tuner.cpu import nchwc_conv_tasks

    return nchwc_conv_tasks(layer.workload)


def _default_knobs(task, layer: CpuLayer) -> dict | None:
    """The compiler's untuned knobs of the task's template, named as its space names them
    (None: the template has no untuned choice here: a Winograd tile that does not fit)."""
    from pyvta.compiler.targets.cpu.kernels import (
        default_depthwise_knobs,
        default_direct_knobs,
        default_pointwise_knobs,
        default_winograd_knobs,
    )

    wl = layer.workload
    if task.name == "cpu.conv2d_nchwc":
        k = dict(default_direct_knobs(wl))
        k["tile"] = (k.pop("ow_block"), k.pop("oc_tile") or wl.ob)
    elif task.name == "cpu.winograd_nchwc":
        k = default_winograd_knobs(wl)
        k = None if k is None else {"tile": (k["p_block"], k["k_block"]), "out_tile": k["out_tile"]}
    elif task.name == "cpu.pointwise_nchwc":
        d = default_pointwise_knobs(wl).to_dict()
        k = {"tile": (d["p_block"], d["oc_tile"] or wl.ob)}
        k.update({n: d[n] for n in ("oc_blocks", "tile_order", "parallel_loops")})
        passes = next(knob for knob in task.space.knobs if knob.name == "k_blocks")
        if d["k_blocks"] in passes.values:  # else one pass as the space's default runs it
            k["k_blocks"] = d["k_blocks"]
    else:  # depthwise (for narrow groups the template's untuned tile, untuned or not)
        k = default_depthwise_knobs(wl)
        k = {"tile": (k["ow_block"], k["y_block"])}
    return k


def _default_point(task, layer: CpuLayer):
    """The compiler's untuned knobs of the task's template as a point of its space (the
    knobs the space has; the others at their space defaults), or where its tile is not in the
    space, the point with the nearest tile (log-distance); the first point if there is no
    untuned choice. See :func:`default_in_space`."""
    k = _default_knobs(task, layer)
    if k is None:
        return task.space.get(0)
    names = {knob.name for knob in task.space.knobs}
    point = {n: v for n, v in k.items() if n in names}
    try:
        return task.space.config(point)
    except ValueError:
        tiles = next(knob.values for knob in task.space.knobs if knob.name == "tile")
        want = np.log2(np.array(point["tile"], dtype=float))

        def far(t) -> float:
            return float(np.abs(np.log2(np.array(t, dtype=float)) - want).sum())

        try:
            return task.space.config({**point, "tile": min(tiles, key=far)})
        except ValueError:
            return task.space.get(0)


def default_in_space(task, layer: CpuLayer) -> bool:
    """Whether :func:`_default_point` is the compiler's untuned schedule of the template (its
    knobs that the space has, an output-channel tile of 0 read as the whole block), not a
    stand-in (the nearest tile, or the first point)."""
    k = _default_knobs(task, layer)
    if k is None:
        return False
    got = _default_point(task, layer).to_dict()
    return all(tuple(got[n]) == tuple(v) if n == "tile" else got[n] == v
               for n, v in k.items() if n in got)  # fmt: skip


def layer_schedule(task, config, layer: CpuLayer) -> dict:
    """The ``attrs["schedule"]`` the network runs for ``config`` of ``layer``'s ``task``: its
    space's knobs (``tuner.cpu.schedule_of``), and the knobs its space lacks as the compiler's
    untuned choice for the layer has them (``default_conv_schedule``: its ``parallel``, off
    for a layer too small to share, and, of the same template, the rest): a tuned schedule
    keeps what the compiler decides outside the space."""
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.cpu import schedule_of

    sched = schedule_of(task, config)
    default = default_conv_schedule(layer.workload)
    same = default["template"] == sched["template"]
    fill = {k: v for k, v in default["knobs"].items() if same or k == "parallel"}
    return {"template": sched["template"], "knobs": {**fill, **sched["knobs"]}}


def cpu_budget_tasks(layers: list[CpuLayer]) -> list:
    """``tuner.budget.BudgetTask`` per task of each layer (its templates, one group: the
    network runs the best of them), weighted by the layer's launches, its default the
    template's untuned knobs (:func:`_default_point`), ``untuned`` for the template the
    compiler picks untuned (``default_conv_schedule``), ``stand_in`` where its space lacks that
    schedule (:func:`default_in_space`: the nearest point's cost estimates the untuned one),
    ``flops`` the layer's."""
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.budget import BudgetTask
    from pyvta.tuner.cpu import schedule_of

    out = []
    for layer in layers:
        wl = layer.workload
        picked = default_conv_schedule(wl)["template"]
        for task in _tasks(layer):
            default = _default_point(task, layer)
            template = schedule_of(task, default)["template"]
            name = f"{template} {wl.key.removeprefix('conv2d_nchwc ')}"
            out.append(
                BudgetTask(
                    task,
                    layer.count,
                    [default],
                    name,
                    wl.key,
                    untuned=template == picked,
                    stand_in=not default_in_space(task, layer),
                    flops=float(wl.flops),
                )  # fmt: skip
            )
    return out


def spread_trials(costs: list[float], total: int, floor: int = MIN_TRIALS) -> list[int]:
    """``total`` trials over tasks in proportion to ``costs`` (their expected gain), each at
    least ``floor`` (and at most its space's size is the caller's concern)."""
    s = sum(costs) or 1.0
    return [max(floor, round(total * c / s)) for c in costs]


def tune_cpu_network(
    layers: list[CpuLayer],
    trials_per_layer: int,
    log: str | None = None,
    tuner: str = "xgb",
    seed: int = 0,
    resume: bool = False,
    progress: bool = True,
    final_check: int = 4,
    measurer=None,
    batch_size: int = 16,
) -> list[tuple[CpuLayer, object, float, float]]:
    """Tune every task of ``layers`` with ``trials_per_layer x len(layers)`` trials in all
    (spread by expected gain); returns ``(layer, task, default seconds, best seconds)``."""
    from pyvta.tuner.tune import tune

    pairs = [(layer, task) for layer in layers for task in _tasks(layer)]
    own = measurer is None
    if own:
        measurer = network_measurer(layers) if pairs else None
    out = []
    try:
        defaults = []
        for layer, task in pairs:
            res = measurer.measure(task, [_default_point(task, layer)])[0]
            defaults.append(res.cost if res.ok else 0.0)
        gains = [d * layer.count for d, (layer, _) in zip(defaults, pairs, strict=True)]
        budget = spread_trials(gains, trials_per_layer * len(layers))
        order = sorted(range(len(pairs)), key=lambda i: -gains[i])
        for rank, i in enumerate(order):
            layer, task = pairs[i]
            n = min(budget[i], task.space.size)
            if progress:
                print(
                    f"[{rank + 1}/{len(pairs)}] {task.key} x{layer.count}: {n} trials", flush=True
                )
            t0 = time.perf_counter()
            res = tune(
                task, n, measurer, tuner=tuner, batch_size=min(batch_size, n), log=log,
                resume=resume, seed=seed, progress=progress,
                initial=[_default_point(task, layer)], final_check=final_check,
            )  # fmt: skip
            if progress:
                print(f"    best {res.best_cost * 1e3:.3f} ms in {time.perf_counter() - t0:.0f} s")
            out.append((layer, task, defaults[i], res.best_cost))
        if log is not None and final_check > 1:
            compare_templates(layers, log, measurer, rounds=final_check, progress=progress)
    finally:
        if own and measurer is not None:
            measurer.close()
    return out


def compare_templates(
    layers: list[CpuLayer], log: str, measurer=None, rounds: int = 4, progress: bool = True
) -> None:
    """For each layer with more than one template (direct and Winograd or pointwise), measure each
    template's best logged config ``rounds`` times in turns, all of them in each round, and
    append the records to ``log``: each task was tuned at its own time, and on a shared machine
    costs measured minutes apart compare the load more than the schedules; measured side by
    side they share it (tagged ``SIDE_BY_SIDE``: ``cpu_schedules`` compares those)."""
    from dataclasses import replace

    from pyvta.tuner.log import TuningLog, make_record

    own = measurer is None
    if own:  # (its worker processes start at its first measurement)
        measurer = network_measurer(layers)
    writer = TuningLog(log)
    try:
        for layer in layers:
            tasks = _tasks(layer)
            best = [(t, best_record(read_records(log, t, how=measurer.how))) for t in tasks]
            pairs = [(t, t.space.config(r.config)) for t, r in best if r is not None]
            if len(pairs) < 2:
                continue
            seen: dict[str, list[float]] = {t.name: [] for t, _ in pairs}
            for _ in range(rounds):
                for task, cfg in pairs:
                    res = replace(measurer.measure(task, [cfg])[0], msg=SIDE_BY_SIDE)
                    writer.append(make_record(task, cfg, res, measurer.how))
                    seen[task.name].append(res.cost)
            if progress:
                meds = ", ".join(
                    f"{n} {sorted(v)[len(v) // 2] * 1e3:.3f} ms" for n, v in seen.items()
                )
                print(f"side by side, {layer.workload.key}: {meds}", flush=True)
    finally:
        writer.close()
        if own:
            measurer.close()


def cpu_schedules(
    log: str,
    layers: list[CpuLayer],
    foreign: dict[str, str] | None = None,
    in_network: bool = True,
    other_cpus: bool = False,
) -> dict[str, dict]:
    """``{workload key: schedule}``: per layer the best logged record over its templates (the
    compiler's ``cpu_schedules``); where every template's best config has records measured
    side by side (``compare_templates``), the lowest median of those decides. Layers without a
    valid record are left out.

    Records measured on this CPU come first. A layer that has only other CPUs' records
    (``tuner.log.closest_records``: those of the same kind first, then the closest other
    kind's; a schedule is valid on any x86 host, only its speed differs) is left to the untuned
    schedule unless ``other_cpus``: a Zen 4's per-layer bests ran ResNet-18 at 0.69-0.75x the
    untuned schedules on an Intel AVX-512 host. ``foreign`` (if given) gets ``{workload key:
    the CPU(s) its records were measured on}`` for each such layer, applied or not.

    With ``in_network``, a layer re-ranked inside the network on this kind of host
    (``tuner.in_network.rerank_in_network``, its choices beside the log) takes the schedule
    chosen there (the compiler's default, if that won)."""
    import statistics

    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.in_network import in_network_choices
    from pyvta.tuner.log import closest_records

    chosen = in_network_choices(log) if in_network else {}
    this_cpu = cpu_measured_on()
    out = {}
    for layer in layers:
        if layer.workload.key in chosen:
            out[layer.workload.key] = chosen[layer.workload.key]
            continue
        found = []  # (machine or "", logged cost, side-by-side costs, schedule)
        for task in _tasks(layer):
            records, machine = closest_records(log, task, _instantiates(task), this_cpu)
            rec = best_record(records)
            if rec is not None:
                side = [
                    r.result.cost
                    for r in records
                    if r.index == rec.index and r.result.ok and r.result.msg == SIDE_BY_SIDE
                ]
                sched = layer_schedule(task, rec.config, layer)
                found.append((machine, rec.result.cost, side, sched))
        here = [c for c in found if not c[0]]
        cands = here or found  # costs from two machines are not compared
        if not cands:
            continue
        if all(side for _, _, side, _ in cands):
            best = min(cands, key=lambda c: statistics.median(c[2]))
        else:
            best = min(cands, key=lambda c: c[1])
        if best[0] and foreign is not None:
            foreign[layer.workload.key] = best[0]
        if other_cpus or not best[0]:
            out[layer.workload.key] = best[3]
    return out


def _instantiates(task):
    """Whether a config (a record's dict) of another space builds ``task``'s schedule."""
    from pyvta.tuner.task import InvalidConfig

    def valid(config: dict) -> bool:
        try:
            task.instantiate(config)
        except (InvalidConfig, ValueError, KeyError, TypeError):
            return False
        return True

    return valid


def write_cpu_log(src: str, dst: str) -> int:
    """``tuner.log.write_best`` of ``src`` into ``dst`` (the log to ship beside a model), plus
    the side-by-side records (``compare_templates``) of each task's best config, which
    ``cpu_schedules`` decides between templates by. Returns the number of records written."""
    from pyvta.tuner.log import TuningLog, write_best

    write_best(src, dst)
    kept = {(r.task_key, r.index) for r in read_records(dst)}
    side = [
        r
        for r in read_records(src)
        if r.result.msg == SIDE_BY_SIDE and (r.task_key, r.index) in kept
    ]
    writer = TuningLog(dst)
    try:
        for r in side:
            writer.append(r)
    finally:
        writer.close()
    return len(kept) + len(side)


def tuned_schedules(
    model,
    log: str,
    foreign: dict[str, str] | None = None,
    in_network: bool = True,
    other_cpus: bool = False,
) -> dict[str, dict]:
    """:func:`cpu_schedules` of ``model``'s layers (an ONNX path or a ``CompiledModel``)."""
    return cpu_schedules(log, cpu_network_layers(model), foreign, in_network, other_cpus)


def pretuned_cpu_log(model: str) -> Path | None:
    """The shipped best-schedule log for a zoo model on the CPU (e.g. ``"resnet18_224"``), if
    there is one (made on the host kind its name's machine tag describes: see its README)."""
    path = PRETUNED / f"{model}_cpu.jsonl"
    return path if path.exists() else None
