"""Measurement isolation: a crashing, a hanging and a raising candidate are recorded with their
error and tuning goes on; the CPU backend measures real kernels."""

import math
import time

import numpy as np
import pytest

from pyvta.tuner.log import read_records
from pyvta.tuner.measure import LocalMeasurer
from pyvta.tuner.synthetic import FaultyBackend, tiled_gemm_task
from pyvta.tuner.tune import tune


def _valid_indices(task, n):
    out = []
    i = 0
    while len(out) < n:
        c = task.space.get(i)
        if c["tile_i"][2] * c["tile_j"][2] <= 256:
            out.append(i)
        i += 1
    return out


def test_crash_hang_and_error_in_run_are_survived():
    task = tiled_gemm_task(64, 64, 64)
    idx = _valid_indices(task, 6)
    backend = FaultyBackend(crash=[idx[1]], hang=[idx[2]], raise_=[idx[3]])
    with LocalMeasurer(backend, repeats=2, run_timeout_s=2.0) as m:
        t0 = time.perf_counter()
        res = m.measure(task, [task.space.get(i) for i in idx])
        wall = time.perf_counter() - t0
    print(f"measured 6 candidates (crash, hang, raise among them) in {wall:.1f} s")
    errors = [r.error for r in res]
    assert errors == [None, "crash", "run_timeout", "run", None, None], errors
    assert "exit code 77" in res[1].msg
    assert "injected failure" in res[3].msg
    assert all(math.isfinite(r.cost) for r in (res[0], res[4], res[5]))
    assert wall < 30


def test_crash_and_hang_in_build_are_survived_while_tuning(tmp_path, seed):
    task = tiled_gemm_task(64, 64, 64)
    crash = task.space.sample_unique(__import__("numpy").random.default_rng(seed), 20)
    backend = FaultyBackend(crash=crash[:10], hang=crash[10:12], in_build=True)
    log = tmp_path / "faulty.jsonl"
    with LocalMeasurer(backend, repeats=1, build_timeout_s=2.0) as m:
        # the tuner draws the same random points first: its first batch hits the faults
        res = tune(
            task, 24, m, tuner="random", batch_size=24, log=str(log), seed=seed, progress=False
        )
    recs = read_records(log, task)
    assert len(recs) == 24
    by_err = {}
    for r in recs:
        by_err.setdefault(r.result.error, []).append(r.index)
    print({k: len(v) for k, v in by_err.items()})
    assert set(by_err.get("crash", [])) == set(crash[:10])
    assert set(by_err.get("build_timeout", [])) == set(crash[10:12])
    assert res.best_index is not None


@pytest.mark.parametrize("n", [64])
def test_cpu_backend_measures_gemm(n, fitting_tile):
    from pyvta.tuner.cpu import gemm_task
    from pyvta.tuner.cpu_measure import CpuBackend

    task = gemm_task(n, n, n)
    cfgs = [
        task.space.config(
            {
                "tile": fitting_tile(task, 4, 16),
                "bk": 4,
                "parallel": False,
                "panels_outer": False,
                "pack_b": True,
            }
        ),
        task.space.config(
            {
                "tile": fitting_tile(task, 1, 16),
                "bk": 1,
                "parallel": False,
                "panels_outer": False,
                "pack_b": True,
            }
        ),
    ]
    with LocalMeasurer(CpuBackend(min_repeat_ms=2.0), repeats=3) as m:
        res = m.measure(task, cfgs)
    print([(c.to_dict(), r.cost) for c, r in zip(cfgs, res, strict=True)])
    assert all(r.ok and len(r.costs) == 3 for r in res), [r.msg[-600:] for r in res]
    assert all(0 < r.cost < 0.1 for r in res)


def test_wrong_answer_is_recorded(fitting_tile):
    from pyvta.tuner import cpu, cpu_measure
    from pyvta.tuner.measure import InProcessMeasurer
    from pyvta.tuner.task import Template

    bad = Template(
        "test.badgemm",
        cpu._gemm_space,
        cpu._gemm_instantiate,
        reference_fn=lambda arrays, m, n, k: arrays[0] @ arrays[1] + 1.0,
    )
    task = bad.task(16, 16, 16)
    cfg = task.space.config(
        {
            "tile": fitting_tile(task, 4, 16),
            "bk": 4,
            "parallel": False,
            "panels_outer": False,
            "pack_b": True,
        }
    )
    res = InProcessMeasurer(cpu_measure.CpuBackend(min_repeat_ms=1.0), repeats=1).measure(
        task, [cfg]
    )
    assert res[0].error == "wrong_answer" and "relative error" in res[0].msg


def test_workers_start_with_single_threaded_library_pools(monkeypatch):
    """A BLAS call in a worker (e.g. a reference check) must not leave threads spinning beside
    the kernel being timed; the parent's own environment is left as it was."""
    import os

    from pyvta.workers import WorkerPool

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    pool = WorkerPool(1)
    try:
        got = list(pool.map([(os.getenv, ("OPENBLAS_NUM_THREADS",))], timeout_s=60))
    finally:
        pool.close()
    assert got == [(0, "ok", "1")]
    assert os.environ["OPENBLAS_NUM_THREADS"] == "7"


