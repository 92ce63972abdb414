"""What the CPU's NCHWc conv templates share (``tuner.cpu``'s direct and Winograd ones,
``tuner.cpu_pointwise``, ``tuner.cpu_depthwise``): the workload a task's arguments stand for,
the compiler's register tiles, the ``attrs["schedule"]`` record of a point of a tile-knob space
and its build through the graph compiler, and the float64 reference of an NCHWc conv.
"""

from __future__ import annotations

import functools

import numpy as np

from pyvta.tuner.space import Config, TileKnob
from pyvta.tuner.task import InvalidConfig

MIN_TILE_SHARE = 0.6  # of the accumulator registers a pointwise / depthwise tile fills, at least

# the compiler's schedule template -> the knobs the tile knob of its space stands for
TILE_PARTS = {
    "direct": ("ow_block", "oc_tile"),
    "winograd": ("p_block", "k_block"),
    "pointwise": ("p_block", "oc_tile"),
    "depthwise": ("ow_block", "y_block"),
}


@functools.cache  # pure, and a model's search checks points of one workload by the thousand
def nchwc_workload(*args):
    """The ``compiler.targets.cpu.kernels.ConvWorkload`` of an NCHWc conv task's arguments
    (:func:`nchwc_task_args`): ``(c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, ib, ob)``, then
    for a dilated conv ``(dh, dw)``, for a grouped one ``(dh, dw, group, group_in,
    group_out)``."""
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload

    if len(args) not in (14, 16, 19):
        raise ValueError(f"an NCHWc conv task has 14, 16 or 19 arguments, not {len(args)}")
    c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, ib, ob = args[:14]
    dilations = tuple(args[14:16]) if len(args) > 14 else (1, 1)
    groups = GroupSpan(*args[16:]) if len(args) == 19 else None
    return ConvWorkload(
        c, h, w, o, (kh, kw), (sh, sw), (pt, pl, pb, pr), ib, ob,
        dilations=dilations, groups=groups,
    )  # fmt: skip


def nchwc_task_args(wl) -> tuple:
    """The task arguments of the conv ``wl`` (``ConvWorkload``): its shape and blocks, and
    where it has them its dilations and groups (:func:`nchwc_workload` reads them back), so a
    grouped or dilated layer is tuned as itself and an ordinary one keeps the task (and the
    logged records) it always had. ``nchw_input`` is not among them: knobs tuned on the blocked
    input serve the NCHW one the same."""
    args = (wl.c, wl.h, wl.w, wl.o, *wl.kernel, *wl.strides, *wl.pads, wl.ib, wl.ob)
    g = wl.groups
    if g is not None:
        return args + (*wl.dilations, g.group, g.group_in, g.group_out)
    return args + wl.dilations if wl.dilations != (1, 1) else args


