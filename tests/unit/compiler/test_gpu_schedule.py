"""GPU schedule primitives in the compiler core: bind, shared / local scopes, cooperative
fetch, barrier insertion, the launch-limit rules."""

import pytest

from pyvta import compiler
from pyvta.compiler import te
from pyvta.compiler.backend.cuda import CUDA_PASSES, LaunchError, prepare
from pyvta.compiler.backend.cuda.passes import is_barrier
from pyvta.compiler.backend.llvm.vector import walk_stmts
from pyvta.compiler.ir import Buffer, For, PrimFunc, Store, Var
from pyvta.compiler.ir.verify import IRError, verify
from pyvta.compiler.ops.cuda import GpuGemmKnobs, gemm
from pyvta.compiler.passes import run_passes
from pyvta.compiler.schedule import replay, steps_from_json, steps_to_json


def _loops(func):
    return [s for s in walk_stmts(func.body) if isinstance(s, For)]


def test_bind_is_a_recorded_step_that_replays_to_identical_ir():
    s, args = gemm(70, 90, 33)
    binds = [st.to_dict() for st in s.steps if st.kind == "bind"]
    assert {"kind": "bind", "stage": "C", "axis": "i.outer", "thread": "blockIdx.y"} in binds
    assert sum(b["thread"] == "threadIdx.x" for b in binds) == 3  # C and the two shared copies
    again = replay([args[-1]], steps_from_json(steps_to_json(s.steps)))
    assert str(compiler.lower(again, args)) == str(compiler.lower(s, args))


def test_bind_checks_its_arguments():
    a = te.placeholder((8, 8), "float32", "A")
    k = te.reduce_axis(8, "k")
    c = te.compute((8,), lambda i: te.sum(a[i, k], k), name="C")
    s = compiler.create_schedule(c)
    with pytest.raises(ValueError, match=r"cannot bind to 'warp.x' \(allowed: blockIdx.x"):
        s[c].bind("i", "warp.x")
    with pytest.raises(ValueError, match="cannot bind reduce axis k"):
        s[c].bind("k", "threadIdx.x")
    io, ii = s[c].split("i", 4)
    s[c].bind(ii, "threadIdx.x")
    with pytest.raises(ValueError, match="already binds i.inner to threadIdx.x"):
        s[c].bind(io, "threadIdx.x")


def test_verifier_wants_constant_extents_on_bound_loops():
    b, n = Buffer("B", "float32", (8,)), Var("n")
    i = Var("i")
    loop = For(i, 0, n, "threadIdx.x", Store(b, i, te.const(1.0)))
    with pytest.raises(IRError, match="threadIdx.x loop i needs a constant extent"):
        verify(PrimFunc("f", [b], For(n, 0, 4, "serial", loop)))


def test_shared_tile_spans_the_block_and_registers_one_thread():
    kn = GpuGemmKnobs(threads_x=8, threads_y=4, reg_m=2, reg_n=3, tile_k=5)
    s, args = gemm(100, 100, 40, kn)
    bufs = {
        st.buffer.name: st.buffer
        for st in walk_stmts(compiler.lower(s, args).body)
        if hasattr(st, "buffer") and not isinstance(st, Store)
    }
    # one shared copy per block: (threads_y * reg_m) x tile_k of A, tile_k x (threads_x * reg_n)
    assert (bufs["A.shared"].shape, bufs["A.shared"].scope) == ((8, 5), "shared")
    assert (bufs["B.shared"].shape, bufs["B.shared"].scope) == ((5, 24), "shared")
    assert (bufs["C.local"].shape, bufs["C.local"].scope) == ((2, 3), "local")


def test_barriers_guard_the_shared_tiles_in_the_reduction_loop():
    s, args = gemm(64, 64, 64)
    func = run_passes(compiler.lower(s, args), CUDA_PASSES)
    (ko,) = [f for f in _loops(func) if f.var.name == "k.outer"]
    top = list(ko.body.stmts)
    assert is_barrier(top[0])  # write after read: the previous step's readers are done
    inner = [x for x in walk_stmts(ko.body) if is_barrier(x)]
    assert len(inner) == 2  # and read after write: the tiles are complete before use
    assert sum(is_barrier(x) for x in walk_stmts(func.body)) == 2


def test_virtual_threads_interleave_register_tiles_and_share_the_fetch():
    kn = GpuGemmKnobs(threads_x=8, threads_y=4, reg_m=2, reg_n=2, tile_k=4, vthread_m=2)
    s, args = gemm(64, 64, 32, kn)
    assert [st.kind for st in s.steps].count("vthread") == 1
    func = run_passes(compiler.lower(s, args), CUDA_PASSES)
    assert not [f for f in _loops(func) if f.kind == "vthread"]
    stores = [st for st in walk_stmts(func.body) if isinstance(st, Store)]
    local = {st.buffer.shape for st in stores if st.buffer.name == "C.local"}
    assert local == {(8,)}  # one 2 x 2 tile per virtual thread
    shared = [st for st in stores if st.buffer.scope == "shared"]
    assert len(shared) == 2  # A and B fetched once, not once per virtual thread
    outs = [st for st in stores if st.buffer.name == "C"]
    assert len(outs) == 2  # the write-back per virtual thread, 4 threads x 2 rows apart
    rows = {str(st.index).count("+ 512") for st in outs}  # 8 rows of 64 columns
    assert rows == {0, 1}


def test_launch_limits_are_checked_per_architecture():
    s, args = gemm(256, 256, 64, GpuGemmKnobs(threads_x=64, threads_y=32))
    with pytest.raises(LaunchError, match="2048 threads per block .* sm_90 allows at most 1024"):
        prepare(compiler.lower(s, args), "sm_90")
    s, args = gemm(256, 256, 512, GpuGemmKnobs(tile_k=128))
    with pytest.raises(LaunchError, match="65536 bytes of shared memory .* allows 49152"):
        prepare(compiler.lower(s, args), "sm_80")
    with pytest.raises(LaunchError, match="'sm_70' is not supported"):
        prepare(compiler.lower(*gemm(8, 8, 8)), "sm_70")


def test_a_stage_left_unbound_is_refused():
    a = te.placeholder((8,), "float32", "A")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="B")
    s = compiler.create_schedule(b)
    with pytest.raises(LaunchError, match="not bound to blockIdx"):
        compiler.build(s, [a, b], target="cuda")
