"""Census of the VTA conv2d template's search spaces: every point of each ResNet-18 layer's
space measured on the cycle model, so the optimum and random search's odds are exact.

    .venv/bin/python benchmarks/vta_space_census.py --layers C5,C8,C11     # the 1x1 layers
    .venv/bin/python benchmarks/vta_space_census.py --layers C2-C12 --log out/vta_census.jsonl

Per layer: points in the space, how many fit (the rest are invalid, and random search spends
trials on them too), the optimum in cycles, how many points lie within 95% / 99% of it, and the
trials random search needs to hit one: the mean (N + 1) / (K + 1) and the median, exact for
uniform sampling without replacement from N points of which K hit. A search method beats
random by 3x at 95% only if its median trials are a third of random's median.

``--count``: no measurement; per layer the points of the space, how many lower and are no
duplicate (``tuner.vta.valid_point_count``: the schedule knobs of ``config.schedule_space``
included), and how many of those the space had before those knobs (two thread counts, the
knobs at their defaults):

    .venv/bin/python benchmarks/vta_space_census.py --count --layers C2-C12 --extra

The measurements go to ``--log`` (a tuning log; an interrupted census resumes from it) and
``benchmarks/tune_search.py --task vta --cache LOG`` then compares tuners on these exact costs.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from pyvta.tuner.cli_support import layer_names, parse_workload
from pyvta.tuner.measure import CachedMeasurer
from pyvta.tuner.tune import vta_cycle_measurer
from pyvta.tuner.tuners import random_hit_trials
from pyvta.tuner.vta import task_layer


def census(task, meas: CachedMeasurer, chunk: int = 64, progress: bool = True) -> dict[int, float]:
    """index -> cycles (``inf`` if invalid) of every point of ``task``'s space."""
    from tqdm import tqdm

    known = meas.costs(task)
    todo = [i for i in range(len(task.space)) if i not in known]
    bar = tqdm(total=len(task.space), initial=len(known), desc=task.key[:40], disable=not progress)
    for start in range(0, len(todo), chunk):
        part = [task.space.get(i) for i in todo[start : start + chunk]]
        meas.measure(task, part)
        bar.update(len(part))
    bar.close()
    return meas.costs(task)


def summarize(costs: dict[int, float]) -> dict:
    n = len(costs)
    valid = sorted(c for c in costs.values() if math.isfinite(c))
    best = valid[0]
    row = {"points": n, "fit": len(valid), "best_cycles": best}
    for frac in (0.95, 0.99):
        k = sum(c <= best / frac for c in valid)
        mean, median = random_hit_trials(n, k)
        row[f"within_{frac}"] = k
        row[f"random_mean_{frac}"] = mean
        row[f"random_median_{frac}"] = median
    row["median_over_best"] = valid[len(valid) // 2] / best
    return row


def count(names: list[str], extra: bool = False) -> int:
    """Print each layer's space size and valid points (``--count``); ``extra``: also
    ResNet-18's classifier (a 512 -> 1000 dense layer) and a grouped conv (MobileNet-style
    depthwise 3x3 on 256 channels: one block group per channel block), both tasks of the same
    template."""
    from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
    from pyvta.tuner.vta import valid_point_count, vta_layer_task

    tasks = {name: parse_workload(f"vta:{name}") for name in names}
    if extra:
        ep = Epilogue.requant(shift=8, relu=True)
        tasks["FC"] = vta_layer_task(ConvWorkload.dense(512, 1000), Epilogue.requant(shift=8))
        depthwise = ConvWorkload(14, 14, 256, 256, 3, 3, 1, 1, groups=16)
        tasks["DW"] = vta_layer_task(depthwise, ep)

    print(
        "| layer | workload | points | valid | valid before the schedule knobs "
        "| valid / before |\n|---|---|---|---|---|---|"
    )
    for name, task in tasks.items():
        t0 = time.perf_counter()
        valid, before = valid_point_count(task)
        wl, _ = task_layer(task)
        print(
            f"| {name} | {wl} | {len(task.space):,} | {valid:,} | {before:,} "
            f"| {valid / before:.1f}x |  ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", default="C5,C8,C11", help="e.g. C2-C12 or C5,C8")
    p.add_argument("--log", default="out/vta_census.jsonl", help="tuning log of measurements")
    p.add_argument("--workers", type=int, default=2, help="measurement processes")
    p.add_argument(
        "--count", action="store_true", help="count each space's valid points, measure nothing"
    )
    p.add_argument(
        "--extra",
        action="store_true",
        help="with --count: also the classifier (dense 512 -> 1000) and a depthwise conv",
    )
    a = p.parse_args(argv)
    try:
        names = layer_names(a.layers)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if a.count:
        return count(names, a.extra)
    Path(a.log).parent.mkdir(parents=True, exist_ok=True)
    inner = vta_cycle_measurer(build_timeout_s=300, run_timeout_s=300, run_workers=a.workers)
    meas = CachedMeasurer(inner, a.log)
    rows = {}
    t0 = time.perf_counter()
    try:
        for name in names:
            rows[name] = summarize(census(parse_workload(f"vta:{name}"), meas))
    finally:
        meas.close()
    print(f"\nmeasured {meas.n_measured} points in {time.perf_counter() - t0:.0f} s; log {a.log}")
    print(
        "| layer | points | fit | optimum cycles | within 95% | random median (mean) to 95% "
        "| within 99% | random median (mean) to 99% | median point / optimum |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['points']} | {r['fit']} | {r['best_cycles']:,.0f} "
            f"| {r['within_0.95']} | {r['random_median_0.95']} ({r['random_mean_0.95']:.1f}) "
            f"| {r['within_0.99']} | {r['random_median_0.99']} ({r['random_mean_0.99']:.1f}) "
            f"| {r['median_over_best']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
