"""The llvmlite CPU backend: argument checks, SIMD and threads in the generated code, caching."""

import importlib

import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler import te
from pyvta.compiler.backend.llvm import CpuTarget


def _axpy(n=37):
    x = te.placeholder((n,), "float32", "X")
    y = te.placeholder((n,), "float32", "Y")
    z = te.compute((n,), lambda i: x[i] * 2.0 + y[i], name="Z")
    return x, y, z


def test_host_target_uses_host_cpu_features():
    t = CpuTarget.host()
    assert t.triple and t.cpu
    assert t.vector_bits in (128, 256, 512)
    assert t.vector_lanes("float32") == t.vector_bits // 32
    if "+avx512f" in t.features:
        assert t.vector_bits == 512
    with pytest.raises(ValueError, match="positive int"):
        CpuTarget.host(num_threads=0)


def test_argument_checks(build):
    x, y, z = _axpy()
    s = compiler.create_schedule(z)
    mod = build(s, [x, y, z])
    a = np.ones(37, np.float32)
    with pytest.raises(TypeError, match="takes 3 arrays"):
        mod(a, a)
    with pytest.raises(TypeError, match="dtype float64, expected float32"):
        mod(a, a, np.ones(37))
    with pytest.raises(ValueError, match=r"shape \(36,\), expected \(37,\)"):
        mod(a, a, np.ones(36, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        mod(a, a, np.ones(74, np.float32)[::2])
    with pytest.raises(ValueError, match="not supported"):
        compiler.build(s, [x, y, z], target="opencl")


def test_vectorized_and_parallel_code(build, rng):
    x, y, z = _axpy(4096)
    s = compiler.create_schedule(z)
    xo, xi = s[z].split("i", 16)
    s[z].vectorize(xi)
    s[z].parallel(xo)
    mod = build(s, [x, y, z], num_threads=2)
    assert "<16 x float>" in mod.llvm_ir
    assert "pyvta_parallel_launch" in mod.llvm_ir
    a, b = (
        rng.standard_normal(4096).astype(np.float32),
        rng.standard_normal(4096).astype(np.float32),
    )
    out = np.zeros(4096, np.float32)
    mod(a, b, out)
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)
    serial = build(s, [x, y, z], num_threads=1)
    assert "pyvta_parallel_launch" not in serial.llvm_ir
    out2 = np.zeros(4096, np.float32)
    serial(a, b, out2)
    np.testing.assert_array_equal(out, out2)


def test_parallel_with_uneven_chunks(build, rng):
    x, y, z = _axpy(7)
    s = compiler.create_schedule(z)
    s[z].parallel("i")
    mod = build(s, [x, y, z], num_threads=3)
    a, b = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    out = np.zeros(7, np.float32)
    mod(a, b, out)
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


def test_padding_rows_become_masked_vector_loads(build, rng):
    d = te.placeholder((3, 5), "float32", "D")
    p = te.compute(
        (3, 9),
        lambda i, j: te.select(te.logical_and(j >= 2, j < 7), d[i, j - 2], te.const(0.0)),
        name="P",
    )
    s = compiler.create_schedule(p)
    s[p].vectorize("j")
    mod = build(s, [d, p])
    assert "llvm.masked.load" in mod.llvm_ir
    x = rng.standard_normal((3, 5)).astype(np.float32)
    out = np.full((3, 9), 5.0, np.float32)
    mod(x, out)
    np.testing.assert_array_equal(out, np.pad(x, ((0, 0), (2, 2))))


def test_padding_rows_read_behind_a_branch_not_a_masked_load(build, rng):
    """A select whose condition is the same for every lane (a padded row, the columns
    vectorized) loads the row behind a branch: no masked load (2.7-3.4x slower in the depthwise
    convs on a Zen 1), and the rows outside, never read, stay out of the result. (200 rows:
    LLVM does not unroll the loop and fold the conditions away.)"""
    rows, pad = 200, 3
    d = te.placeholder((rows, 16), "float32", "D")
    p = te.compute(
        (rows + 2 * pad, 16),
        lambda i, j: te.select(
            te.logical_and(i >= pad, i < rows + pad), d[i - pad, j], te.const(-3.0)
        ),
        name="P",
    )
    s = compiler.create_schedule(p)
    s[p].vectorize("j")
    mod = build(s, [d, p])
    assert "llvm.masked.load" not in mod.llvm_ir
    x = rng.standard_normal((rows, 16)).astype(np.float32)
    out = np.zeros((rows + 2 * pad, 16), np.float32)
    mod(x, out)
    np.testing.assert_array_equal(out, np.pad(x, ((pad, pad), (0, 0)), constant_values=-3.0))


def test_a_lane_blend_of_two_broadcasts_stays_vectorized(build, rng):
    """A select over the lanes between two values the same for every lane (a straddling
    grouped conv's two groups' inputs) is a vector blend of two broadcasts, not a scalar loop:
    lanes below ``split`` take ``A[i]``, the rest ``A[i + 5]``."""
    n, lanes, split = 8, 16, 6
    a = te.placeholder((n + 5,), "float32", "A")
    p = te.compute((n, lanes), lambda i, j: te.select(j < split, a[i], a[i + 5]) * 2.0, name="P")
    s = compiler.create_schedule(p)
    s[p].vectorize("j")
    mod = build(s, [a, p])
    ir = mod.llvm_ir  # LLVM turns the select of constant lanes into a shuffle
    assert "select <16 x i1>" in ir or "shufflevector <16 x float>" in ir
    x = rng.standard_normal(n + 5).astype(np.float32)
    out = np.zeros((n, lanes), np.float32)
    mod(x, out)
    want = np.where(np.arange(lanes)[None, :] < split, x[:n, None], x[5:, None]) * 2.0
    np.testing.assert_array_equal(out, want)


def test_strided_vector_access_and_math_intrinsics(build, rng):
    a = te.placeholder((8, 6), "float32", "A")
    b = te.compute((6, 8), lambda i, j: te.exp(a[j, i]) + te.sqrt(a[j, i] * a[j, i]), name="B")
    s = compiler.create_schedule(b)
    s[b].vectorize("j")  # a gather: stride 6
    x = rng.standard_normal((8, 6)).astype(np.float32)
    out = np.zeros((6, 8), np.float32)
    build(s, [a, b])(x, out)
    np.testing.assert_allclose(out, np.exp(x.T) + np.abs(x.T), rtol=1e-5)


def test_kernel_cache_memory_and_disk(tmp_path, rng):
    x, y, z = _axpy(19)
    s = compiler.create_schedule(z)
    first = compiler.build(s, [x, y, z], cache_dir=tmp_path)
    assert first.from_cache == "none"
    assert len(list(tmp_path.glob("*.ll"))) == 1
    again = compiler.build(s, [x, y, z], cache_dir=tmp_path)
    assert again.from_cache == "memory"
    importlib.import_module("pyvta.compiler.backend.llvm.entry")._CACHES.pop(
        tmp_path
    )  # as in a fresh process
    reloaded = compiler.build(s, [x, y, z], cache_dir=tmp_path)
    assert reloaded.from_cache == "disk"
    a, b = rng.standard_normal(19).astype(np.float32), rng.standard_normal(19).astype(np.float32)
    out = np.zeros(19, np.float32)
    reloaded(a, b, out)
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


def test_the_memory_cache_keeps_the_most_recent_kernels_and_a_module_outlives_its_entry(
    tmp_path, rng, monkeypatch
):
    """A tuning worker JITs a kernel per candidate: the process keeps only the
    ``memory_kernels`` most recently used; a module built earlier still runs its code."""
    import gc
    import weakref

    entry = importlib.import_module("pyvta.compiler.backend.llvm.entry")
    from pyvta.compiler.backend.llvm.cache import KernelCache

    monkeypatch.setitem(entry._CACHES, tmp_path, KernelCache(tmp_path, memory_kernels=2))
    x, y, _ = _axpy(23)

    def build(k):  # x * k + y: a kernel of its own per k
        z = te.compute((23,), lambda i: x[i] * float(k) + y[i], name="Z")
        return compiler.build(compiler.create_schedule(z), [x, y, z], cache_dir=tmp_path)

    first = build(2)
    gone = weakref.ref(build(3).jit)  # built, nothing holds its module
    assert build(2).from_cache == "memory"  # used again: the most recent now
    build(4)  # the least recently used (k=3) leaves memory
    gc.collect()
    assert gone() is None  # its JIT (machine code, LLVM state) freed
    assert [build(k).from_cache for k in (2, 3, 4)] == ["memory", "disk", "disk"]
    a, b = rng.standard_normal(23).astype(np.float32), rng.standard_normal(23).astype(np.float32)
    out = np.zeros(23, np.float32)
    first(a, b, out)  # its entry long evicted: the module keeps its code
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


def test_a_fresh_process_loads_the_cached_object_code(tmp_path, rng):
    x, y, z = _axpy(21)
    other = te.compute((21,), lambda i: x[i] * 3.0 + y[i], name="Z")
    compiler.build(compiler.create_schedule(z), [x, y, z], cache_dir=tmp_path)
    (obj,) = tmp_path.glob("*.o")
    before = set(tmp_path.glob("*.o"))
    compiler.build(compiler.create_schedule(other), [x, y, other], cache_dir=tmp_path)
    (other_obj,) = set(tmp_path.glob("*.o")) - before
    obj.write_bytes(other_obj.read_bytes())  # z's cache entry now holds other's machine code
    importlib.import_module("pyvta.compiler.backend.llvm.entry")._CACHES.pop(
        tmp_path
    )  # as in a fresh process
    reloaded = compiler.build(compiler.create_schedule(z), [x, y, z], cache_dir=tmp_path)
    assert reloaded.from_cache == "disk"
    a, b = rng.standard_normal(21).astype(np.float32), rng.standard_normal(21).astype(np.float32)
    out = np.zeros(21, np.float32)
    reloaded(a, b, out)
    np.testing.assert_allclose(out, a * 3 + b, rtol=1e-6)  # the cached code ran, not a rebuild


def test_cache_dir_from_environment_at_top_level(monkeypatch, tmp_path):
    from pyvta.compiler.api import default_cache_dir

    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == str(tmp_path / "llvm")
    monkeypatch.delenv("PYVTA_CACHE_DIR")
    assert default_cache_dir().endswith("pyvta/llvm")


def _parallel_axpy(build, rng):
    """``z = 2x + y`` over 1000 floats on two threads, and random ``x``, ``y``."""
    x, y, z = _axpy(1000)
    s = compiler.create_schedule(z)
    s[z].parallel("i")
    mod = build(s, [x, y, z], num_threads=2)
    a, b = (
        rng.standard_normal(1000).astype(np.float32),
        rng.standard_normal(1000).astype(np.float32),
    )
    return mod, a, b


def test_thread_pool_is_reused_and_safe_from_python_threads(build, rng):
    """Many launches from several Python threads at once give correct results."""
    from concurrent.futures import ThreadPoolExecutor

    mod, a, b = _parallel_axpy(build, rng)

    def job(_):
        out = np.zeros(1000, np.float32)
        for _ in range(50):
            mod(a, b, out)
        return out

    with ThreadPoolExecutor(3) as pool:
        for out in pool.map(job, range(6)):
            np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


@pytest.mark.parametrize("spin_iters, yield_mask", [(0, 0), (5000, 1), (100_000, 0)])
def test_thread_pool_spins_and_yields_as_set(build, rng, spin_iters, yield_mask):
    """The pool's spin count and yield mask (``set_spin_iters`` / ``set_spin_yield``: no
    spinning, yielding every other spin, spinning without yielding) change only how threads
    wait: launches give correct results with each, and the setters return the previous value
    (the defaults first)."""
    from pyvta.compiler.backend.llvm import runtime

    mod, a, b = _parallel_axpy(build, rng)
    iters0 = runtime.set_spin_iters(spin_iters)
    mask0 = runtime.set_spin_yield(yield_mask)
    try:
        assert (iters0, mask0) == (runtime.SPIN_ITERS, runtime.SPIN_YIELD_MASK)
        for k in range(30):
            out = np.zeros(1000, np.float32)
            mod(a * k, b, out)
            np.testing.assert_allclose(out, a * k * 2 + b, rtol=1e-6)
    finally:
        assert runtime.set_spin_iters(iters0) == spin_iters
        assert runtime.set_spin_yield(mask0) == yield_mask


def test_cpu_plan_leaves_the_first_cpu_to_the_caller_and_deals_the_rest_to_the_workers():
    from pyvta.compiler.backend.llvm.runtime import NO_PLAN, PINNED_WORKERS, cpu_plan

    plan = cpu_plan({5, 3, 9})
    assert plan.caller == 3 and plan.workers[:5] == (5, 9, 3, 5, 9)
    assert len(plan.workers) == PINNED_WORKERS and plan.min_threads == 3
    assert plan.binds(3) and plan.binds(4) and not plan.binds(2)  # fewer threads than CPUs
    assert cpu_plan({0, 1}).workers[:3] == (1, 0, 1)
    assert cpu_plan({4}) == NO_PLAN and not NO_PLAN.binds(64)  # one CPU: nothing to spread
    assert cpu_plan({0, 1}, pin=False) == NO_PLAN


_BINDING_PROBE = """
import dataclasses, json, os, re, sys, time
import numpy as np
from pyvta import compiler
from pyvta.compiler import te
from pyvta.compiler.backend.llvm import runtime
if sys.argv[1] == "more-threads-than-launched":  # a plan for launches of 4 threads or more
    plan = runtime.cpu_plan(os.sched_getaffinity(0))
    runtime.set_cpu_plan(dataclasses.replace(plan, min_threads=4))
x = te.placeholder((4096,), "float32", "X")
y = te.placeholder((4096,), "float32", "Y")
z = te.compute((4096,), lambda i: x[i] * 2.0 + y[i], name="Z")
s = compiler.create_schedule(z)
s[z].parallel("i")
mod = compiler.build(s, [x, y, z], num_threads=3)
a, out = np.ones(4096, np.float32), np.zeros(4096, np.float32)
before = set(os.listdir("/proc/self/task"))
mod(a, a, out)
assert (out == 3).all()
new = sorted(int(t) for t in set(os.listdir("/proc/self/task")) - before)
def asleep(tid):  # it has run its start (the binding) and waited on the pool's condition since
    status = open(f"/proc/self/task/{tid}/status").read()
    return int(re.search(r"^voluntary_ctxt_switches:\\s+(\\d+)", status, re.M).group(1)) > 0
deadline = time.time() + 30  # a launch does not wait for a worker that has not started
while not all(map(asleep, new)) and time.time() < deadline:
    time.sleep(0.01)
mine = sorted(os.sched_getaffinity(0))
with runtime.caller_bound(3):
    inside = sorted(os.sched_getaffinity(0))
print(json.dumps({"workers": [sorted(os.sched_getaffinity(t)) for t in new], "mine": mine,
                  "inside": inside, "after": sorted(os.sched_getaffinity(0))}))
"""


@pytest.mark.parametrize("case", ["default", "PYVTA_PIN_THREADS=0", "more-threads-than-launched"])
def test_pool_workers_and_caller_are_bound_to_the_planned_cpus(case, tmp_path):
    """In a fresh process a 3-thread kernel starts 2 workers: each binds itself to its CPU of
    ``cpu_plan`` (the second CPU, then the first), and ``caller_bound`` binds the caller to
    the first CPU and gives its CPUs back after (on 2 CPUs or 3: the launch covers them).
    With ``PIN_ENV=0``, or a plan for launches of more threads, nothing is bound."""
    import json
    import os
    import subprocess
    import sys

    from pyvta.compiler.backend.llvm.runtime import PIN_ENV

    cpus = sorted(os.sched_getaffinity(0))
    if not 2 <= len(cpus) <= 3:
        pytest.skip(f"needs 2 or 3 CPUs (a 3-thread launch covering them); this has {cpus}")
    env = dict(os.environ, PYVTA_CACHE_DIR=str(tmp_path))
    env.pop(PIN_ENV, None)
    if case.startswith(PIN_ENV):
        env[PIN_ENV] = "0"
    run = subprocess.run(
        [sys.executable, "-c", _BINDING_PROBE, case], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    print(case, seen)
    assert seen["mine"] == cpus and seen["after"] == cpus
    if case == "default":
        assert seen["workers"] == [[cpus[1]], [cpus[2 % len(cpus)]]]
        assert seen["inside"] == [cpus[0]]
    else:
        assert seen["workers"] == [cpus, cpus]
        assert seen["inside"] == cpus


def test_the_pool_leaves_binding_out_where_the_os_cannot():
    from pyvta.compiler.backend.llvm.runtime import _runtime_module

    assert "sched_setaffinity" in str(_runtime_module(True))
    assert "sched_setaffinity" not in str(_runtime_module(False))


def test_hand_written_loop_ir_with_let_if_else_and_vthread(build):
    """Loop IR built directly (no schedule) compiles: Let, IfThenElse with else, vthread loops,
    int8 arithmetic with explicit casts, min/max."""
    from pyvta.compiler.ir import (
        Buffer,
        Cast,
        For,
        IfThenElse,
        IntImm,
        Let,
        Load,
        PrimFunc,
        Store,
        Var,
    )
    from pyvta.compiler.ir.expr import max_, min_

    a = Buffer("A", "int8", (10,))
    out = Buffer("Out", "int32", (10,))
    i, t = Var("i"), Var("t")
    widened = Cast("int32", Load(a, i))
    body = Let(
        t,
        widened * 3,
        IfThenElse(i < 5, Store(out, i, min_(t, IntImm(50))), Store(out, i, max_(t, IntImm(-7)))),
    )
    func = PrimFunc("hand", [a, out], For(i, 0, 10, "vthread", body))
    mod = build(func, None)
    x = np.arange(-5, 5, dtype=np.int8) * 9
    res = np.zeros(10, np.int32)
    mod(x, res)
    ref = x.astype(np.int32) * 3
    np.testing.assert_array_equal(
        res, np.where(np.arange(10) < 5, np.minimum(ref, 50), np.maximum(ref, -7))
    )


@pytest.mark.parametrize("stride", [2, 3])
def test_strided_vector_loads_use_one_masked_wide_load(build, rng, stride):
    n = 9
    a = te.placeholder((n * stride + 1,), "float32", "A")
    b = te.compute((n,), lambda i: a[i * stride + 1] * 2.0, name="B")
    c = te.compute(
        (n,), lambda i: te.select(i >= 2, a[i * stride - 4 + stride * 2], te.const(-1.0)), name="C"
    )
    for out, ref in ((b, lambda x: x[1::stride][:n] * 2), (c, None)):
        s = compiler.create_schedule(out)
        s[out].vectorize("i")
        mod = build(s, [a, out])
        assert f"llvm.masked.load.v{n * stride}f32" in mod.llvm_ir
        x = rng.standard_normal(a.shape).astype(np.float32)
        res = np.zeros(n, np.float32)
        mod(x, res)
        if ref is None:
            idx = np.arange(n) * stride - 4 + stride * 2
            want = np.where(np.arange(n) >= 2, x[np.clip(idx, 0, None)], -1.0)
        else:
            want = ref(x)
        np.testing.assert_array_equal(res, want)


@pytest.mark.parametrize("block", [8, 16])
def test_strided_loads_of_whole_rows_load_the_rows_once(build, rng, block):
    """A blocked tensor read transposed (``A[p, ci]`` vectorized over ``p``, the rows of
    ``block`` floats, an unrolled loop over ``ci``): each column is one load of the lanes' rows
    and a shuffle (``row_column``), the same load for every column (LLVM keeps one); a
    buffer whose rows are not the stride (``A2``, flat) still gathers."""
    pixels, lanes = 37, 8  # a tail of 5 pixels: scalar
    a = te.placeholder((pixels, block), "float32", "A")
    b = te.compute((block, pixels), lambda ci, p: a[p, ci] + 1.0, name="B")
    s = compiler.create_schedule(b)
    po, pi = s[b].split("p", lanes)
    s[b].reorder(po, "ci", pi)
    s[b].unroll("ci")
    s[b].vectorize(pi)
    mod = build(s, [a, b])
    assert f"load <{lanes * block} x float>" in mod.llvm_ir
    x = rng.standard_normal(a.shape).astype(np.float32)
    out = np.zeros((block, pixels), np.float32)
    mod(x, out)
    np.testing.assert_array_equal(out, x.T + 1.0)
    flat = te.placeholder((pixels * block,), "float32", "A2")
    c = te.compute((block, pixels), lambda ci, p: flat[p * block + ci] + 1.0, name="C")
    s = compiler.create_schedule(c)
    po, pi = s[c].split("p", lanes)
    s[c].reorder(po, "ci", pi)
    s[c].vectorize(pi)
    mod = build(s, [flat, c])
    assert f"load <{lanes * block} x float>" not in mod.llvm_ir
    mod(x.ravel(), out)
    np.testing.assert_array_equal(out, x.T + 1.0)


@pytest.mark.parametrize("block,width", [(16, 4), (16, 8), (8, 2), (16, 1)])
def test_lane_permutations_within_a_row_load_the_row_once(build, rng, block, width):
    """Lane ``k`` reading element ``(k // width) * width + j`` of a row of ``block`` floats
    (a narrow group's input channel, an unrolled loop over ``j``): one load of the row and a
    shuffle per ``j`` (``row_gather``), not a scalar load per lane; a permutation reaching past
    the row (``k + 1``) still gathers, lane by lane."""
    rows = 5
    a = te.placeholder((rows, block), "float32", "A")
    j = te.reduce_axis(width, "j")
    b = te.compute(
        (rows, block),
        lambda r, k: te.sum(a[r, (k // width) * width + j] * (j + 1).astype("float32"), [j]),
        name="B",
    )
    s = compiler.create_schedule(b)
    if width > 1:
        s[b].unroll("j")
    s[b].vectorize("k")
    mod = build(s, [a, b])
    scalar_loads = mod.llvm_ir.count("load float")
    assert f"load <{block} x float>" in mod.llvm_ir and scalar_loads == 0
    x = rng.standard_normal(a.shape).astype(np.float32)
    out = np.zeros(a.shape, np.float32)
    mod(x, out)
    k = np.arange(block)
    want = sum((jj + 1) * x[:, (k // width) * width + jj] for jj in range(width))
    np.testing.assert_allclose(out, want, rtol=1e-5)  # FMA rounding
    c = te.compute((rows, block - 1), lambda r, k: a[r, k + 1] * a[r, (k // 2) * 2], name="C")
    s = compiler.create_schedule(c)
    s[c].vectorize("k")  # 15 lanes: k + 1 is affine; (k // 2) * 2 a row gather
    mod = build(s, [a, c])
    out = np.zeros((rows, block - 1), np.float32)
    mod(x, out)
    k = np.arange(block - 1)
    np.testing.assert_allclose(out, x[:, k + 1] * x[:, (k // 2) * 2], rtol=1e-6)


def test_parallel_kernels_work_in_a_forked_child(build, rng):
    """A child forked after the thread pool started (e.g. a tuner's measurement process)
    starts its own pool instead of waiting for the parent's workers."""
    import os

    x, y, z = _axpy(512)
    s = compiler.create_schedule(z)
    s[z].parallel("i")
    mod = build(s, [x, y, z], num_threads=2)
    a, b = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    out = np.zeros(512, np.float32)
    mod(a, b, out)  # the pool now exists in this process
    pid = os.fork()
    if pid == 0:  # child: must finish, and correctly
        res = np.zeros(512, np.float32)
        mod(a, b, res)
        os._exit(0 if np.allclose(res, a * 2 + b) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


_START_PROBE = """
import json, os, sys
import numpy as np
from pyvta.compiler.backend.llvm import runtime
from pyvta.compiler.graph import zoo
from pyvta.compiler.targets.cpu.kernels import CpuKernels
from pyvta.runtime.compiled_model import CompiledModel, run_model

def tasks():
    return len(os.listdir("/proc/self/task"))

counts = {"start": tasks()}
if sys.argv[1] == "start_pool":
    runtime.start_pool(1)  # one thread: no pool
    counts["one thread"] = tasks()
    runtime.start_pool(3)
    counts["started"] = tasks()
    runtime.start_pool(3)  # again: the same workers
    counts["again"] = tasks()
else:  # a model loaded on 2 threads starts the pool; its first inference adds no thread
    cm = CompiledModel.load(sys.argv[2])
    counts["read"] = tasks()
    kernels = {"cpu": CpuKernels(cm.graph, 2)}
    counts["loaded"] = tasks()
    run_model(cm, zoo.sample_inputs(1, 32, 0)[0], backends=kernels)
    counts["ran"] = tasks()
print(json.dumps(counts))
"""


@pytest.mark.parametrize("case", ["start_pool", "a loaded model"])
def test_the_pool_starts_where_a_model_is_loaded_not_in_its_first_inference(case, tmp_path):
    """``start_pool(n)`` starts the ``n - 1`` workers (none for one thread, no more when
    called again), and the CPU backend of a model calls it when made: the first inference then
    finds its threads started (it took ~1 ms more to start them)."""
    import json
    import os
    import subprocess
    import sys

    from pyvta.compiler.graph import zoo
    from pyvta.compiler.graph.compile import compile_model

    artifact = tmp_path / "m.npz"  # compiled here: the probe only reads it (no kernel runs)
    onnx_file = zoo.save_model("mobilenet", str(tmp_path / "m.onnx"), size=32, seed=0)
    compile_model(onnx_file, "cpu").save(artifact)
    env = dict(os.environ, PYVTA_CACHE_DIR=str(tmp_path))
    args = [sys.executable, "-c", _START_PROBE, case, str(artifact)]
    run = subprocess.run(args, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    print(case, seen)
    if case == "start_pool":
        assert seen["one thread"] == seen["start"]
        assert seen["started"] == seen["start"] + 2 == seen["again"]
    else:
        assert seen["read"] == seen["start"]  # reading the artifact starts no thread
        assert seen["loaded"] == seen["start"] + 1 == seen["ran"]
