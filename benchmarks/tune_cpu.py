"""Tune a CPU operator with XGB-rank + SA and compare, in the same run, against the compiler's
default knobs and numpy (OpenBLAS); prints ratios and writes the tuning curve.

    .venv/bin/python benchmarks/tune_cpu.py                          # GEMM 512^3, 64 trials
    .venv/bin/python benchmarks/tune_cpu.py --trials 256 --batch 64 --log gemm.jsonl
    .venv/bin/python benchmarks/tune_cpu.py --workload C6 --trials 128   # a ResNet-18 conv2d

Costs are medians over ``--repeats`` timed repeats in an isolated process (builds on both
cores, runs alone). Also prints the tuner's own time per round (model fit + SA search).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from pyvta.tuner.cli_support import parse_workload
from pyvta.tuner.cpu_measure import CpuBackend, cpu_target_info
from pyvta.tuner.log import apply_best
from pyvta.tuner.measure import LocalMeasurer, MeasureResult
from pyvta.tuner.tune import tune
from pyvta.tuner.tuners import make_tuner


def _default_config(task):
    if task.name == "cpu.gemm":
        from pyvta.compiler.ops.cpu import GemmKnobs
        from pyvta.tuner.cpu import gemm_point

        def point():
            return gemm_point(task, GemmKnobs())
    else:
        from pyvta.compiler.ops.cpu import Conv2dKnobs

        def point():
            return task.space.config(Conv2dKnobs().to_dict())

    try:
        return point()
    except ValueError:
        return None  # the default knobs do not fit this shape


def _numpy_s(task, repeats: int) -> float | None:
    if task.name != "cpu.gemm":
        return None
    m, n, k = task.args
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a @ b
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(10):
            a @ b
        ts.append((time.perf_counter() - t0) / 10)
    return statistics.median(ts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="gemm:512,512,512")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default=None)
    p.add_argument("--plot", default="tune_cpu.png")
    p.add_argument("--recheck", type=int, default=5, help="alternate re-measurements at the end")
    p.add_argument(
        "--final-check",
        type=int,
        default=8,
        dest="final_check",
        help="the tuner re-measures its N best 3x at the end, as pyvta tune does; 0: off",
    )
    a = p.parse_args(argv)

    task = parse_workload(a.workload)
    print(f"host: {cpu_target_info()}")
    print(f"task {task.key}: {task.space}; {a.trials} trials, batch {a.batch}, seed {a.seed}")
    tn = make_tuner(a.tuner, task, a.seed)
    with LocalMeasurer(CpuBackend(min_repeat_ms=10.0), repeats=a.repeats) as meas:
        default = _default_config(task)
        base = meas.measure(task, [default])[0] if default is not None else None
        res = tune(
            task,
            a.trials,
            meas,
            tuner=tn,
            batch_size=a.batch,
            log=a.log,
            seed=a.seed,
            plot=a.plot,
            progress=sys.stderr.isatty(),
            final_check=a.final_check,
        )
        # re-measure the best and the default alternately, so both see the same machine state
        pair = [res.best_config, default] if default else [res.best_config]
        rounds_again = [meas.measure(task, pair) for _ in range(a.recheck)]
        again = [
            MeasureResult(costs=tuple(statistics.median(r[i].costs) for r in rounds_again))
            for i in range(len(pair))
        ]
    np_s = _numpy_s(task, a.repeats)
    flop = 2.0 * np.prod(task.args) if task.name == "cpu.gemm" else None
    rounds = max(1, -(-a.trials // a.batch) - 1)

    def line(name, s):
        gf = f"  {flop / s / 1e9:7.1f} GFLOP/s" if flop else ""
        return f"  {name:28s} {s * 1e3:9.4f} ms{gf}"

    print(f"\n{len(res.history)} trials in {res.wall_s:.1f} s, {res.n_errors} errors")
    print(f"  during tuning: best {res.best_cost * 1e3:.4f} ms", end="")
    print(f", default {base.cost * 1e3:.4f} ms (before tuning)" if base is not None else "")
    print(f"  re-measured {a.recheck}x alternately (median of medians):")
    print(line(f"tuned {res.best_config.to_dict()}", again[0].cost))
    if base is not None and base.ok:
        print(line(f"default {default.to_dict()}", again[1].cost))
        print(f"  tuned speed-up over the default knobs: {again[1].cost / again[0].cost:.2f}x")
    if np_s:
        print(line("numpy (OpenBLAS)", np_s))
        print(f"  tuned / numpy time: {again[0].cost / np_s:.2f}x")
    curve = res.best_curve
    hit = next(i + 1 for i, c in enumerate(curve) if c <= curve[-1] / 0.95)
    print(f"  trials to reach 95% of the final best: {hit}")
    if hasattr(tn, "fit_s"):
        print(
            f"  tuner time per round: model fit {tn.fit_s / (rounds + 1):.3f} s, "
            f"SA search {tn.search_s / rounds:.3f} s"
        )
    if a.log:
        print(f"  apply_best({a.log}) -> {apply_best(a.log, task).to_dict()}")
    print(f"  tuning curve: {a.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