def conv_tiles(out_width: int, out_block: int, oc_blocks: int = 1) -> list[tuple[int, int]]:
    """``(ow_block, oc_tile)`` register tiles of an NCHWc conv on the host, each spanning
    ``oc_blocks`` output blocks: the compiler's (``compiler.ops.cpu.nchwc_direct.register_tiles``),
    so the default tile is one of them."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc_direct import register_tiles

    return register_tiles(CpuTarget.host(), out_width, out_block, oc_blocks)


def with_tile(knob: TileKnob, tile: tuple) -> TileKnob:
    """``knob`` with ``tile`` (the compiler's untuned choice) added (:func:`with_tiles`): a
    search can start from the untuned schedule."""
    return with_tiles(knob, [tile])


def with_tiles(knob: TileKnob, tiles) -> TileKnob:
    """``knob`` with those of ``tiles`` it lacks added last, ``knob`` itself their ``before``
    (its own older tiles still one step further back), so records logged before read as the
    same points (``ConfigSpace.legacy``); ``knob`` if it has them all."""
    new = [t for t in dict.fromkeys(tuple(t) for t in tiles) if t not in knob.values]
    if not new:
        return knob
    return TileKnob(knob.name, knob.parts, [*knob.values, *new], before=knob)


def schedule_of_template(template: str, config) -> dict:
    """The ``attrs["schedule"]`` record of a point of a tile-knob space of ``template``
    (the compiler's name: direct, winograd, pointwise, depthwise)."""
    parts = TILE_PARTS[template]
    d = config.as_dict() if isinstance(config, Config) else dict(config)
    d.update(zip(parts, d.pop("tile"), strict=True))
    return {"template": template, "knobs": d}


def graph_conv(wl, template: str, config):
    """The graph compiler's conv schedule of ``template`` for ``wl`` with ``config``; a config
    the template refuses is an ``InvalidConfig``."""
    from pyvta.compiler.targets.cpu.kernels import conv_schedule

    try:
        return conv_schedule(wl, schedule_of_template(template, config))
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def nchwc_inputs(arrays, *args):
    """The measured arrays of an NCHWc conv task (``Template.inputs_fn``): a grouped conv's
    packed weights zero past the input blocks each output block reads (``GroupSpan.reads``),
    as ``GroupSpan.pack`` leaves them, so a schedule that skips those blocks and one that does
    not (``oc_blocks`` above 1) compute the same."""
    wl = nchwc_workload(*args)
    if wl.groups is None or arrays[1].ndim == 5:  # the exact form reads no zeros
        return arrays
    wgt = arrays[1].copy()
    span = wgt.shape[1]
    for f in range(wgt.shape[0]):
        wgt[f, len(wl.groups.reads(f, wl.ib, wl.ob, wl.c // wl.ib, span)) :] = 0.0
    return [arrays[0], wgt, *arrays[2:]]


def nchwc_reference(arrays, *args):
    """float64 conv of NCHW{ib}c data with OIHW{ib}i{ob}o weights plus bias, NCHW{ob}c out
    in the shape of ``arrays[-1]`` (a flat config's ``[1, O/ob, OH * OW, ob]``); dilated taps,
    and for a grouped conv each output block over the input blocks it reads
    (``GroupSpan.reads``) with its packed weights."""
    from numpy.lib.stride_tricks import sliding_window_view

    from pyvta.compiler.ops.cpu.nchwc import pack_conv_weights

    wl = nchwc_workload(*args)
    data, wgt, bias = (a.astype(np.float64) for a in arrays[:3])
    x = data[0].transpose(0, 3, 1, 2).reshape(wl.c, wl.h, wl.w)
    if wgt.ndim == 5:  # a grouped conv's exact form (``GroupSpan.pack_exact``)
        wgt = pack_conv_weights(wl.groups.unpack_exact(wgt, wl.c), wl.ib, wl.ob)
    o_blocks, span, kh, kw, ib, ob = wgt.shape
    if wl.groups is not None and span != wl.c // ib:  # block-diagonal weights they stand for
        full = np.zeros((o_blocks, wl.c // ib) + wgt.shape[2:])
        for f in range(o_blocks):
            read = wl.groups.reads(f, ib, ob, wl.c // ib, span)
            full[f, read] = wgt[f, : len(read)]
        wgt = full
    oihw = wgt.transpose(0, 5, 1, 4, 2, 3).reshape(wl.o, wl.c, kh, kw)
    t, lft, b, r = wl.pads
    x = np.pad(x, ((0, 0), (t, b), (lft, r)))
    (sh, sw), (dh, dw) = wl.strides, wl.dilations
    reach = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    win = sliding_window_view(x, reach, axis=(1, 2))[:, ::sh, ::sw, ::dh, ::dw]
    y = np.tensordot(oihw, win, axes=([1, 2, 3], [0, 3, 4])) + bias[:, None, None]
    oh, ow = wl.out_hw
    want = y[:, :oh, :ow].reshape(wl.o // ob, ob, oh, ow).transpose(0, 2, 3, 1)[None]
    return want.reshape(arrays[-1].shape)  # a flat config's out: [1, O/ob, OH * OW, ob]
