"""Tune one workload with Apache TVM's MetaSchedule and print one JSON line with the result.

Runs under the separate venv made by ``benchmarks/setup_metaschedule.sh`` (never ``.venv``):

    .venv-tvm/bin/python benchmarks/metaschedule_side.py --workload gemm --budget 64 --seed 0
    .venv-tvm/bin/python benchmarks/metaschedule_side.py --workload C2 --budget 256
    ... --export /tmp/ms.so; then ... --workload C2 --retime /tmp/ms.so   # time it again

Workloads: ``gemm`` (float32 C = A @ B, 512^3) and ``C2`` (ResNet-18 C2: NCHW float32
1x64x56x56, 64 output channels, 3x3, stride 1, pad 1). MetaSchedule runs with its defaults
(post-order-apply space, evolutionary search, XGBoost cost model, local builder and runner),
``max_trials_global = budget`` and the target ``{"kind": "llvm", "mcpu": <host>, "num-cores": 2}``.
The best schedule is then built and timed: median over ``--repeats`` repeats of at least
``--min-repeat-ms`` each (the same statistic as ``tuner``'s CPU measurer).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time

os.environ.setdefault("TVM_NUM_THREADS", "2")  # before tvm starts its thread pool

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import te, topi  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402


def workload(name: str):
    """(PrimFunc, FLOPs, input shapes, output shape)."""
    if name == "gemm":
        m = n = k = 512
        a = te.placeholder((m, k), name="A", dtype="float32")
        b = te.placeholder((k, n), name="B", dtype="float32")
        r = te.reduce_axis((0, k), name="k")
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
        return te.create_prim_func([a, b, c]), 2.0 * m * n * k, [(m, k), (k, n)], (m, n)
    if name.upper() == "C2":
        n, ci, h, w, co, kk, s, p = 1, 64, 56, 56, 64, 3, 1, 1
        x = te.placeholder((n, ci, h, w), name="X", dtype="float32")
        wt = te.placeholder((co, ci, kk, kk), name="W", dtype="float32")
        y = topi.nn.conv2d_nchw(x, wt, stride=s, padding=p, dilation=1, out_dtype="float32")
        oh = (h + 2 * p - kk) // s + 1
        ow = (w + 2 * p - kk) // s + 1
        flop = 2.0 * n * co * oh * ow * ci * kk * kk
        return te.create_prim_func([x, wt, y]), flop, [x.shape, wt.shape], (n, co, oh, ow)
    raise SystemExit(f"unknown workload {name!r} (gemm | C2)")


def time_lib(lib, name, in_shapes, out_shape, repeats, min_repeat_ms):
    """(median seconds per call over ``repeats`` repeats, relative error against numpy)."""
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal([int(d) for d in s]).astype("float32") for s in in_shapes]
    args = [tvm.runtime.tensor(x, dev) for x in ins]
    out = tvm.runtime.tensor(np.zeros(out_shape, dtype="float32"), dev)
    lib["main"](*args, out)
    if name == "gemm":
        ref = ins[0] @ ins[1]
    else:
        x, w = ins
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        ref = np.einsum("nchwij,ocij->nohw", cols, w, optimize=True)
    err = float(np.max(np.abs(out.numpy() - ref)) / (np.max(np.abs(ref)) + 1e-12))
    fte = lib.time_evaluator(
        "main", dev, number=1, repeat=repeats, min_repeat_ms=int(min_repeat_ms)
    )
    res = fte(*args, out)
    return float(np.median(np.asarray(res.results))), err


def host_target(cores: int) -> tvm.target.Target:
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": cores})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="gemm", help="gemm | C2")
    p.add_argument("--budget", type=int, default=64, help="max_trials_global")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--trials-per-iter", type=int, default=64, help="num_trials_per_iter")
    p.add_argument("--repeats", type=int, default=25)
    p.add_argument("--min-repeat-ms", type=float, default=10.0)
    p.add_argument("--work-dir", default=None, help="keep the tuning database here")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--export", default=None, help="save the best kernel as this .so")
    p.add_argument("--retime", default=None, help="only time a .so saved with --export")
    a = p.parse_args(argv)

    logging.basicConfig(level=logging.WARNING)
    if not a.verbose:
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    func, flop, in_shapes, out_shape = workload(a.workload)
    if a.retime:
        lib = tvm.runtime.load_module(a.retime)
        med, err = time_lib(lib, a.workload, in_shapes, out_shape, a.repeats, a.min_repeat_ms)
        print(json.dumps({"workload": a.workload, "best_ms": med * 1e3, "max_rel_err": err}))
        return 0
    target = host_target(a.cores)
    tmp = None
    work_dir = a.work_dir
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="ms_")
        work_dir = tmp.name

    t0 = time.perf_counter()
    db = ms.tir_integration.tune_tir(
        mod=func,
        target=target,
        work_dir=work_dir,
        max_trials_global=a.budget,
        num_trials_per_iter=a.trials_per_iter,
        num_tuning_cores=a.cores,
        seed=a.seed,
    )
    tuning_wall_s = time.perf_counter() - t0
    records = db.get_all_tuning_records()
    n_valid = sum(
        1 for r in records if r.run_secs is not None and all(float(x) < 1e9 for x in r.run_secs)
    )
    sch = ms.tir_integration.compile_tir(db, func, target)
    if sch is None:
        print(json.dumps({"workload": a.workload, "budget": a.budget, "error": "no schedule"}))
        return 1
    best_during = min(
        (sum(float(x) for x in r.run_secs) / len(r.run_secs) for r in records if r.run_secs),
        default=float("nan"),
    )

    lib = tvm.compile(sch.mod, target=target).jit()
    med, err = time_lib(lib, a.workload, in_shapes, out_shape, a.repeats, a.min_repeat_ms)
    if a.export:
        lib.export_library(a.export)
    print(
        json.dumps(
            {
                "workload": a.workload,
                "budget": a.budget,
                "seed": a.seed,
                "target": str(target),
                "tvm": tvm.__version__,
                "threads": int(os.environ["TVM_NUM_THREADS"]),
                "best_ms": med * 1e3,
                "best_gflops": flop / med / 1e9,
                "best_during_tuning_ms": best_during * 1e3,
                "tuning_wall_s": tuning_wall_s,
                "trials_measured": len(records),
                "trials_valid": n_valid,
                "max_rel_err": err,
                "export": a.export,
            }
        )
    )
    sys.stdout.flush()
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
