"""The schedules the in-network re-ranking (``tuner.in_network``) tries per conv layer: its
default and the log's bests (:func:`top_candidates`), steps in its templates' spaces
(:func:`space_candidates`) and one-knob moves from a start (:func:`sweep_candidates`)."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Candidate:
    """One schedule of a layer: ``source`` "default" or ``TASK_KEY#INDEX`` of its log record;
    ``alone_ms``: its logged cost alone (None for the default); ``ms``: its times per inference
    (all the layer's launches) inside the network, one per round it ran in."""

    source: str
    schedule: dict
    alone_ms: float | None = None
    ms: list = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.ms) if self.ms else float("inf")


def top_candidates(log: str | os.PathLike, layer, top_k: int) -> list[Candidate]:
    """The compiler's default schedule of ``layer`` (a ``tuner.cpu_network.CpuLayer``), then
    the ``top_k`` fastest distinct schedules of ``log`` over its templates (each (task, config)
    by its best record; the default not twice), of each way the log's records were measured
    (``Record.how``: one thread's CPU time does not rank against two threads' wall time, nor a
    warm cache against a cold one)."""
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.cpu import nchwc_conv_tasks
    from pyvta.tuner.cpu_network import layer_schedule
    from pyvta.tuner.log import read_records

    default = default_conv_schedule(layer.workload)
    best: dict[str, dict[str, Candidate]] = {}  # how -> schedule -> its fastest record
    for task in nchwc_conv_tasks(layer.workload):
        for r in read_records(log, task) if Path(log).exists() else []:
            if not r.result.ok:
                continue
            sched = layer_schedule(task, r.config, layer)
            key = json.dumps(sched, sort_keys=True)
            ms = r.result.cost * 1e3
            mine = best.setdefault(r.how, {})
            if key not in mine or ms < mine[key].alone_ms:
                mine[key] = Candidate(f"{task.key}#{r.index}", sched, ms)
    out, taken = [Candidate("default", default)], {json.dumps(default, sort_keys=True)}
    for how in sorted(best):
        ranked = sorted(best[how].items(), key=lambda kc: kc[1].alone_ms)
        top = [(k, c) for k, c in ranked if k not in taken][:top_k]
        out += [c for _, c in top]
        taken.update(k for k, _ in top)
    return out


def space_candidates(
    layer, n: int, seed: int, taken: list[Candidate], log: str | os.PathLike | None = None
) -> list[Candidate]:
    """Up to ``n`` schedules of ``layer``'s templates not among ``taken``: a local search's
    steps from good points, one or two knob moves (``ConfigSpace.neighbours``) from each
    template's default or one of its 3 best logged configs (``log``), in turn, valid
    (``ConfigSpace.problem``), drawn with ``seed``. No isolated measurement vouches for them
    (``alone_ms`` None): they are tried in the network itself."""
    from pyvta.tuner.cpu import nchwc_conv_tasks
    from pyvta.tuner.cpu_network import _default_point, layer_schedule
    from pyvta.tuner.log import read_records

    rng = np.random.default_rng(seed)
    seen = {json.dumps(c.schedule, sort_keys=True) for c in taken}
    starts = []  # (task, choices) to step from
    for task in nchwc_conv_tasks(layer.workload):
        logged = read_records(log, task) if log is not None and Path(log).exists() else []
        best = sorted((r for r in logged if r.result.ok), key=lambda r: r.result.cost)
        idx = list(dict.fromkeys([_default_point(task, layer).index, *(r.index for r in best)]))
        starts += [(task, task.space.to_choices([i])[0]) for i in idx[:4]]
    out = []
    for attempt in range(40 * n):
        if len(out) >= n or not starts:
            break
        task, ch = starts[attempt % len(starts)]
        for _ in range(1 + int(rng.random() < 0.5)):
            ch = task.space.neighbours(ch[None, :], rng, local_prob=0.7)[0]
        cfg = task.space.get(int(task.space.to_index(ch[None, :])[0]))
        sched = layer_schedule(task, cfg, layer)
        key = json.dumps(sched, sort_keys=True)
        if key in seen or task.space.problem(cfg) is not None:
            continue
        seen.add(key)
        out.append(Candidate(f"step {task.key}#{cfg.index}", sched))
    return out


def sweep_candidates(
    layer, n: int | None, taken: list[Candidate], start: dict | None = None, fixed=()
) -> list[Candidate]:
    """Up to ``n`` (None: all) schedules that differ from ``start`` (a schedule of
    ``layer``; default: the compiler's untuned one) in one knob of its template's space, valid
    (``ConfigSpace.problem``), not among ``taken``: each knob's values nearest the start's
    first, taken in turn over the knobs (so every knob moves before any moves twice), the
    knobs named in ``fixed`` left as they are. Tried
    in the network, they show which knobs move the layer's time there; a second sweep from
    the first one's choice (``rerank_in_network(sweep_from=...)``) makes a coordinate
    descent."""
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.cpu import nchwc_conv_tasks, point_of_schedule, schedule_of
    from pyvta.tuner.cpu_network import _default_point, layer_schedule

    template = (start or default_conv_schedule(layer.workload))["template"]
    seen = {json.dumps(c.schedule, sort_keys=True) for c in taken}
    moves: list[list[Candidate]] = []  # per knob, nearest values first
    for task in nchwc_conv_tasks(layer.workload):
        if schedule_of(task, task.space.get(0))["template"] != template:
            continue
        if start is None:
            point = _default_point(task, layer)
        else:
            try:
                point = point_of_schedule(task, start["knobs"])
            except ValueError:
                continue
        base = task.space.to_choices([point.index])[0]
        for j, knob in enumerate(task.space.knobs):
            if knob.name in fixed:
                continue
            mine = []
            for v in sorted(range(len(knob.values)), key=lambda v, b=base[j]: (abs(v - b), v)):
                ch = base.copy()
                ch[j] = v
                cfg = task.space.get(int(task.space.to_index(ch[None, :])[0]))
                sched = layer_schedule(task, cfg, layer)
                key = json.dumps(sched, sort_keys=True)
                if v == base[j] or key in seen or task.space.problem(cfg) is not None:
                    continue
                seen.add(key)
                val = knob.values[v]
                val = "x".join(map(str, val)) if isinstance(val, tuple) else val
                mine.append(Candidate(f"sweep {knob.name}={val} #{cfg.index}", sched))
            moves.append(mine)
    out = []
    for i in range(max(map(len, moves), default=0)):
        out += [m[i] for m in moves if i < len(m)]
    return out[:n]
