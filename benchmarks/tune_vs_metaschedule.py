"""Our tuner against Apache TVM's MetaSchedule at the same measured-trial budgets on this CPU,
with numpy (OpenBLAS) and onnxruntime as the ceiling.

    bash benchmarks/setup_metaschedule.sh            # once: .venv-tvm/ with apache-tvm 0.27
    .venv/bin/python benchmarks/tune_vs_metaschedule.py                      # 2 x 2 cells, seed 0
    .venv/bin/python benchmarks/tune_vs_metaschedule.py --seeds 3 --budgets 64 --workloads C2 gemm

Each cell (workload, budget, seed) runs ``tuner.tune.tune`` (default ``xgb`` tuner, the CPU
measurer, as in ``benchmarks/tune_cpu.py``; the final check of ``pyvta tune``: its 8 best
re-measured 3 times, inside our tuning wall time), re-measures the best config ``--recheck`` times
(median of medians), then runs ``.venv-tvm/bin/python benchmarks/metaschedule_side.py`` for the
same workload and budget (``max_trials_global``; its best schedule is built, timed as the
median of 25 repeats and exported). Then both best kernels are timed in turns, ``--recheck``
rounds each, so that both see the same machine state: the main ratio. The two never run at
the same time. "wall" is the tuning wall time:
for ours from creating the measurer to the end of ``tune``; for MetaSchedule the ``tune_tir``
call. The machine may be shared: the load average is printed at the start and the end.

The FMA peak of all cores (``benchmarks/cpu_peak.py``) is measured at the start and the end,
and every kernel is also given as a share of it.

numpy runs in a child process with ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` removed, so that
OpenBLAS picks its own kernel (printed), at the start and at the end (the better one counts); for C2 the ceiling is im2col + one OpenBLAS matmul
(and the matmul alone), and onnxruntime's Conv (MLAS).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.tuner.cli_support import parse_workload
from pyvta.tuner.cpu_measure import CpuBackend, cpu_target_info
from pyvta.tuner.measure import LocalMeasurer
from pyvta.tuner.tune import tune
from pyvta.tuner.tuners import make_tuner

ROOT = Path(__file__).resolve().parents[1]
TVM_PY = ROOT / ".venv-tvm" / "bin" / "python"
SIDE = ROOT / "benchmarks" / "metaschedule_side.py"
WORKLOADS = {"gemm:512,512,512": "gemm", "C2": "C2"}  # ours -> metaschedule_side's name


def flop_of(task) -> float:
    if task.name == "cpu.gemm":
        m, n, k = task.args
        return 2.0 * m * n * k
    c, h, w, o, kernel, stride, padding = task.args
    oh = (h + 2 * padding - kernel) // stride + 1
    ow = (w + 2 * padding - kernel) // stride + 1
    return 2.0 * o * oh * ow * c * kernel * kernel


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_ours(
    task, budget: int, seed: int, batch: int, repeats: int, recheck: int, final_check: int
) -> dict:
    t0 = time.perf_counter()
    with LocalMeasurer(CpuBackend(min_repeat_ms=10.0), repeats=repeats) as meas:
        res = tune(
            task,
            budget,
            meas,
            tuner=make_tuner("xgb", task, seed),
            batch_size=batch,
            seed=seed,
            progress=sys.stderr.isatty(),
            final_check=final_check,
        )
        wall = time.perf_counter() - t0
        again = [meas.measure(task, [res.best_config])[0] for _ in range(recheck)]
    cost = statistics.median(statistics.median(r.costs) for r in again if r.ok)
    return {
        "best_gflops": flop_of(task) / cost / 1e9,
        "best_ms": cost * 1e3,
        "best_during_tuning_ms": res.best_cost * 1e3,
        "tuning_wall_s": wall,
        "trials_measured": len(res.history),
        "errors": res.n_errors,
        "final_check": final_check,
        "config": res.best_config.to_dict(),
    }


def run_metaschedule(name: str, budget: int, seed: int, export: str) -> dict:
    t0 = time.perf_counter()
    cmd = [str(TVM_PY), str(SIDE), "--workload", name, "--budget", str(budget)]
    cmd += ["--seed", str(seed), "--export", export]
    p = subprocess.run(cmd, capture_output=True, text=True)
    total = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-15:]
        return {"error": f"exit {p.returncode}: " + " | ".join(tail)}
    out = json.loads(lines[-1])
    out["process_wall_s"] = total
    return out


def final_gflops(side: dict) -> float:
    """A side's result: timed in turns with the other (``alt_gflops``) if that ran, else
    re-measured alone."""
    return side.get("alt_gflops", side["best_gflops"])


def alternate(task, config, name: str, so: str, rounds: int, repeats: int) -> tuple:
    """Time our best config and MetaSchedule's exported kernel in turns, ``rounds`` times each,
    so that both see the same machine state; (ours, MetaSchedule) median seconds per call."""
    ours, theirs = [], []
    cmd = [str(TVM_PY), str(SIDE), "--workload", name, "--retime", so]
    with LocalMeasurer(CpuBackend(min_repeat_ms=10.0), repeats=repeats) as meas:
        for _ in range(rounds):
            r = meas.measure(task, [config])[0]
            if r.ok:
                ours.append(statistics.median(r.costs))
            p = subprocess.run(cmd, capture_output=True, text=True)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if p.returncode == 0 and lines:
                theirs.append(json.loads(lines[-1])["best_ms"] * 1e-3)
    med = statistics.median
    return (med(ours) if ours else None), (med(theirs) if theirs else None)


_NUMPY_CHILD = r"""
import json, statistics, sys, time
import numpy as np
kind = sys.argv[1]
rng = np.random.default_rng(0)
def med(f, reps=25):
    f()
    ts = []
    for _ in range(reps):
        n, t0 = 0, time.perf_counter()
        while True:
            f(); n += 1
            if time.perf_counter() - t0 > 0.01:
                break
        ts.append((time.perf_counter() - t0) / n)
    return statistics.median(ts)
