"""The VTA conv2d template as a tensor expression and a schedule of the compiler core.

``conv2d_schedule(wl, config)`` writes the template's decisions as schedule steps, the way TVM's
VTA schedules do: output tiles (``tile_co`` x ``tile_h`` x ``tile_w``), virtual threads over the
output-channel tiles, the accumulator in ``local.acc_buffer`` (``cache_write``), the input chunk
and weights copied into ``local.inp_buffer`` / ``local.wgt_buffer`` (``cache_read``) inside the
input-channel chunk loop, and the innermost 1 x 16 by 16 x 16 product tensorized with the VTA GEMM
intrinsic. ``compiler.lower`` of the result is the loop program the instruction stream follows
(the tuner featurizes it); ``config_from_steps`` reads the ``ConvConfig`` back from the recorded
steps (the typed contract) and ``lower_conv2d`` emits the instructions.
"""

from __future__ import annotations

from pyvta.compiler import te
from pyvta.compiler.backend.vta.config import GEMM_LOOPS, ConvConfig
from pyvta.compiler.backend.vta.workload import ConvWorkload, WorkloadError
from pyvta.compiler.ir import Evaluate
from pyvta.compiler.ir.expr import Call
from pyvta.compiler.ops.pad import pad as pad_op
from pyvta.compiler.schedule import ScopeInfo, ScopeTable, TensorIntrin, create_schedule
from pyvta.isa import HwConfig

INP_SCOPE, WGT_SCOPE, ACC_SCOPE = "local.inp_buffer", "local.wgt_buffer", "local.acc_buffer"


def vta_scopes(hw: HwConfig) -> ScopeTable:
    """The accelerator's on-chip buffers as memory scopes, with their capacities."""
    return ScopeTable(
        [
            ScopeInfo("global"),
            ScopeInfo(INP_SCOPE, hw.inp_buff_bytes, hw.inp_elem_bytes),
            ScopeInfo(WGT_SCOPE, hw.wgt_buff_bytes, hw.wgt_elem_bytes),
            ScopeInfo(ACC_SCOPE, hw.acc_buff_bytes, hw.acc_elem_bytes),
        ]
    )


def gemm_intrin(hw: HwConfig) -> TensorIntrin:
    """out[b, o] += sum_k inp[b, k] * wgt[o, k]: one GEMM micro-op (BATCH x BLOCK_IN by
    BLOCK_IN x BLOCK_OUT, int8 -> int32); emitted as a ``vta.gemm`` call in the loop IR."""
    inp = te.placeholder((hw.batch, hw.block_in), "int8", "vta_inp")
    wgt = te.placeholder((hw.block_out, hw.block_in), "int8", "vta_wgt")
    k = te.reduce_axis(hw.block_in, "vta_k")
    out = te.compute(
        (hw.batch, hw.block_out),
        lambda b, o: te.sum(inp[b, k].astype("int32") * wgt[o, k].astype("int32"), k),
        name="vta_acc",
    )

    def emit(ins, outs):
        (ri, rw), (ro,) = ins, outs
        return Evaluate(Call("vta.gemm", [ro.offset, ri.offset, rw.offset], "int32"))

    return TensorIntrin("vta.gemm", out, (inp, wgt), emit)


def conv2d_te(wl: ConvWorkload):
    """(data, kernel, conv, padded) tensors of the packed conv2d (int8 x int8 -> int32 accumulators).

    data (ci_b, H, W, 1, b); kernel (co_b, ci_b, KH, KW, b, b); conv (co_b, OH, OW, 1, b)."""
    if wl.groups != 1 or wl.dilation != 1:
        raise WorkloadError(f"{wl}: the TE template has no block groups or dilation")
    b = wl.block
    data = te.placeholder((wl.ci_blocks, wl.height, wl.width, 1, b), "int8", "data")
    kernel = te.placeholder(
        (wl.co_blocks, wl.ci_blocks, wl.kernel_h, wl.kernel_w, b, b), "int8", "kernel"
    )
    padded = pad_op(data, (0, wl.pad, wl.pad_l, 0, 0), (0, wl.pad_b, wl.pad_r, 0, 0), name="pad")
    ci = te.reduce_axis(wl.ci_blocks, "ci")
    kh = te.reduce_axis(wl.kernel_h, "kh")
    kw = te.reduce_axis(wl.kernel_w, "kw")
    k = te.reduce_axis(b, "k")
    s = wl.stride
    conv = te.compute(
        (wl.co_blocks, wl.out_h, wl.out_w, 1, b),
        lambda co, y, x, n, o: te.sum(
            padded[ci, y * s + kh, x * s + kw, n, k].astype("int32")
            * kernel[co, ci, kh, kw, o, k].astype("int32"),
            [ci, kh, kw, k],
        ),
        name="conv",
    )
    return data, kernel, conv, padded


