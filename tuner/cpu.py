"""CPU adapter: the compiler's CPU schedule templates as tuning tasks (their measurement
``Backend`` is ``tuner.cpu_measure.CpuBackend``): GEMM, NCHW conv2d, and a network's NCHWc conv
layers (``nchwc_conv_tasks``): the direct and Winograd templates here, the pointwise and
depthwise ones in ``tuner.cpu_pointwise`` and ``tuner.cpu_depthwise`` (what they share:
``tuner.cpu_nchwc``); ``TEMPLATES`` names them all.

Tasks: ``gemm_task(m, n, k)`` (``C[m, n] = A[m, k] @ B[k, n]``, float32) and
``conv2d_task(c, h, w, o, kernel, stride, padding)`` (NCHW, batch 1, float32).
Costs are seconds per call (median of ``repeats``).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from pyvta.tuner.cpu_depthwise import DEPTHWISE_NCHWC, depthwise_task_args
from pyvta.tuner.cpu_measure import ON_CPU, cpu_measured_on, cpu_nearness  # noqa: F401 (theirs)
from pyvta.tuner.cpu_nchwc import (
    TILE_PARTS,
    conv_tiles,
    graph_conv,
    nchwc_inputs,
    nchwc_reference,
    nchwc_task_args,
    nchwc_workload,
    schedule_of_template,
)
from pyvta.tuner.cpu_pointwise import POINTWISE_NCHWC
from pyvta.tuner.space import BoolKnob, ChoiceKnob, ConfigSpace, TileKnob, divisors
from pyvta.tuner.task import InvalidConfig, Task, Template

_nchwc_reference = nchwc_reference  # the direct template's reference, by its name of before


def register_tiles(m: int, n: int) -> list[tuple[int, int]]:
    """``(bm, bn)`` register tiles of a GEMM's ``C`` on the host: ``bn`` a divisor of ``n`` in
    whole SIMD vectors (at most 8), and the ``bm x bn`` accumulators within the register file
    with 4 registers to spare (for B's vectors and A's broadcast). When ``n`` has no divisor in
    whole vectors: any divisor of ``n`` from 4 up, one vector per row."""
    from pyvta.compiler.backend.llvm import CpuTarget

    target = CpuTarget.host()
    lanes = target.vector_lanes("float32")
    room = target.vector_registers - 4
    rows = [v for v in (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28) if v <= m] or [m]
    cols = [d for d in divisors(n) if d % lanes == 0 and d // lanes <= 8]
    if cols:
        return [(bm, bn) for bn in cols for bm in rows if bm * (bn // lanes) <= room]
    cols = [d for d in divisors(n) if d >= 4] or [n]
    return [(bm, bn) for bn in cols for bm in rows if bm <= room]


def _gemm_space(m: int, n: int, k: int) -> ConfigSpace:
    bk = [d for d in divisors(k) if d <= 32]
    return ConfigSpace(
        [
            TileKnob("tile", ("bm", "bn"), register_tiles(m, n)),
            ChoiceKnob("bk", bk),
            BoolKnob("parallel"),
            BoolKnob("panels_outer"),
            BoolKnob("pack_b"),
        ]
    )


def gemm_knobs(config):
    """The ``compiler.ops.cpu.GemmKnobs`` of a point of a GEMM task's space."""
    from pyvta.compiler.ops.cpu import GemmKnobs

    d = dict(config)
    d["bm"], d["bn"] = d.pop("tile")
    return GemmKnobs(**d)


def gemm_point(task: Task, knobs):
    """The point of a GEMM task's space for ``GemmKnobs`` (``gemm_knobs``' inverse);
    ``ValueError`` if the space has no such point (e.g. a tile too big for the registers)."""
    d = knobs.to_dict()
    d["tile"] = (d.pop("bm"), d.pop("bn"))
    return task.space.config(d)


def _gemm_instantiate(config, m: int, n: int, k: int):
    from pyvta.compiler.ops.cpu import matmul_packed

    try:
        return matmul_packed(m, n, k, gemm_knobs(config))
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def _conv2d_space(c, h, w, o, kernel, stride, padding) -> ConfigSpace:
    ow = (w + 2 * padding - kernel) // stride + 1
    return ConfigSpace(
        [
            ChoiceKnob("ic", [d for d in divisors(c) if d <= 64]),
            ChoiceKnob("oc", [d for d in divisors(o) if 4 <= d <= 64] or [o]),
            ChoiceKnob("ow_block", [d for d in divisors(ow) if d <= 32]),
            BoolKnob("parallel"),
        ]
    )