def test_a_worker_is_replaced_by_a_fresh_process_after_max_jobs():
    """What jobs leave in a process (LLVM's state of each kernel JIT-compiled there) must not
    pile up over a long session: after ``max_jobs`` jobs a worker gives way to a new one,
    and every job still gets its result, in order of submission per worker."""
    import os

    from pyvta.workers import WorkerPool

    with pytest.raises(ValueError, match="max_jobs"):
        WorkerPool(1, max_jobs=0)
    pool = WorkerPool(1, max_jobs=3)
    try:
        got = list(pool.map([(os.getpid, ())] * 7, timeout_s=60))
        again = list(pool.map([(os.getpid, ())] * 2, timeout_s=60))
    finally:
        pool.close()
    assert [pos for pos, _, _ in got] == list(range(7))
    pids = [pid for _, status, pid in got + again if status == "ok"]
    assert len(pids) == 9
    assert [len(set(pids[i : i + 3])) for i in range(0, 9, 3)] == [1, 1, 1]  # 3 jobs each
    assert len(set(pids)) == 3  # then a fresh process: 7 jobs, then 2 more, on 3 workers
    unlimited = WorkerPool(1, max_jobs=None)
    try:
        assert len({pid for _, _, pid in unlimited.map([(os.getpid, ())] * 5, 60)}) == 1
    finally:
        unlimited.close()


def test_conv2d_reference_matches_a_naive_convolution():
    """The reference every tuned conv2d candidate is checked against (blocked weights)."""
    from pyvta.tuner.cpu import _conv2d_reference

    c, h, w, o, k, stride, pad, ic, oc = 4, 7, 6, 8, 3, 2, 1, 2, 4
    rng = np.random.default_rng(11)
    print("seed 11")
    data = rng.standard_normal((1, c, h, w))
    wgt = rng.standard_normal((o // oc, c // ic, k, k, ic, oc))
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    x = np.pad(data[0], ((0, 0), (pad, pad), (pad, pad)))
    want = np.zeros((1, o, oh, ow))
    for f in range(o):
        for ch in range(c):
            for y in range(oh):
                for xx in range(ow):
                    for ky in range(k):
                        for kx in range(k):
                            v = x[ch, y * stride + ky, xx * stride + kx]
                            want[0, f, y, xx] += v * wgt[f // oc, ch // ic, ky, kx, ch % ic, f % oc]
    got = _conv2d_reference([data, wgt, None], c, h, w, o, k, stride, pad)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_cpu_backend_times_on_64_byte_aligned_arrays(fitting_tile):
    from pyvta.tuner import cpu, cpu_measure
    from pyvta.tuner.measure import InProcessMeasurer
    from pyvta.tuner.task import Template

    seen = []

    def reference(arrays, m, n, k):
        seen.extend(a.ctypes.data % 64 for a in arrays)
        return arrays[0] @ arrays[1]

    probe = Template(
        "test.alignedgemm", cpu._gemm_space, cpu._gemm_instantiate, reference_fn=reference
    )
    task = probe.task(48, 32, 40)  # odd sizes: numpy alone would not align these
    cfg = task.space.config(
        {
            "tile": fitting_tile(task, 4, 16),
            "bk": 4,
            "parallel": False,
            "panels_outer": False,
            "pack_b": True,
        }
    )
    res = InProcessMeasurer(cpu_measure.CpuBackend(min_repeat_ms=1.0), repeats=1).measure(
        task, [cfg]
    )
    print("address % 64 of A, B, C:", seen)
    assert res[0].ok and seen == [0, 0, 0]


def test_cpu_backend_times_each_repeat_on_fresh_memory(monkeypatch, fitting_tile):
    from pyvta.tuner import cpu, cpu_measure
    from pyvta.tuner.measure import InProcessMeasurer

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    (b,) = cpu_measure.fresh_copies([a])
    assert np.array_equal(a, b) and not np.shares_memory(a, b) and b.ctypes.data % 4096 == 0
    placements = []

    def spy(arrays):
        out = real(arrays)
        placements.append(tuple(x.ctypes.data for x in out))
        return out

    real = cpu_measure.fresh_copies
    monkeypatch.setattr(cpu_measure, "fresh_copies", spy)
    task = cpu.gemm_task(48, 32, 40)
    cfg = task.space.config(
        {
            "tile": fitting_tile(task, 4, 16),
            "bk": 4,
            "parallel": False,
            "panels_outer": False,
            "pack_b": True,
        }
    )
    res = InProcessMeasurer(cpu_measure.CpuBackend(min_repeat_ms=1.0), repeats=3).measure(
        task, [cfg]
    )
    print("placements of A, B, C per repeat:", placements)
    assert res[0].ok and len(res[0].costs) == 3  # the output of the last one was checked
    assert len(placements) == 3
    assert all(p != q for p, q in zip(placements, placements[1:], strict=False))
