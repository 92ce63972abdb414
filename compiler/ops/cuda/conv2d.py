"""NCHW conv2d for the GPU, direct (``conv2d_gpu``) and as an implicit GEMM
(``conv2d_implicit_gemm``).

Direct: shared-memory tiles of data (with its halo) and weights, register tiles of output
channels x columns.

``data`` ``[N, C, H, W]``, ``kernel`` ``[O, C, KH, KW]`` -> ``[N, O, OH, OW]``, float32, any
stride / padding (the zero padding is computed inline while the data tile is fetched). A
block of ``threads_x x threads_y x threads_z`` threads computes ``threads_x * reg_x`` columns x
``threads_y`` rows x ``threads_z * reg_o`` output channels; each thread ``reg_o x reg_x``
outputs in registers. The reduction runs over input channels in steps of ``tile_c``: per step
the block copies the data tile (``tile_c`` channels of the rows and columns its outputs read)
and the weight tile into shared memory, then every thread reads them from there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pyvta.compiler.ops.conv2d import _out_size, conv2d_nchw
from pyvta.compiler.ops.cuda.epilogue import NO_EPILOGUE, Epilogue, apply_epilogue
from pyvta.compiler.ops.cuda.fetch import bind_flat, cooperative_fetch
from pyvta.compiler.ops.cuda.gemm import GpuGemmKnobs, schedule_matmul
from pyvta.compiler.ops.dense import matmul
from pyvta.compiler.ops.pad import pad as pad_op
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum


@dataclass(frozen=True)
class GpuConv2dKnobs:
    """``threads_x`` / ``threads_y`` / ``threads_z``: block shape over output columns / rows /
    channels; ``reg_x`` / ``reg_o``: columns / channels per thread (registers); ``tile_c``:
    input channels per shared tile; ``unroll``: unroll the kernel window and register tile."""

    threads_x: int = 8
    threads_y: int = 4
    threads_z: int = 4
    reg_x: int = 2
    reg_o: int = 4
    tile_c: int = 8
    unroll: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def conv2d_gpu(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: int,
    stride: int = 1,
    padding: int = 0,
    knobs: GpuConv2dKnobs = GpuConv2dKnobs(),
    batch: int = 1,
    epilogue: Epilogue = NO_EPILOGUE,
):
    """Schedule and arguments ``(sch, [data, weight, out])``; weights in OIHW. With an
    ``epilogue`` the arguments are ``[data, weight, (bias), (residual), out]``."""
    kn = knobs
    data = placeholder((batch, c, h, w), "float32", "data")
    wgt = placeholder((o, c, kernel, kernel), "float32", "weight")
    out, extra, s, ol, sfx = _with_epilogue(
        conv2d_nchw(data, wgt, stride, padding, name="conv"), epilogue
    )
    src = s.tensor("conv.pad") if padding else data
    shared = [s.cache_read(src, "shared", [s[ol]]), s.cache_read(wgt, "shared", [s[ol]])]
    if padding:
        s[src].compute_inline()
    st = s[out]
    fo, fi = st.split("f", kn.threads_z * kn.reg_o)
    tz, ro = st.split(fi, kn.reg_o)
    yo, ty = st.split("y", kn.threads_y)
    xo, xi = st.split("x", kn.threads_x * kn.reg_x)
    tx, rx = st.split(xi, kn.reg_x)
    st.reorder("b", fo, yo, xo, tz, ty, tx, ro, rx)
    bz = st.fuse("b", fo)
    for axis, tag in ((bz, "blockIdx.z"), (yo, "blockIdx.y"), (xo, "blockIdx.x")):
        st.bind(axis, tag)
    for axis, tag in ((tz, "threadIdx.z"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        st.bind(axis, tag)
    s[ol].compute_at(st, tx)
    rco, rci = s[ol].split("rc", kn.tile_c)
    s[ol].reorder(rco, rci, "ry", "rx", *(f"{a}{sfx}" for a in "bfyx"))
    if kn.unroll:
        for a in ("ry", "rx", f"f{sfx}", f"x{sfx}"):
            s[ol].unroll(a)
        st.unroll(ro)
        st.unroll(rx)
    for sh in shared:
        s[sh].compute_at(s[ol], rco)
        cooperative_fetch(s, sh, (kn.threads_x, kn.threads_y, kn.threads_z))
    return s, [data, wgt, *extra, out]


def _with_epilogue(acc, ep: Epilogue, channel_axis: int = 1):
    """``(out, extra args, schedule, local stage, its axis suffix)`` of reduction ``acc``:
    without an epilogue ``acc`` is the output, cached in registers by ``cache_write``
    (axes ``<name>.c``); with one, ``acc`` itself is the ``local`` stage (same axis names)."""
    if ep.empty:
        s = create_schedule(acc)
        return acc, [], s, s.cache_write(acc, "local"), ".c"
    out, extra = apply_epilogue(acc, ep, channel_axis)
    s = create_schedule(out)
    s[acc].set_scope("local")
    return out, extra, s, acc, ""


def depthwise_conv2d_gpu(
    c: int,
    h: int,
    w: int,
    kernel: int,
    stride: int = 1,
    padding: int = 0,
    threads: int = 128,
    epilogue: Epilogue = NO_EPILOGUE,
):
    """Depthwise (group = C) NCHW conv2d, one output element per thread, the kernel window
    unrolled in the thread; weights ``[C, 1, K, K]``. ``(sch, [data, weight, (bias),
    (residual), out])``. The reads of neighbouring threads overlap in the cache, so no
    shared tile."""
    oh = _out_size("depthwise_conv2d_gpu", h, kernel, stride, padding)
    ow = _out_size("depthwise_conv2d_gpu", w, kernel, stride, padding)
    data = placeholder((1, c, h, w), "float32", "data")
    wgt = placeholder((c, 1, kernel, kernel), "float32", "weight")
    src = pad_op(data, (0, 0, padding, padding), name="pad") if padding else data
    ry, rx = reduce_axis(kernel, "ry"), reduce_axis(kernel, "rx")
    acc = compute(
        (1, c, oh, ow),
        lambda b, f, y, x: te_sum(
            src[b, f, y * stride + ry, x * stride + rx] * wgt[f, 0, ry, rx], [ry, rx]
        ),
        name="conv",
    )
    out, extra, s, local, _ = _with_epilogue(acc, epilogue)
    if padding:
        s[src].compute_inline()
    bind_flat(s, out, threads)
    thread_axis = s[out].leaf[-1]
    s[local].compute_at(s[out], thread_axis)
    s[local].unroll("ry")
    s[local].unroll("rx")
    return s, [data, wgt, *extra, out]


def conv2d_implicit_gemm(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: int,
    stride: int = 1,
    padding: int = 0,
    knobs: GpuGemmKnobs | None = None,
):
    """Batch-1 conv2d as the GEMM ``out[O, OH*OW] = W[O, C*K*K] @ cols[C*K*K, OH*OW]``
    scheduled by the GPU GEMM template (``gemm.schedule_matmul``). Neither matrix exists in
    memory: both are index maps, computed while their shared tiles are fetched (``cols`` is
    the im2col view of the zero-padded data). ``(sch, [data, weight, out])``; ``out`` is
    ``[O, OH * OW]``, the memory layout of NCHW ``[1, O, OH, OW]``."""
    knobs = knobs or GpuGemmKnobs()
    kk = kernel * kernel
    oh = _out_size("conv2d_implicit_gemm", h, kernel, stride, padding)
    ow = _out_size("conv2d_implicit_gemm", w, kernel, stride, padding)
    data = placeholder((1, c, h, w), "float32", "data")
    wgt = placeholder((o, c, kernel, kernel), "float32", "weight")
    src = pad_op(data, (0, 0, padding, padding), name="pad") if padding else data

    def col(r, p):
        y, x = p // ow * stride + r // kernel % kernel, p % ow * stride + r % kernel
        return src[0, r // kk, y, x]

    wmat = compute(
        (o, c * kk), lambda f, r: wgt[f, r // kk, r // kernel % kernel, r % kernel], name="wmat"
    )
    cols = compute((c * kk, oh * ow), col, name="cols")
    out = matmul(wmat, cols, name="out")
    s = create_schedule(out)
    schedule_matmul(s, out, [wmat, cols], knobs)
    for t in (wmat, cols, src) if padding else (wmat, cols):
        s[t].compute_inline()
    return s, [data, wgt, out]
