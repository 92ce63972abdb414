"""The measurement options, measurers and layer tasks (``LAYER_KINDS``) of the search and
transfer benchmarks (``benchmarks/tune_search.py``, ``benchmarks/tune_transfer.py``): one CPU or
VTA layer measured the same way by every tuner compared, each run seeded by :func:`run_seed`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pyvta.tuner.measure import REPEAT_STATS


def add_cpu_comparison_arguments(p: argparse.ArgumentParser) -> None:
    """The CPU measurement options of the search and transfer benchmarks (``--task cpu``):
    ``--repeats``, ``--timer``, ``--min-repeat-ms``, ``--run-workers`` (see
    :func:`cpu_comparison_measurer`), ``--judge-stat``, ``--confirm``
    (:func:`confirmed_judge`)."""
    p.add_argument("--repeats", type=int, default=5, help="--task cpu: repeats per config")
    p.add_argument(
        "--timer",
        choices=["thread", "wall"],
        default="thread",
        help="--task cpu: thread = one thread timed by its CPU time (steady on a shared,"
        " loaded machine; tuner.cpu_measure.CpuBackend), wall = all cores by the wall clock",
    )
    p.add_argument(
        "--min-repeat-ms",
        type=float,
        default=5.0,
        dest="min_repeat_ms",
        help="--task cpu: a repeat calls the kernel until it lasts this long",
    )
    p.add_argument(
        "--run-workers",
        type=int,
        default=1,
        dest="run_workers",
        help="--task cpu: configs timed at once (more than 1 only with --timer thread)",
    )
    p.add_argument(
        "--judge-stat",
        choices=REPEAT_STATS,
        default="median",
        dest="judge_stat",
        help="--task cpu: the statistic of a config's repeats by which the summary (the best,"
        " trials to it, the curves) judges it; the search sees the fastest repeat, which can be"
        " one taken in a moment the host ran faster (tuner.measure.repeat_stat)",
    )
    p.add_argument(
        "--confirm",
        type=_count,
        default=0,
        metavar="K",
        help="before judging the runs, measure the K best configs they found 3 more times in"
        " one sitting and judge them by the median of their costs (again for the next K while"
        " the best is one not confirmed): the best every run is measured against is then one"
        " that was fast again (default 0: judge by the first measurement)",
    )


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    """The search options of the search and transfer benchmarks: ``--trend``, the XGB tuners'
    linear-trend weight (the same in both, so that their runs of one seed are the same search
    and share a ``--cache``)."""
    p.add_argument(
        "--trend",
        type=float,
        default=None,
        help="the xgb tuners' linear-trend weight (0: the trees alone; default: the template's,"
        " tuner.tuners.default_trend)",
    )


def _count(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_count.__name__ = "whole number (0 or more)"  # argparse names the type in its error


def cpu_comparison_measurer(args, cost: str = "min"):
    """The ``LocalMeasurer`` of :func:`add_cpu_comparison_arguments`' options (and
    ``args.build_timeout``), after printing what it measures and how; ``SystemExit`` for
    ``--run-workers`` above 1 on the wall clock (its timings would share the cores)."""
    from pyvta.tuner.cpu_measure import CpuBackend, cpu_target_info
    from pyvta.tuner.measure import LocalMeasurer

    if args.run_workers > 1 and args.timer != "thread":
        raise SystemExit("--run-workers > 1 needs --timer thread (wall times would share cores)")
    backend = CpuBackend(min_repeat_ms=args.min_repeat_ms, timer=args.timer)
    print(
        f"host: {cpu_target_info()}; measured: {backend.describe()}, {args.repeats} repeats"
        f" per config, cost = their {cost}; {args.run_workers} run worker(s)"
    )
    return LocalMeasurer(
        backend,
        repeats=args.repeats,
        n_run_workers=args.run_workers,
        build_timeout_s=args.build_timeout,
    )


def run_seed(seed: int, task) -> int:
    """The seed of one benchmark run: ``seed`` (0, 1, ...) mixed with ``task.key`` through
    ``numpy.random.SeedSequence`` (the key by SHA-256, never Python's salted ``hash``), so seed
    ``s`` draws a different stream on every layer (the same ``s`` on two layers would draw the
    same indices and knob values: not independent samples) and the same stream on every rerun."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256(task.key.encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return int(np.random.SeedSequence([int(seed), *words]).generate_state(1)[0])


def vta_comparison_measurer(args):
    """The VTA cycle model's measurer of the search and transfer benchmarks (``--task vta``):
    ``tune.vta_cycle_measurer`` with ``args.build_timeout`` (a lowering that outlasts it is a
    failed trial) and a 300 s bound on one cycle count, after printing what it measures."""
    from pyvta.tuner.tune import vta_cycle_measurer

    print(
        "measured: the VTA cycle model (sim.cycles_of of the lowered stream; deterministic),"
        f" builds bounded at {args.build_timeout:g} s"
    )
    return vta_cycle_measurer(build_timeout_s=args.build_timeout, run_timeout_s=300.0)


@dataclass(frozen=True)
class LayerKind:
    """ResNet-18's conv layers (C1..C12) as the search and transfer benchmarks tune them (their
    ``--task``): the prefix ``parse_workload`` reads before a layer's name, what is measured,
    whether on this CPU (repeats timed; the search's cost is their ``cost_stat``) or on the VTA
    cycle model (one deterministic count), and the transfer benchmark's default source
    layers (None: not a transfer benchmark's task)."""

    name: str
    prefix: str
    what: str
    on_cpu: bool
    cost_stat: str
    sources: str | None = None

    def task(self, layer: str):
        """The tuning task of ``layer`` (e.g. ``"C7"``)."""
        from pyvta.tuner.cli_support import parse_workload

        return parse_workload(self.prefix + layer)

    def measurer(self, args, cost_stat: str | None = None):
        """The comparison's measurer of these layers, uncached: :func:`cpu_comparison_measurer`
        (a config's cost the ``cost_stat`` of its repeats, default this kind's) or
        :func:`vta_comparison_measurer`."""
        if self.on_cpu:
            return cpu_comparison_measurer(args, cost_stat or self.cost_stat)
        return vta_comparison_measurer(args)


LAYER_KINDS = {
    k.name: k
    for k in (
        LayerKind("vta", "vta:", "VTA conv2d on the cycle model", False, "median", "C2-C6"),
        LayerKind("cpu", "nchwc:", "CPU direct NCHWc conv", True, "min", "C1-C6"),
        LayerKind("cpu-conv2d", "", "CPU NCHW conv2d (the older template)", True, "median"),
    )
}


CONFIRM_PASSES = 4  # confirm_best's passes of k configs at most
DRIFT_WARN = 0.05  # controls further than this from 1 (again / first): the host drifted


def confirm_best(task, measurer, histories, cost, k: int, rounds: int = 3, stat="median"):
    """Measure the ``k`` best configs of the runs ``histories`` (``TuneResult.history`` each;
    ``cost(index)``: a config's cost as first judged) ``rounds`` more times in one sitting
    (``tune.remeasure`` through ``measurer``, not a cache), and again for the next ``k`` while
    the best is one not confirmed (the confirmed grew slower), at most ``CONFIRM_PASSES`` passes.
    ``index -> its costs``: the first, then each round's by ``stat`` of its repeats. A config
    is then judged by the median of those: the best every run is measured against is one that
    was fast again, not one first measured in a moment the host ran faster (Zen 1 C3: a day's
    best configs 1.08-1.19x slower an hour later)."""
    import math
    import statistics

    from pyvta.tuner.measure import result_stat
    from pyvta.tuner.tune import remeasure

    if k < 1 or rounds < 1:
        raise ValueError(f"confirm_best: k and rounds must be positive, got {k} and {rounds}")
    first = {i: cost(i) for h in histories for _, i, c in h if math.isfinite(c)}
    seen: dict[int, list[float]] = {}

    def now(i):
        return statistics.median(seen[i]) if i in seen else first[i]

    for _ in range(CONFIRM_PASSES):
        order = sorted(first, key=now)
        if not order or order[0] in seen:
            break
        top = [i for i in order if i not in seen][:k]
        for i, results in remeasure(task, measurer, top, rounds).items():
            seen[i] = [first[i]] + [result_stat(r, stat) for r in results]
    return seen


def confirmed_judge(task, meas, histories, judge, judge_stat, k: int):
    """The judge (``index -> cost``) of a comparison's runs (``histories``: tuner name ->
    its runs' ``TuneResult.history``) after :func:`confirm_best` measured their ``k`` best
    configs again through the measurer under ``meas``'s cache (``--confirm``):
    theirs the median of their costs, the others' as ``judge`` (None: the costs the search
    saw). Prints each confirmed config's costs and their drift (again / first), and that of
    ``k`` other configs of the runs measured again as controls."""
    import time

    import numpy as np

    from pyvta.tuner.measure import MinOfRepeats, repeat_stat

    stat = judge_stat or ("min" if isinstance(meas, MinOfRepeats) else "median")
    first = judge or repeat_stat(meas, task, stat)
    t0 = time.perf_counter()
    seen = confirm_best(
        task, meas.inner, [h for runs in histories.values() for h in runs], first, k, stat=stat
    )
    if not seen:  # no run found a config that ran
        return judge
    rounds = len(next(iter(seen.values()))) - 1
    print(
        f"\nconfirmed: {len(seen)} best configs measured {rounds} more times in one sitting"
        f" ({time.perf_counter() - t0:.0f} s), each judged by the median of its {stat}s"
    )
    drift = []
    for i, costs in sorted(seen.items(), key=lambda kv: float(np.median(kv[1]))):
        again = float(np.median(costs[1:]))
        drift.append(again / costs[0])
        shown = ", ".join(f"{c:.6g}" for c in costs[1:])
        print(
            f"  config {i}: first {costs[0]:.6g}, again {shown} {task.cost_unit};"
            f" judged {float(np.median(costs)):.6g} (again / first {again / costs[0]:.3f})"
        )
    print(
        f"  again / first over the confirmed: median {np.median(drift):.3f},"
        f" {min(drift):.3f} to {max(drift):.3f}"
    )
    _controls(task, meas.inner, histories, seen, first, k, stat)

    def judged(i):
        return float(np.median(seen[i])) if i in seen else first(i)

    best = min(_ran(histories), key=judged)
    if best not in seen:
        print(
            f"  the best, config {best} ({judged(best):.6g} {task.cost_unit}), is NOT confirmed:"
            f" the {len(seen)} confirmed all ran slower again than its first measurement"
            f" (the confirmation stops after {CONFIRM_PASSES} passes of {k})"
        )
    return judged


def _ran(histories) -> set[int]:
    """The configs that ran (a finite cost) in any run of ``histories`` (tuner name -> its
    runs' ``TuneResult.history``)."""
    import math

    return {i for runs in histories.values() for h in runs for _, i, c in h if math.isfinite(c)}


def _controls(task, measurer, histories, seen, first, k: int, stat: str) -> None:
    """Measure ``k`` other configs of the runs (drawn with seed 0) once more and print their
    again / first: near the confirmed configs' own, the host as a whole runs faster or slower
    than when the runs measured; near 1 while the confirmed grew slower, their first
    measurements were lucky."""
    import numpy as np

    from pyvta.tuner.measure import result_stat
    from pyvta.tuner.tune import remeasure

    others = sorted(_ran(histories) - set(seen))
    if not others:
        return
    pick = np.random.default_rng(0).choice(others, min(k, len(others)), replace=False)
    again = remeasure(task, measurer, [int(i) for i in pick], 1)
    ratios = [result_stat(r[0], stat) / first(i) for i, r in again.items()]
    drift = float(np.median(ratios))
    print(
        f"  controls: {len(ratios)} other configs of the runs (seed 0) measured again:"
        f" again / first median {drift:.3f}, {min(ratios):.3f} to {max(ratios):.3f}"
    )
    if abs(drift - 1.0) > DRIFT_WARN:
        print(
            f"  WARNING: the host runs {'faster' if drift < 1 else 'slower'} now than when the"
            f" runs measured (controls {drift:.3f}x): runs measured at other times (a --cache"
            " from another sitting) are not comparable with runs measured now"
        )
