"""Direct NCHW conv2d for the GPU: shared-memory tiles of data (with its halo) and weights,
register tiles of output channels x columns.

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

from pyvta.compiler.ops.conv2d import conv2d_nchw
from pyvta.compiler.ops.cuda.fetch import cooperative_fetch
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import placeholder


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
):
    """Schedule and arguments ``(sch, [data, weight, out])``; weights in OIHW."""
    kn = knobs
    data = placeholder((batch, c, h, w), "float32", "data")
    wgt = placeholder((o, c, kernel, kernel), "float32", "weight")
    out = conv2d_nchw(data, wgt, stride, padding, name="conv")
    s = create_schedule(out)
    src = s.tensor("conv.pad") if padding else data
    ol = s.cache_write(out, "local")
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
    s[ol].reorder(rco, rci, "ry", "rx", "b.c", "f.c", "y.c", "x.c")
    if kn.unroll:
        for a in ("ry", "rx", "f.c", "x.c"):
            s[ol].unroll(a)
        st.unroll(ro)
        st.unroll(rx)
    for sh in shared:
        s[sh].compute_at(s[ol], rco)
        cooperative_fetch(s, sh, (kn.threads_x, kn.threads_y, kn.threads_z))
    return s, [data, wgt, out]