def conv2d_schedule(wl: ConvWorkload, c: ConvConfig, hw: HwConfig):
    """The schedule of ``conv2d_te(wl)`` for config ``c``; returns (schedule, [data, kernel, conv])."""
    data, kernel, conv, padded = conv2d_te(wl)
    sch = create_schedule(conv)
    acc = sch.cache_write(conv, ACC_SCOPE)
    st = sch[conv]
    co, y, x, n, o = st.leaf
    co_o, co_i = st.split(co, c.tile_co)
    y_o, y_i = st.split(y, c.tile_h)
    x_o, x_i = st.split(x, c.tile_w)
    v, co_oo = st.split(co_o, nparts=c.vthreads)
    if c.tile_order == "sp":  # spatial tiles outer (``conv2d_tile.tile_groups``)
        st.reorder(v, y_o, x_o, co_oo, co_i, y_i, x_i, n, o)
    else:
        st.reorder(v, co_oo, y_o, x_o, co_i, y_i, x_i, n, o)
    st.vthread(v)
    sa = sch[acc]
    sa.compute_at(st, x_o)
    aco, ay, ax, an, ao = sa.leaf[:5]
    aci, akh, akw, ak = sa.leaf[5:]
    ci_o, ci_i = sa.split(aci, c.tile_ci)
    # The two loops right outside the intrinsic become the GEMM's hardware loops (iter_out,
    # iter_in); the others are enumerated in its micro-op kernel.
    dims = {"ci": ci_i, "kh": akh, "kw": akw, "co": aco, "oh": ay, "ow": ax}
    outer, inner = c.gemm_loops
    kernel_dims = [dims[d] for d in ("ci", "kh", "kw", "co", "oh", "ow") if d not in (outer, inner)]
    sa.reorder(ci_o, *kernel_dims, dims[outer], dims[inner], an, ao, ak)
    sa.tensorize(an, gemm_intrin(hw))
    readers = [sch[acc]]
    inp = sch.cache_read(padded, INP_SCOPE, readers)  # the DMA folds the padding into pad fields
    if padded is not data:
        sch[padded].compute_inline()
    wgt = sch.cache_read(kernel, WGT_SCOPE, readers)
    sch[inp].compute_at(sa, ci_o)
    sch[wgt].compute_at(sa, ci_o)
    return sch, [data, kernel, conv]


def config_from_steps(steps) -> ConvConfig:
    """The ConvConfig a conv2d schedule's recorded steps encode (the typed lowering contract)."""
    splits, order, tiles = {}, None, None
    for s in steps:
        if s.kind == "split":
            splits[(s.stage, s.args["axis"])] = s.args
        if s.kind == "reorder" and s.stage == f"conv.{ACC_SCOPE}":
            order = s.args["axes"]
        if s.kind == "reorder" and s.stage == "conv":
            tiles = s.args["axes"]
    if order is None or "n.c" not in order:
        raise ValueError("steps are not a VTA conv2d schedule (no reorder around the intrinsic)")
    names = {"ci.inner": "ci", "kh": "kh", "kw": "kw", "co.c": "co", "y.c": "oh", "x.c": "ow"}
    at = order.index("n.c")
    loops = (names[order[at - 2]], names[order[at - 1]])
    if loops not in GEMM_LOOPS:
        raise ValueError(f"GEMM loops {loops} are not supported (allowed: {GEMM_LOOPS})")
    vthreads = splits[("conv", "co.outer")]["nparts"]
    return ConvConfig(
        tile_h=splits[("conv", "y")]["factor"],
        tile_w=splits[("conv", "x")]["factor"],
        tile_ci=splits[("conv.local.acc_buffer", "ci")]["factor"],
        tile_co=splits[("conv", "co")]["factor"],
        vthreads=vthreads,
        gemm_loops=loops,
        # the output tiles' order (``conv2d_schedule``); the schedule's other choices
        # (chunk order, micro-op mode, overlap) are no loop steps: their defaults
        tile_order="sp"
        if tiles and tiles.index("y.outer") < tiles.index("co.outer.inner")
        else "co",
    )


def build_conv2d(sch, wl: ConvWorkload, ep, weights, bias, device):
    """Compile a scheduled VTA conv2d for ``device``: the instruction stream follows the schedule
    (its config is read back from the steps). Returns a ``VtaConv2d``."""
    from pyvta.compiler.backend.vta.operator import VtaConv2d

    return VtaConv2d(wl, ep, weights, bias, device, config_from_steps(sch.steps))