def _conv2d_instantiate(config, c, h, w, o, kernel, stride, padding):
    from pyvta.compiler.ops.cpu import Conv2dKnobs, conv2d_nchw_blocked

    knobs = Conv2dKnobs(config["ic"], config["oc"], config["ow_block"], config["parallel"])
    try:
        return conv2d_nchw_blocked(c, h, w, o, kernel, stride, padding, knobs)
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def _gemm_lower(config, *args):
    from pyvta.compiler import lower

    return lower(*_gemm_instantiate(config, *args))


def _conv2d_lower(config, *args):
    from pyvta.compiler import lower

    return lower(*_conv2d_instantiate(config, *args))


def _gemm_reference(arrays, m, n, k):
    a, b, _ = arrays
    return a.astype(np.float64) @ b.astype(np.float64)


def _conv2d_reference(arrays, c, h, w, o, kernel, stride, padding):
    """float64 NCHW conv2d; the weights come in the template's blocked layout
    ``(O/oc, C/ic, K, K, ic, oc)`` (its blocks read off the array's shape)."""
    from numpy.lib.stride_tricks import sliding_window_view

    data, wgt, _ = arrays
    oihw = wgt.astype(np.float64).transpose(0, 5, 1, 4, 2, 3).reshape(o, c, kernel, kernel)
    pad = ((0, 0), (padding, padding), (padding, padding))
    x = np.pad(data[0].astype(np.float64), pad)
    win = sliding_window_view(x, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
    return np.tensordot(oihw, win, axes=([1, 2, 3], [0, 3, 4]))[None]


def resnet18_cpu_workloads(features: str | None = None) -> dict:
    """ResNet-18's conv layers C1-C12 (``compiler.workloads.RESNET18_LAYERS``) as the CPU
    network runs them, ``{name: ConvWorkload}``: channels in the blocks the layout plan gives
    them at the feature level ``features`` (``alter_cpu_layout.channel_block``; the 3-channel
    stem reads its channels as one block)."""
    from pyvta.compiler.targets.cpu.alter_cpu_layout import MIN_CHANNEL_BLOCK, channel_block
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload, host_lanes
    from pyvta.compiler.workloads import RESNET18_LAYERS

    lanes = host_lanes(features)
    out = {}
    for name, s in RESNET18_LAYERS.items():
        c, o, k = s.in_channels, s.out_channels, s.kernel
        ib = c if c < MIN_CHANNEL_BLOCK else channel_block(c, lanes)
        pads, strides = (s.pad,) * 4, (s.stride,) * 2
        out[name] = ConvWorkload(
            c, s.height, s.width, o, (k, k), strides, pads, ib, channel_block(o, lanes)
        )
    return out


TILE_X = (1, 2, 3, 4, 6, 8)  # register tiles of a row per cache tile (1: no cache tile)
PARALLEL_LOOPS = (1, 2, 3)  # outermost loops fused into the parallel one


def _below(n: int) -> list[int]:
    """1 (no split) and the divisors of ``n`` strictly between 1 and ``n``."""
    return [1] + [d for d in divisors(n) if 1 < d < n]


def _nchwc_space(*args) -> ConfigSpace:
    """The direct template's knobs (``compiler.ops.cpu.nchwc_direct.NchwcConvKnobs``): the register
    tile, ``unroll_rx`` and ``flat`` (the space's first three knobs, as before the others came:
    records logged then still read, ``ConfigSpace.legacy``), then the cache tiles (channel
    blocks and rows: divisors; a row's register tiles: ``TILE_X``, the last cache tile maybe
    shorter), the loop orders, the reduction's chunks (divisors of the input blocks) and
    order, unrolling, the parallel loops and the padding's placement, each with the default
    that builds the loops of before; last the output blocks a register tile spans
    (``oc_blocks``: :func:`oc_block_counts`; default 1, what a record logged before the knob
    built and measured). Not every point is valid (``direct_valid_count``)."""
    from pyvta.compiler.ops.cpu import nchwc_direct as nchwc

    wl = nchwc_workload(*args)
    oh, ow = wl.out_hw
    c_blocks = wl.in_blocks_read  # a grouped conv's reduction: its span of blocks
    return ConfigSpace(
        [
            TileKnob("tile", ("ow_block", "oc_tile"), conv_tiles(ow, wl.ob)),
            BoolKnob("unroll_rx"),
            BoolKnob("flat"),
            ChoiceKnob("tile_f", _below(wl.o // wl.ob), default=1),
            ChoiceKnob("tile_y", _below(oh), default=1),
            ChoiceKnob("tile_x", TILE_X, default=1),
            ChoiceKnob("outer_order", nchwc.LOOP_ORDERS, default=nchwc.LOOP_AXES),
            ChoiceKnob("inner_order", nchwc.LOOP_ORDERS, default=nchwc.LOOP_AXES),
            ChoiceKnob("rco_block", [0] + _below(c_blocks)[1:], default=0),
            ChoiceKnob("reduce_order", nchwc.REDUCE_ORDERS, default=nchwc.REDUCE_AXES),
            BoolKnob("unroll_ry", default=False),
            ChoiceKnob("unroll_rci", divisors(wl.ib), default=1),
            ChoiceKnob("parallel_loops", PARALLEL_LOOPS, default=2),
            ChoiceKnob("pad_at", nchwc.PAD_PLACES if any(wl.pads) else ["root"], default="root"),
            ChoiceKnob("oc_blocks", oc_block_counts(wl), default=1),
        ],
        functools.partial(_direct_problem, args),
    )


def oc_block_counts(wl) -> list[int]:
    """The ``oc_blocks`` values of the direct template's space for ``wl``: 1, and of the counts
    the compiler's untuned choice picks among (``nchwc_direct.OC_BLOCK_CHOICES``) those the
    knobs accept for the layer (``NchwcConvKnobs.size_problem``: at most its output blocks) with
    a register tile that fits (``conv_tiles`` of that many blocks)."""
    from pyvta.compiler.ops.cpu.nchwc_direct import OC_BLOCK_CHOICES, NchwcConvKnobs

    dims = (wl.out_hw, wl.o // wl.ob, wl.in_blocks_read, wl.ib, wl.ob)
    return [1] + [
        b
        for b in OC_BLOCK_CHOICES
        if NchwcConvKnobs(ow_block=1, oc_blocks=b).size_problem(*dims) is None
        and conv_tiles(wl.out_hw[1], wl.ob, b)
    ]


def direct_knobs(config):
    """The ``NchwcConvKnobs`` of a point (or a dict of one) of the direct template's space."""
    from pyvta.compiler.ops.cpu.nchwc_direct import NchwcConvKnobs

    return NchwcConvKnobs(**schedule_of_template("direct", config)["knobs"])


# Vector FMAs one step of the direct template's reduction may unroll into straight-line code
# (``NchwcConvKnobs.unrolled_fmas``). Measured on ResNet-18's C1-C9 (4,700 builds, one Intel
# AVX-512 host): past 512 the 3x3 layers' builds took 10-30 s on average, a third of their build
# time, and 57 of the 69 builds that outlasted 30 s; no layer's best was past it (2 configs
# within 5% of a best were): ``benchmarks/cpu_unroll_bound.py``.
MAX_UNROLLED_FMAS = 512


def _direct_problem(args: tuple, config) -> str | None:
    """Why a point of the direct template's space for the workload ``args`` is not searched
    (``NchwcConvKnobs.size_problem`` and ``loop_problem``, without lowering; an unrolled
    reduction past ``MAX_UNROLLED_FMAS``), or None."""
    wl = nchwc_workload(*args)
    k = direct_knobs(config)
    why = _layer_problem(wl, k)
    return why or _spill_problem(wl, k) or _unroll_problem(wl, k)


def _layer_problem(wl, k) -> str | None:
    """``NchwcConvKnobs.layer_problem`` of the direct knobs ``k`` for the workload ``wl``."""
    dims = (wl.out_hw, wl.o // wl.ob, wl.c // wl.ib, wl.ib, wl.ob)
    return k.layer_problem(*dims, any(wl.pads), wl.groups)


def _unroll_problem(wl, k) -> str | None:
    """Why the direct knobs ``k`` unroll more of the reduction than ``MAX_UNROLLED_FMAS``, or
    None."""
    from pyvta.compiler.backend.llvm import CpuTarget

    n = k.unrolled_fmas(wl.kernel, wl.ob, CpuTarget.host().vector_lanes("float32"))
    if n <= MAX_UNROLLED_FMAS:
        return None
    return (
        f"{n} vector FMAs unrolled in one reduction step (ow_block {k.ow_block} x oc_blocks"
        f" {k.oc_blocks} x unroll_rx/unroll_ry taps x unroll_rci {k.unroll_rci}): at most"
        f" {MAX_UNROLLED_FMAS} are searched (past it builds take 15-30 s and were never the best)"
    )


def _spill_problem(wl, k) -> str | None:
    """Why the register tile of the direct knobs ``k`` does not fit the registers across its
    ``oc_blocks`` output blocks (it is not one of ``conv_tiles`` of that many blocks), or None
    (the tile knob's tiles are one block's: they fit)."""
    if k.oc_blocks == 1:
        return None
    tiles = conv_tiles(wl.out_hw[1], wl.ob, k.oc_blocks)
    if (k.ow_block, k.oc_tile or wl.ob) in tiles:
        return None
    most = max((d for d, _ in tiles), default=0)
    return (
        f"ow_block {k.ow_block} x oc_blocks {k.oc_blocks}: more accumulators than the registers"
        f" hold (at most {most} columns of {k.oc_blocks} blocks of {wl.ob})"
    )


def direct_valid_count(task: Task) -> int:
    """The valid points of a direct task's space (``space.problem`` None), counted
    without visiting each: the register and cache tiles' sizes are enumerated, and per their
    kind (flat or not, which cache tiles there are) the loop orders and parallel loops that
    fit (a register tile of ``oc_blocks`` blocks only where it fits the registers); the
    reduction's order with ``unroll_rx``, the padding placement and the remaining knobs (any
    value fits) multiply. ``tests/unit/tuner/test_cpu_spaces.py`` checks it against
    visiting every point of small spaces."""
    sp, wl = task.space, nchwc_workload(*task.args)
    vals = {k.name: k.values for k in sp.knobs}
    dims = (wl.out_hw, wl.o // wl.ob, wl.in_blocks_read, wl.ib, wl.ob)
    padded = any(wl.pads)

    base = {k.name: k.default for k in sp.knobs if k.default is not None}
    base.update(tile=vals["tile"][0], unroll_rx=False, flat=False)

    def knobs(**kw):
        return direct_knobs({**base, **kw})

    orders: dict = {}  # (flat, cache tiles there are) -> fitting (outer, inner, parallel)
    total = dict.fromkeys(
        (
            (tile, b)
            for tile, b in itertools.product(vals["tile"], vals["oc_blocks"])
            if _spill_problem(wl, knobs(tile=tile, oc_blocks=b)) is None
        ),
        0,
    )  # register tile -> fitting cache tiles, loop orders and parallel loops
    for (tile, b), flat, tf, ty, tx in itertools.product(
        total, vals["flat"], vals["tile_f"], vals["tile_y"], vals["tile_x"]
    ):
        k = knobs(tile=tile, flat=flat, tile_f=tf, tile_y=ty, tile_x=tx, oc_blocks=b)
        if k.size_problem(*dims) is not None:
            continue
        kind = (flat, k.present_loops())
        if kind not in orders:
            orders[kind] = sum(
                knobs(flat=flat, tile_f=tf, tile_y=ty, tile_x=tx, outer_order=a,
                      inner_order=b, parallel_loops=p).loop_problem(padded) is None
                for a, b, p in itertools.product(
                    vals["outer_order"], vals["inner_order"], vals["parallel_loops"]
                )
            )  # fmt: skip
        total[tile, b] += orders[kind]
    reduce = {  # unroll_rx -> fitting reduction orders
        rx: sum(knobs(unroll_rx=rx, reduce_order=r).loop_problem(padded) is None
                for r in vals["reduce_order"])
        for rx in vals["unroll_rx"]
    }  # fmt: skip

    # oc_blocks -> fitting padding places, and unroll_rci -> fitting reduction chunks (a
    # grouped conv's exact tile reduces over its groups' channels: ``_layer_problem``), on a
    # register tile of whole blocks (what a tile of several blocks takes)
    def of_blocks(b, **kw):
        return _layer_problem(wl, knobs(tile=(1, wl.ob), oc_blocks=b, **kw)) is None

    pads = {b: sum(of_blocks(b, pad_at=p) for p in vals["pad_at"]) for b in vals["oc_blocks"]}
    sizes = {
        (b, u): sum(of_blocks(b, rco_block=r, unroll_rci=u) for r in vals["rco_block"])
        for b in vals["oc_blocks"]
        for u in vals["unroll_rci"]
    }
    unrolled = itertools.product(total, vals["unroll_rx"], vals["unroll_ry"], vals["unroll_rci"])
    return sum(
        pads[b] * total[tile, b] * reduce[rx] * sizes[b, u]
        for (tile, b), rx, ry, u in unrolled
        if _unroll_problem(wl, knobs(tile=tile, oc_blocks=b, unroll_rx=rx, unroll_ry=ry,
                                     unroll_rci=u)) is None
    )  # fmt: skip


MAX_VISITED_POINTS = 200_000  # a space this small is counted point by point (valid_count)


def valid_count(task: Task) -> int:
    """The points of a CPU conv task's space that its ``problem`` accepts: the direct
    template's counted by :func:`direct_valid_count`, a space of at most
    ``MAX_VISITED_POINTS`` point by point; ``ValueError`` for a bigger one of another kind."""
    if task.name == CONV2D_NCHWC.name:
        return direct_valid_count(task)
    sp = task.space
    if sp.size > MAX_VISITED_POINTS:
        raise ValueError(
            f"{task.key}: {sp.size} points, more than the {MAX_VISITED_POINTS} counted one by one"
        )
    return sum(sp.problem(sp.get(i)) is None for i in range(sp.size))


def _nchwc_instantiate(config, *args):
    return graph_conv(nchwc_workload(*args), "direct", config)


def _winograd_space(*args) -> ConfigSpace:
    """The Winograd template's register tiles (``p_block`` tiles x ``k_block`` channels; the
    space's first knob, as before the others came), then its batched GEMM's loop order, cache
    blocks, reduction unrolling, parallel loops and output tile (``WinogradKnobs``), each with
    the default that builds the loops of before."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.winograd import OUT_TILES, WinogradKnobs

    wl = nchwc_workload(*args)
    target = CpuTarget.host()
    lanes, regs = target.vector_lanes("float32"), target.vector_registers
    kbs = winograd_k_blocks(wl)

    def pairs_for(out_tile: int) -> list:
        # any p_block (the template rounds the tiles up to whole register tiles) wasting at
        # most an eighth of the tiles of ``out_tile``
        tiles = (-(-wl.h // out_tile)) * (-(-wl.w // out_tile))
        ps = [p for p in range(1, 17) if -tiles % p <= tiles // 8]
        return [(p, k) for k in kbs for p in ps if p * k // lanes <= regs - 2]

    before = pairs_for(2)  # the tiles before the output tile was a knob, in their order
    pairs = before + [t for m in sorted(OUT_TILES) for t in pairs_for(m) if t not in before]
    auto = WinogradKnobs().columns_outer(wl.c, wl.o)
    return ConfigSpace(
        [
            # the space's knob before the others
            TileKnob("tile", ("p_block", "k_block"), list(dict.fromkeys(pairs)), before=before),
            ChoiceKnob("gemm_order", ["auto", "tiles" if auto else "columns"], default="auto"),
            ChoiceKnob("tile_p", TILE_X, default=1),
            ChoiceKnob("tile_k", TILE_X, default=1),
            ChoiceKnob("unroll_rc", [u for u in divisors(wl.c) if u <= 8], default=1),
            ChoiceKnob("parallel_loops", (0,) + PARALLEL_LOOPS, default=1),
            ChoiceKnob("out_tile", sorted(OUT_TILES), default=2),
        ],
        functools.partial(_winograd_problem, args),
    )


def winograd_k_blocks(wl) -> list[int]:
    """Output channels per Winograd register tile of the space for ``wl``: whole vectors up to
    64 that divide the output channels, else the compiler's untuned choice
    (``kernels.winograd_k_block``: half a vector, 24 or 56 channels on AVX-512), else none (no
    Winograd task: ``nchwc_conv_tasks``)."""
    from pyvta.compiler.targets.cpu.kernels import host_lanes, winograd_k_block

    lanes = host_lanes()
    kbs = [k for k in range(lanes, 65, lanes) if wl.o % k == 0]
    fallback = winograd_k_block(wl.o, lanes)
    return kbs or ([] if fallback is None else [fallback])


def _winograd_problem(args: tuple, config) -> str | None:
    """Why a point of the Winograd template's space for ``args`` does not build
    (``WinogradKnobs.gemm_problem``, without lowering), or None."""
    from pyvta.compiler.ops.cpu.winograd import WinogradKnobs

    wl = nchwc_workload(*args)
    k = WinogradKnobs(**schedule_of_template("winograd", config)["knobs"])
    tiles = (-(-wl.h // k.out_tile)) * (-(-wl.w // k.out_tile))
    if wl.o % k.k_block:
        return f"k_block {k.k_block} must divide the {wl.o} channels"
    return k.gemm_problem(wl.c, wl.o, -(-tiles // k.p_block) * k.p_block)


def _winograd_instantiate(config, *args):
    wl = nchwc_workload(*args)
    if not wl.winograd_ok:
        raise InvalidConfig(f"winograd does not apply to {wl.key}")
    return graph_conv(wl, "winograd", config)


GEMM = Template(
    "cpu.gemm",
    _gemm_space,
    _gemm_instantiate,
    lower_fn=_gemm_lower,
    reference_fn=_gemm_reference,
    **ON_CPU,
)
CONV2D = Template(
    "cpu.conv2d",
    _conv2d_space,
    _conv2d_instantiate,
    lower_fn=_conv2d_lower,
    reference_fn=_conv2d_reference,
    **ON_CPU,
)
CONV2D_NCHWC = Template(
    "cpu.conv2d_nchwc",
    _nchwc_space,
    _nchwc_instantiate,
    reference_fn=nchwc_reference,
    inputs_fn=nchwc_inputs,
    **ON_CPU,
)
WINOGRAD_NCHWC = Template("cpu.winograd_nchwc", _winograd_space, _winograd_instantiate, **ON_CPU)
TEMPLATES = {
    t.name: t
    for t in (GEMM, CONV2D, CONV2D_NCHWC, WINOGRAD_NCHWC, POINTWISE_NCHWC, DEPTHWISE_NCHWC)
}
# template name -> the compiler's schedule template (its tile knob's parts: ``TILE_PARTS``)
_SCHEDULE_TEMPLATES = {
    CONV2D_NCHWC.name: "direct",
    WINOGRAD_NCHWC.name: "winograd",
    POINTWISE_NCHWC.name: "pointwise",
    DEPTHWISE_NCHWC.name: "depthwise",
}


def nchwc_conv_tasks(wl) -> list[Task]:
    """The tasks of a network's conv layer (``compiler.targets.cpu.kernels.ConvWorkload``,
    bias only): the depthwise template for a depthwise layer; else direct NCHWc, the
    depthwise template for groups narrower than the block (``ConvWorkload.group_width``),
    Winograd where it applies (3x3 stride 1, a channel tile: ``winograd_k_blocks``) and
    pointwise where it does (1x1 stride 1, no padding)."""
    if wl.depthwise:
        return [DEPTHWISE_NCHWC.task(*depthwise_task_args(wl))]
    args = nchwc_task_args(wl)
    tasks = [CONV2D_NCHWC.task(*args)]
    if wl.group_width is not None:
        tasks.append(DEPTHWISE_NCHWC.task(*depthwise_task_args(wl)))
    if wl.winograd_ok and winograd_k_blocks(wl):
        tasks.append(WINOGRAD_NCHWC.task(*args))
    if wl.pointwise_ok:
        tasks.append(POINTWISE_NCHWC.task(*args))
    return tasks


def point_of_schedule(task: Task, knobs: dict):
    """The point of a network conv layer's ``task`` whose schedule (``schedule_of``) has
    ``knobs`` (a compiler knob dict, e.g. ``kernels.default_conv_schedule``'s; ``oc_tile`` 0:
    the whole output block), knobs outside the space aside (``parallel``); ``ValueError`` if
    the space has no such point."""
    parts = TILE_PARTS[_SCHEDULE_TEMPLATES[task.name]]
    d = dict(knobs)
    if "oc_tile" in parts and not d.get("oc_tile"):
        d["oc_tile"] = nchwc_workload(*task.args).ob
    names = {k.name for k in task.space.knobs}
    point = {k: v for k, v in d.items() if k in names}
    point["tile"] = tuple(d[p] for p in parts)
    return task.space.config(point)


def schedule_of(task: Task, config) -> dict:
    """The ``attrs["schedule"]`` record of ``config`` of a network conv layer's task."""
    return schedule_of_template(_SCHEDULE_TEMPLATES[task.name], config)


def gemm_task(m: int, n: int, k: int) -> Task:
    return GEMM.task(m, n, k)


def conv2d_task(c, h, w, o, kernel, stride=1, padding=0) -> Task:
    return CONV2D.task(c, h, w, o, kernel, stride, padding)
