"""The depthwise NCHWc conv template (group = channels, or groups narrower than the channel
block: ``compiler.ops.cpu.depthwise``) as a tuning task: its space, build and reference.
Arguments (:func:`depthwise_task_args`): ``(c, h, w, kh, kw, sh, sw, pt, pl, pb, pr, block)``,
then ``(dh, dw)`` for a dilated conv, and ``(dh, dw, g)`` for groups of ``g`` channels."""

from __future__ import annotations

import numpy as np

from pyvta.tuner.cpu_measure import ON_CPU
from pyvta.tuner.cpu_nchwc import MIN_TILE_SHARE, graph_conv, with_tile
from pyvta.tuner.space import ConfigSpace, TileKnob
from pyvta.tuner.task import Template


def _depthwise_workload(*args):
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload

    if len(args) not in (12, 14, 15):
        raise ValueError(f"a depthwise task has 12, 14 or 15 arguments, not {len(args)}")
    c, h, w, kh, kw, sh, sw, pt, pl, pb, pr, block = args[:12]
    dilations = tuple(args[12:14]) if len(args) >= 14 else (1, 1)
    g = args[14] if len(args) == 15 else 1
    groups = GroupSpan(c // g, g, g) if g > 1 else None
    return ConvWorkload(
        c, h, w, c, (kh, kw), (sh, sw), (pt, pl, pb, pr), block, block, g == 1,
        dilations=dilations, groups=groups,
    )  # fmt: skip


def depthwise_task_args(wl) -> tuple:
    """The task arguments of the depthwise conv ``wl`` (or of narrow groups: its
    ``group_width``), its dilations where it has them (a dilated layer is tuned as itself; an
    undilated depthwise one keeps the task it always had)."""
    args = (wl.c, wl.h, wl.w, *wl.kernel, *wl.strides, *wl.pads, wl.ob)
    if wl.group_width > 1:
        return args + wl.dilations + (wl.group_width,)
    return args + wl.dilations if wl.dilations != (1, 1) else args


def _depthwise_space(*args) -> ConfigSpace:
    """``(ow_block, y_block)``: column tiles whose accumulators fit the vector registers (less
    the depthwise template's spare ones) and fill at least ``MIN_TILE_SHARE`` of them (or the
    whole row) x rows per task (1, 2, 4, 7, 8, 14, up to the height); the compiler's untuned
    tile last if not among them."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.depthwise import spare_registers
    from pyvta.compiler.targets.cpu.kernels import default_depthwise_knobs

    wl = _depthwise_workload(*args)
    t = CpuTarget.host()
    vecs = max(1, wl.ob // t.vector_lanes("float32"))
    room = max(1, (t.vector_registers - spare_registers(vecs, wl.group_width)) // vecs)
    oh, ow = wl.out_hw
    # groups: their best tiles are narrow (``depthwise.GROUP_TILE_VECTORS``)
    lo = min(ow, max(1, int(MIN_TILE_SHARE * room))) if wl.group_width == 1 else 1
    cols = range(lo, min(room, ow) + 1)
    tiles = [(d, y) for d in cols for y in (1, 2, 4, 7, 8, 14) if y <= oh]
    untuned = default_depthwise_knobs(wl)
    knob = TileKnob("tile", ("ow_block", "y_block"), tiles)
    return ConfigSpace([with_tile(knob, (untuned["ow_block"], untuned["y_block"]))])


def _depthwise_instantiate(config, *args):
    return graph_conv(_depthwise_workload(*args), "depthwise", config)


def _depthwise_reference(arrays, *args):
    """float64 depthwise conv of NCHW{c}c data with ``[C/c, KH, KW, c]`` weights (groups:
    ``[C/c, KH, KW, g, c]``, lane ``k`` reading lane ``(k // g) * g + j`` of its block) plus
    bias (dilated taps)."""
    from numpy.lib.stride_tricks import sliding_window_view

    wl = _depthwise_workload(*args)
    data, wgt, bias = (a.astype(np.float64) for a in arrays[:3])
    t, lft, b, r = wl.pads
    x = np.pad(data[0], ((0, 0), (t, b), (lft, r), (0, 0)))
    (kh, kw), (sh, sw), (dh, dw) = wl.kernel, wl.strides, wl.dilations
    reach = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    win = sliding_window_view(x, reach, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw]
    oh, ow = wl.out_hw
    if wgt.ndim == 4:
        y = np.einsum("fyxcij,fijc->fyxc", win[:, :oh, :ow], wgt)
    else:  # each block's weights as the dense [c, c] block they are
        g, block = wgt.shape[3:]
        dense = np.zeros(wgt.shape[:3] + (block, block))
        k = np.arange(block)
        for j in range(g):
            dense[..., (k // g) * g + j, k] = wgt[..., j, :]
        y = np.einsum("fyxcij,fijck->fyxk", win[:, :oh, :ow], dense)
    return (y + bias.reshape(y.shape[0], 1, 1, -1))[None]


DEPTHWISE_NCHWC = Template(
    "cpu.depthwise_nchwc",
    _depthwise_space,
    _depthwise_instantiate,
    reference_fn=_depthwise_reference,
    **ON_CPU,
)
