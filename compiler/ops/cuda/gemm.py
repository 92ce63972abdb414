"""GEMM and dense for the GPU: shared-memory tiles, register tiles, one output tile per block.

``C[M, N] = A[M, K] @ B[K, N]`` (``dense``: ``Y[M, N] = X[M, K] @ W[N, K]^T``). A block of
``threads_y x threads_x`` threads computes a ``(vthread_m * threads_y * reg_m) x (vthread_n *
threads_x * reg_n)`` tile of C; each thread accumulates ``vthread_m x vthread_n`` register
tiles of ``reg_m x reg_n`` outputs (``local``), spread over the block's tile ``threads * reg``
apart (virtual threads: neighbouring threads read neighbouring shared-memory words and write
neighbouring outputs). The reduction
runs in steps of ``tile_k``: per step the block copies its A and B tiles into shared memory
cooperatively (barriers inserted by the backend), then every thread reads them from there.
Any M, N, K work (tails are guarded).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pyvta.compiler.ops.cuda.epilogue import NO_EPILOGUE, Epilogue, apply_epilogue
from pyvta.compiler.ops.cuda.fetch import cooperative_fetch
from pyvta.compiler.ops.dense import dense, matmul
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import placeholder


@dataclass(frozen=True)
class GpuGemmKnobs:
    """``threads_x`` / ``threads_y``: block shape (over N / M); ``reg_n`` / ``reg_m``: outputs
    per thread along N / M (registers); ``tile_k``: reduction step (shared tile depth);
    ``unroll``: unroll the register tile and the ``tile_k`` loop; ``vthread_m`` / ``vthread_n``:
    register tiles per thread along M / N (virtual threads)."""

    threads_x: int = 16
    threads_y: int = 16
    reg_m: int = 4
    reg_n: int = 4
    tile_k: int = 8
    unroll: bool = True
    vthread_m: int = 1
    vthread_n: int = 1

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def block_m(self) -> int:
        return self.vthread_m * self.threads_y * self.reg_m

    @property
    def block_n(self) -> int:
        return self.vthread_n * self.threads_x * self.reg_n


def schedule_matmul(sch, out, inputs, knobs: GpuGemmKnobs, local=None) -> None:
    """Schedule 2-D reduction ``out[i, j] = sum_k ...`` reading the 2-D ``inputs`` (cached in
    shared memory) with ``knobs``. ``local``: the reduction's ``local`` stage when ``out`` is
    an epilogue reading it (default: ``out`` is the reduction, cached by ``cache_write``)."""
    kn = knobs
    cl, sfx = (sch.cache_write(out, "local"), ".c") if local is None else (local, "")
    shared = [sch.cache_read(t, "shared", [sch[cl]]) for t in inputs]
    c = sch[out]
    bi, vi, ti, ri = _split3(c, "i", kn.block_m, kn.vthread_m, kn.reg_m)
    bj, vj, tj, rj = _split3(c, "j", kn.block_n, kn.vthread_n, kn.reg_n)
    c.reorder(*[a for a in (bi, bj, vi, vj, ti, tj, ri, rj) if a is not None])
    for v in (vi, vj):
        if v is not None:
            c.vthread(v)
    c.bind(bi, "blockIdx.y")
    c.bind(bj, "blockIdx.x")
    c.bind(ti, "threadIdx.y")
    c.bind(tj, "threadIdx.x")
    sch[cl].compute_at(c, tj)
    ko, ki = sch[cl].split("k", kn.tile_k)
    sch[cl].reorder(ko, ki, f"i{sfx}", f"j{sfx}")
    if kn.unroll:
        for a in (ki, f"i{sfx}", f"j{sfx}"):
            sch[cl].unroll(a)
        c.unroll(ri)
        c.unroll(rj)
    for s in shared:
        sch[s].compute_at(sch[cl], ko)
        cooperative_fetch(sch, s, (kn.threads_x, kn.threads_y))


def _split3(stage, axis, block: int, vthreads: int, reg: int):
    """``axis`` -> (block, virtual thread or None, thread, register) loops."""
    b, rest = stage.split(axis, block)
    v = None
    if vthreads > 1:
        v, rest = stage.split(rest, nparts=vthreads)
    t, r = stage.split(rest, reg)
    return b, v, t, r


def gemm(m: int, n: int, k: int, knobs: GpuGemmKnobs = GpuGemmKnobs(), dtype="float32"):
    """Schedule and arguments ``(sch, [A, B, C])`` of ``C = A @ B`` on the GPU."""
    a = placeholder((m, k), dtype, "A")
    b = placeholder((k, n), dtype, "B")
    c = matmul(a, b, name="C")
    s = create_schedule(c)
    schedule_matmul(s, c, [a, b], knobs)
    return s, [a, b, c]


def dense_gpu(
    m: int,
    n: int,
    k: int,
    knobs: GpuGemmKnobs = GpuGemmKnobs(),
    dtype="float32",
    epilogue: Epilogue = NO_EPILOGUE,
):
    """Schedule and arguments ``(sch, [X, W, Y])`` of ``Y = X @ W^T`` (W is ``[N, K]``); with
    an ``epilogue`` ``[X, W, (bias), (residual), Y]``."""
    x = placeholder((m, k), dtype, "X")
    w = placeholder((n, k), dtype, "W")
    y = dense(x, w, name="Y")
    if epilogue.empty:
        s = create_schedule(y)
        schedule_matmul(s, y, [x, w], knobs)
        return s, [x, w, y]
    out, extra = apply_epilogue(y, epilogue, channel_axis=1, name="out")
    s = create_schedule(out)
    s[y].set_scope("local")
    schedule_matmul(s, out, [x, w], knobs, local=y)
    return s, [x, w, *extra, out]
