"""float32 GEMM 1024^3 on the host CPU: our best schedule vs numpy (OpenBLAS) and onnxruntime.

Run: .venv/bin/python benchmarks/cpu_gemm.py [--size 1024] [--rounds 7]

All three run in the same process with 2 threads (our parallel loops, OpenBLAS and
onnxruntime's intra-op pool). The machine is shared, so the runs are interleaved round by round
and each reports its best round. Printed ratios are baseline_time / our_time (> 1: we are faster).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402

from pyvta import compiler  # noqa: E402
from pyvta.compiler.ops.cpu import GemmKnobs, matmul_packed  # noqa: E402

THREADS = 2


def best_ms(fn, number: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number * 1e3


def ort_matmul(a: np.ndarray, b: np.ndarray):
    from onnx import helper

    from pyvta.compiler.graph.reference import onnxruntime_session
    from pyvta.compiler.graph.zoo import float_model

    m, k = a.shape
    n = b.shape[1]
    node = helper.make_node("MatMul", ["A", "B"], ["C"])
    model = float_model([node], {"A": (m, k)}, {"C": (m, n)}, {"B": b}, opset=13)
    # no busy-waiting between runs: spinning pool threads would slow the interleaved baselines
    sess = onnxruntime_session(model, threads=THREADS, spin=False)
    return lambda: sess.run(None, {"A": a})[0]


def openblas_core() -> str:
    """The kernel family OpenBLAS dispatched to on this CPU (e.g. 'Haswell' = AVX2)."""
    import ctypes
    import glob

    for lib in glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*blas*")):
        for sym in ("scipy_openblas_get_corename64_", "openblas_get_corename64_"):
            fn = getattr(ctypes.CDLL(lib), sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=5)
    args = ap.parse_args()
    n = args.size
    knobs = GemmKnobs(bm=8, bn=32, bk=4)
    seed = 0
    print(f"GEMM {n}x{n}x{n} float32, {THREADS} threads, knobs {knobs.to_dict()}, seed {seed}")
    print(f"OpenBLAS kernel family on this CPU: {openblas_core()}")
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    s, targs = matmul_packed(n, n, n, knobs)
    t0 = time.perf_counter()
    mod = compiler.build(s, targs, num_threads=THREADS)
    print(f"build {time.perf_counter() - t0:.2f} s (cache: {mod.from_cache})")
    mod(a, b, c)
    ref = a @ b
    err = float(np.abs(c - ref).max() / np.abs(ref).max())
    assert err < 1e-5, f"wrong result: relative error {err}"
    ort_run = ort_matmul(a, b)
    assert np.allclose(ort_run(), ref, rtol=1e-3, atol=1e-3)
    runs = {"ours": lambda: mod(a, b, c), "numpy": lambda: a @ b, "onnxruntime": ort_run}
    best = {k: float("inf") for k in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            best[name] = min(best[name], best_ms(fn, args.number))
    flops = 2.0 * n * n * n
    for name, ms in best.items():
        print(f"{name:12s} {ms:8.3f} ms  {flops / ms / 1e6:7.1f} GFLOPS")
    print(f"ratio vs numpy/OpenBLAS: {best['numpy'] / best['ours']:.2f}x (target >= 0.7x)")
    print(f"ratio vs onnxruntime:    {best['onnxruntime'] / best['ours']:.2f}x")


if __name__ == "__main__":
    main()