out = {}
if kind == "gemm":
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    out["matmul"] = med(lambda: a @ b)
else:
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    w2 = w.reshape(64, -1)
    def im2col():
        xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
        v = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # c,h,w,i,j
        return np.ascontiguousarray(v.transpose(0, 3, 4, 1, 2)).reshape(576, 56 * 56)
    cols = im2col()
    out["im2col+matmul"] = med(lambda: w2 @ im2col())
    out["matmul only"] = med(lambda: w2 @ cols)
try:
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1, user_api="blas"):  # robust when the other core is busy
        if kind == "gemm":
            out["matmul 1 thread"] = med(lambda: a @ b)
        else:
            out["matmul only 1 thread"] = med(lambda: w2 @ cols)
except ImportError:
    pass
try:
    from threadpoolctl import threadpool_info
    out["blas"] = "; ".join(
        f"{d.get('internal_api')} {d.get('architecture')} x{d.get('num_threads')}"
        for d in threadpool_info() if d.get("user_api") == "blas")
except Exception as e:
    out["blas"] = repr(e)
print(json.dumps(out))
"""


def numpy_ceiling(name: str) -> dict:
    """Seconds per call, in a child process with OpenBLAS left to pick its own kernel."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    }
    p = subprocess.run(
        [sys.executable, "-c", _NUMPY_CHILD, name], capture_output=True, text=True, env=env
    )
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def onnxruntime_s(name: str, repeats: int = 25) -> float | None:
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    if name == "gemm":
        b = rng.standard_normal((512, 512)).astype(np.float32)
        node = helper.make_node("MatMul", ["x", "b"], ["y"])
        xs, ys, feed_shape = [512, 512], [512, 512], (512, 512)
        init = [numpy_helper.from_array(b, "b")]
    else:
        w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[1, 1])
        xs, ys, feed_shape = [1, 64, 56, 56], [1, 64, 56, 56], (1, 64, 56, 56)
        init = [numpy_helper.from_array(w, "w")]
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ys)],
        initializer=init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    sess = ort.InferenceSession(
        model.SerializeToString(),
        so,
        providers=["CPUExecutionProvider"],
    )
    feed = {"x": rng.standard_normal(feed_shape).astype(np.float32)}
    sess.run(None, feed)
    ts = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.01:
            sess.run(None, feed)
            n += 1
        ts.append((time.perf_counter() - t0) / n)
    return statistics.median(ts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--workloads", nargs="+", default=list(WORKLOADS), help="gemm:512,512,512 (or gemm), C2"
    )
    p.add_argument("--budgets", nargs="+", default=["64", "256"], help="measured trials")
    p.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 for both tuners")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=32, help="our candidates per round")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--recheck", type=int, default=5, help="re-measurements of our best")
    p.add_argument(
        "--final-check",
        type=int,
        default=8,
        dest="final_check",
        help="our tuner re-measures its N best 3x at the end (in its wall time), as pyvta tune"
        " does; 0: off",
    )
    p.add_argument("--out", default=None, help="append one JSON line per result here")
    p.add_argument("--skip-metaschedule", action="store_true")
    a = p.parse_args(argv)

    workloads = [
        "gemm:512,512,512" if w == "gemm" else w.upper() if w.lower() == "c2" else w
        for w in a.workloads
    ]
    budgets = [int(b) for text in a.budgets for b in text.split(",") if b]
    seeds = list(range(a.first_seed, a.first_seed + a.seeds))
    for w in workloads:
        if w not in WORKLOADS:
            p.error(f"workload {w!r}: one of {', '.join(WORKLOADS)}")
    if not a.skip_metaschedule and not TVM_PY.exists():
        print(
            f"error: {TVM_PY.relative_to(ROOT)} is missing: run benchmarks/setup_metaschedule.sh",
            file=sys.stderr,
        )
        return 2
    start_load = uptime()
    print(f"start: {start_load}")
    print(f"host: {cpu_target_info()}")
    print(f"workloads {workloads}, budgets {budgets}, seeds {seeds}")
    sys.stdout.flush()

    def record(row):
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")

    def measure_ceilings(when):
        for w in workloads:
            name = WORKLOADS[w]
            flop = flop_of(parse_workload(w))
            npr = numpy_ceiling(name)
            ort = onnxruntime_s(name)
            got = {k: flop / v / 1e9 for k, v in npr.items() if isinstance(v, float)}
            if ort:
                got["onnxruntime"] = flop / ort / 1e9
            print(f"ceiling {w} ({when}): " + ", ".join(f"{k} {v:.1f}" for k, v in got.items()))
            print(f"  numpy BLAS: {npr.get('blas')}")
            record({"kind": "ceiling", "when": when, "workload": w, **got, "blas": npr.get("blas")})
            for k, v in got.items():  # the machine is shared: keep the better of start / end
                ceil.setdefault(w, {})[k] = max(v, ceil.get(w, {}).get(k, 0.0))
            sys.stdout.flush()

    ceil: dict = {}
    peaks: list = []

    def measure_peak(when):
        from pyvta.compiler.backend.llvm.peak import peak_gflops

        got = statistics.median(peak_gflops(os.cpu_count() or 1, seconds=0.5))
        peaks.append(got)
        print(f"FMA peak of this host, all cores ({when}): {got:.1f} GFLOP/s")
        record({"kind": "fma_peak", "when": when, "gflops": got})

    measure_peak("start")
    measure_ceilings("start")

    rows = []
    for seed in seeds:
        for w in workloads:
            task = parse_workload(w)
            for budget in budgets:
                print(f"\n== {w} budget {budget} seed {seed}  [{uptime()}]")
                sys.stdout.flush()
                ours = run_ours(task, budget, seed, a.batch, a.repeats, a.recheck, a.final_check)
                print(
                    f"  ours: {ours['best_gflops']:.1f} GFLOP/s, {ours['tuning_wall_s']:.1f} s, "
                    f"{ours['trials_measured']} trials, {ours['config']}"
                )
                sys.stdout.flush()
                record({"kind": "ours", "workload": w, "budget": budget, "seed": seed, **ours})
                ms = {"error": "skipped"}
                if not a.skip_metaschedule:
                    with tempfile.TemporaryDirectory(prefix="ms_lib_") as tmp:
                        so = os.path.join(tmp, "ms_best.so")
                        ms = run_metaschedule(WORKLOADS[w], budget, seed, so)
                        if "error" in ms:
                            print(f"  metaschedule failed: {ms['error']}")
                        else:
                            print(
                                f"  metaschedule: {ms['best_gflops']:.1f} GFLOP/s, "
                                f"{ms['tuning_wall_s']:.1f} s, {ms['trials_measured']} trials"
                            )
                            o_s, m_s = alternate(
                                task, ours["config"], WORKLOADS[w], so, a.recheck, a.repeats
                            )
                            flop = flop_of(task)
                            if o_s and m_s:
                                ours["alt_gflops"] = flop / o_s / 1e9
                                ms["alt_gflops"] = flop / m_s / 1e9
                                print(
                                    f"  timed in turns ({a.recheck}x): ours "
                                    f"{ours['alt_gflops']:.1f}, metaschedule "
                                    f"{ms['alt_gflops']:.1f} GFLOP/s  [{uptime()}]"
                                )
                                record(
                                    {
                                        "kind": "alternate",
                                        "workload": w,
                                        "budget": budget,
                                        "seed": seed,
                                        "ours_gflops": ours["alt_gflops"],
                                        "ms_gflops": ms["alt_gflops"],
                                    }
                                )
                    record({"kind": "metaschedule", "workload": w, "seed": seed, **ms})
                sys.stdout.flush()
                rows.append((w, budget, seed, ours, ms))

    measure_ceilings("end")
    measure_peak("end")

    def best_ceiling(w):
        return max(ceil[w].values()) if ceil[w] else float("nan")

    print(
        "\nGFLOP/s (higher is better). ours / MS: best kernels timed in turns after tuning "
        "(else re-measured alone); *tune: best seen during tuning; wall: tuning wall time (s); "
        "MStr: MetaSchedule trials measured; ceil: best of numpy/OpenBLAS and onnxruntime"
    )
    hdr = (
        f"{'workload':17s} {'budget':>6s} {'seed':>4s} {'ours':>6s} {'*tune':>6s} {'wall':>5s} "
        f"{'MS':>6s} {'*tune':>6s} {'wall':>5s} {'MStr':>4s} {'ceil':>6s} {'ours/MS':>7s} "
        f"{'*tune':>6s} {'wall o/MS':>9s} {'ours/ceil':>9s}"
    )
    print(hdr)
    print("-" * len(hdr))
    for w, budget, seed, ours, ms in rows:
        c = best_ceiling(w)
        flop = flop_of(parse_workload(w))
        og = final_gflops(ours)
        ot = flop / ours["best_during_tuning_ms"] / 1e6
        if "error" in ms:
            mg = mt = msw = ratio = tratio = wratio = mst = "n/a"
        else:
            m_g = final_gflops(ms)
            m_t = flop / ms["best_during_tuning_ms"] / 1e6
            mg, mt, msw = f"{m_g:.1f}", f"{m_t:.1f}", f"{ms['tuning_wall_s']:.0f}"
            ratio, tratio = f"{og / m_g:.2f}x", f"{ot / m_t:.2f}x"
            wratio = f"{ours['tuning_wall_s'] / ms['tuning_wall_s']:.2f}x"
            mst = str(ms["trials_measured"])
        print(
            f"{w:17s} {budget:6d} {seed:4d} {og:6.1f} {ot:6.1f} {ours['tuning_wall_s']:5.0f} "
            f"{mg:>6s} {mt:>6s} {msw:>5s} {mst:>4s} {c:6.1f} {ratio:>7s} {tratio:>6s} "
            f"{wratio:>9s} {og / c:8.2f}x"
        )
    by_cell: dict = {}
    for w, budget, _, ours, ms in rows:
        if "error" not in ms:
            og = final_gflops(ours)
            wall = ours["tuning_wall_s"] / ms["tuning_wall_s"]
            by_cell.setdefault((w, budget), []).append((og / final_gflops(ms), wall))
    for (w, budget), got in by_cell.items():
        ratios = sorted(r for r, _ in got)
        print(
            f"{w} budget {budget}: ours / MS median {statistics.median(ratios):.2f}x over "
            f"{len(ratios)} seed(s) ({', '.join(f'{r:.2f}' for r in ratios)}); tuning wall "
            f"ours / MS median {statistics.median(w_ for _, w_ in got):.2f}x"
        )
    for w in workloads:
        print(
            f"ceiling {w} (better of start/end): "
            + ", ".join(f"{k} {v:.1f}" for k, v in ceil[w].items())
        )
    peak = max(peaks)
    print(
        f"FMA peak (better of start/end): {peak:.1f} GFLOP/s; every kernel above as a share of it:"
    )
    for w, budget, seed, ours, ms in rows:
        og = final_gflops(ours)
        m_g = "n/a" if "error" in ms else f"{ms.get('alt_gflops', ms['best_gflops']) / peak:.0%}"
        print(f"  {w} budget {budget} seed {seed}: ours {og / peak:.0%}, MetaSchedule {m_g}")
    print(f"\nstart: {start_load}")
    print(f"end:   {uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
