"""How steady are CPU measurements on a shared machine: the wall clock (all cores) against one
thread timed by its CPU time (``tuner.cpu_measure.CpuBackend(timer="thread")``), side by side.

    .venv/bin/python benchmarks/cpu_timer_noise.py                  # nchwc:C6, 12 configs
    .venv/bin/python benchmarks/cpu_timer_noise.py --layer C12 --configs 16 --passes 3

``--configs`` random configs of the layer's direct NCHWc task are built for both timers, then
measured in ``--passes`` passes; in each pass every config is measured by both timers in turn
(``--repeats`` repeats each), so both see the same load. Printed per timer: the spread of one
config's repeats (max / min, median over configs), how far a config's min-of-repeats moves
between passes (|log ratio|, median and max over configs, as a percentage), and the Spearman
rank correlation of the configs' costs between passes (1: the ranking a tuner sees does not
depend on the moment it measured). The load average is printed before and after.

``--pairs``: two more rows time the same configs through ``tuner.measure.LocalMeasurer``'s
worker processes, one at a time (``thread x1``) and two at a time (``thread x2``, as
``tune_search.py --run-workers 2`` measures), and each config's cost two at a time / one at a
time (median of the passes) is printed. ``--from-log``: time a search's fastest configs (those
it judges by) instead of random ones. On the Zen 1 host (8 MB of L3 for its two cores) C12's 12
fastest configs (9.4 MB of weights) ran a median 1.15x slower two at a time than one at a time.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np


def _load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def _spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layer", default="C6", help="ResNet-18 layer (nchwc:LAYER)")
    p.add_argument("--configs", type=int, default=12)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-repeat-ms", type=float, default=5.0, dest="min_repeat_ms")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--from-log",
        default=None,
        dest="from_log",
        help="a tuning log (tune_search.py's --cache): time its --configs fastest configs of"
        " the layer (by the median of their repeats) instead of random ones",
    )
    p.add_argument(
        "--pairs",
        action="store_true",
        help="also time the configs through run workers, one and two at a time (thread timer):"
        " thread x1, thread x2",
    )
    a = p.parse_args(argv)
    if a.passes < 2 or a.configs < 2:
        p.error(f"--passes {a.passes}, --configs {a.configs}: at least 2 of each (drift and rank"
                " correlation compare passes over configs)")  # fmt: skip

    from pyvta.tuner.cli_support import parse_workload
    from pyvta.tuner.cpu_measure import CpuBackend, cpu_target_info
    from pyvta.tuner.task import InvalidConfig

    task = parse_workload(f"nchwc:{a.layer}")
    cache = tempfile.mkdtemp(prefix="pyvta_timer_noise_")
    timers = {
        "wall": CpuBackend(cache, min_repeat_ms=a.min_repeat_ms, timer="wall"),
        "thread": CpuBackend(cache, min_repeat_ms=a.min_repeat_ms, timer="thread"),
    }
    print(f"host: {cpu_target_info()}; load average {_load()}")
    print(f"task {task.key}: {task.space}; seed {a.seed}")
    for name, b in timers.items():
        print(f"  {name:6s}: {b.describe()}, {a.repeats} repeats")
    if a.from_log:
        from pyvta.tuner.log import read_records

        records = [r for r in read_records(a.from_log, task) if r.result.ok]
        records.sort(key=lambda r: float(np.median(r.result.costs)))
        candidates = list(dict.fromkeys(r.index for r in records))
        print(f"configs: the fastest of {len(candidates)} in {a.from_log}")
    else:
        candidates = task.space.sample_unique(np.random.default_rng(a.seed), 40 * a.configs)
    picked = []
    for i in candidates:
        cfg = task.space.get(i)
        if task.space.problem(cfg) is not None:  # refused before building (most points)
            continue
        try:
            for b in timers.values():
                b.build(task, cfg)
        except InvalidConfig:
            continue
        picked.append(cfg)
        if len(picked) == a.configs:
            break
    workers = {}  # "thread xN": the thread timer through N run workers (worker processes)
    if a.pairs:
        from pyvta.tuner.measure import LocalMeasurer

        for n in (1, 2):
            workers[f"thread x{n}"] = LocalMeasurer(
                timers["thread"], repeats=a.repeats, n_run_workers=n, run_timeout_s=120.0
            )
    rows = [*timers, *workers]
    costs = {name: np.zeros((a.passes, len(picked))) for name in rows}
    medians = {name: np.zeros((a.passes, len(picked))) for name in rows}
    spread = {name: [] for name in rows}

    def keep(name, ps, j, reps):  # one config's repeats in one pass
        costs[name][ps, j] = min(reps)
        medians[name][ps, j] = np.median(reps)
        spread[name].append(max(reps) / min(reps))

    try:
        for ps in range(a.passes):
            for j, cfg in enumerate(picked):
                for name, b in timers.items():
                    keep(name, ps, j, b.run(task, cfg, None, a.repeats))
            for name, m in workers.items():
                for j, r in enumerate(m.measure(task, picked)):
                    if r.error:
                        raise SystemExit(f"{name}: config {picked[j].index}: {r.error} {r.msg}")
                    keep(name, ps, j, r.costs)
            print(f"  pass {ps}: load average {_load()}")
    finally:
        for m in workers.values():
            m.close()
    print(f"\n{len(picked)} configs, {a.passes} passes; cost = min of the repeats")
    print(f"{'timer':9s} {'repeats max/min':>16s} {'pass-to-pass |change|':>24s} {'spearman':>9s}")
    for name, c in costs.items():
        moves = np.abs(np.log(c[1:] / c[:1])).ravel() * 100
        rho = min(_spearman(c[0], c[k]) for k in range(1, a.passes))
        print(
            f"{name:9s} {np.median(spread[name]):16.3f} "
            f"{f'median {np.median(moves):.1f}%, max {moves.max():.1f}%':>24s} {rho:9.3f}"
        )
    for stat, c in (("min", costs), ("median", medians)) if a.pairs else ():
        beside = np.median(c["thread x2"], axis=0) / np.median(c["thread x1"], axis=0)
        print(
            f"thread x2 / thread x1, a config's cost ({stat} of its repeats) two at a time /"
            f" one at a time: median {np.median(beside):.3f} (min {beside.min():.3f},"
            f" max {beside.max():.3f})"
        )
    print(f"load average {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
