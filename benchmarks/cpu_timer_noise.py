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
    rng = np.random.default_rng(a.seed)
    picked = []
    for i in task.space.sample_unique(rng, 40 * a.configs):
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
    costs = {name: np.zeros((a.passes, len(picked))) for name in timers}
    spread = {name: [] for name in timers}
    for ps in range(a.passes):
        for j, cfg in enumerate(picked):
            for name, b in timers.items():
                reps = b.run(task, cfg, None, a.repeats)
                costs[name][ps, j] = min(reps)
                spread[name].append(max(reps) / min(reps))
        print(f"  pass {ps}: load average {_load()}")
    print(f"\n{len(picked)} configs, {a.passes} passes; cost = min of the repeats")
    print(f"{'timer':6s} {'repeats max/min':>16s} {'pass-to-pass |change|':>24s} {'spearman':>9s}")
    for name, c in costs.items():
        moves = np.abs(np.log(c[1:] / c[:1])).ravel() * 100
        rho = min(_spearman(c[0], c[k]) for k in range(1, a.passes))
        print(
            f"{name:6s} {np.median(spread[name]):16.3f} "
            f"{f'median {np.median(moves):.1f}%, max {moves.max():.1f}%':>24s} {rho:9.3f}"
        )
    print(f"load average {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
