"""The pointwise NCHWc conv template (1x1, stride 1, no padding: a GEMM over the flattened
pixels, ``compiler.ops.cpu.pointwise``) as a tuning task: its space, build and reference."""

from __future__ import annotations

import functools

from pyvta.tuner.cpu_measure import ON_CPU
from pyvta.tuner.cpu_nchwc import (
    MIN_TILE_SHARE,
    conv_tiles,
    graph_conv,
    nchwc_reference,
    nchwc_workload,
    schedule_of_template,
    with_tile,
    with_tiles,
)
from pyvta.tuner.space import ChoiceKnob, ConfigSpace, TileKnob, divisors
from pyvta.tuner.task import Template

OC_BLOCKS = (2, 3, 4, 5)  # output blocks a register tile may span, besides 1
BLOCK_TILE_PIXELS = range(4, 16)  # pixels of the tiles added for several blocks per tile
# pixels of the tiles added last, for several blocks of several vectors each (AVX2's blocks of
# 16 channels: 4 pixels x 2 blocks spill). MobileNet 224, Zen 1 (AVX2), 2 threads, in the
# network: every pointwise layer at 2 pixels x 2 blocks ran it 1.02x its untuned 5-6 x 1 block
# (10 and 30 interleaved rounds, paired)
FEW_PIXELS = range(1, 4)


def _pointwise_space(*args) -> ConfigSpace:
    """``(p_block, oc_tile)`` tiles: the NCHWc conv's register tiles over the flattened pixels
    (``compiler.ops.cpu.nchwc_direct.register_tiles`` of a row ``H x W`` long) that hold at least
    ``MIN_TILE_SHARE`` of the registers a tile may use as accumulators (fewer cannot hide the
    FMA latency: 1 x 8 ran 5-8x slower than 6 x 16 on AVX2), then the narrower ones
    ``BLOCK_TILE_PIXELS`` allows for tiles spanning several output blocks (``oc_blocks``: 1, or
    those of ``OC_BLOCKS`` dividing the layer's output blocks; default 1), then, where a block
    is several vectors, the fewer pixels of ``FEW_PIXELS`` (each tier's knob the next one's
    ``before``, so records of every older space read as the same points). A point's tile of
    ``oc_blocks`` blocks must fit the registers (not spill); a one-block tile of those added
    for blocks is refused (below the share, as before)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc import SPARE_REGISTERS
    from pyvta.compiler.ops.cpu.pointwise import K_BLOCKS, TILE_ORDERS
    from pyvta.compiler.targets.cpu.kernels import default_pointwise_knobs

    wl = nchwc_workload(*args)
    t = CpuTarget.host()
    lanes, room = t.vector_lanes("float32"), t.vector_registers - SPARE_REGISTERS
    tiles = conv_tiles(wl.h * wl.w, wl.ob)
    big = [(p, k) for p, k in tiles if p * max(1, k // lanes) >= MIN_TILE_SHARE * room] or tiles
    untuned = default_pointwise_knobs(wl)
    tile = with_tile(TileKnob("tile", ("p_block", "oc_tile"), big), (untuned.p_block, wl.ob))
    # each tier after the tiles of before: records of the older knobs still read
    tile = with_tiles(tile, [(p, k) for p, k in tiles if p in BLOCK_TILE_PIXELS and k == wl.ob])
    if wl.ob > lanes:  # a block of several vectors
        tile = with_tiles(tile, [(p, k) for p, k in tiles if p in FEW_PIXELS and k == wl.ob])
    out_blocks = wl.o // wl.ob
    c_blocks = wl.c // wl.ib
    passes = [K_BLOCKS, 0] if c_blocks > K_BLOCKS else [K_BLOCKS]  # K_BLOCKS >= all: one pass
    passes += [d for d in divisors(c_blocks) if d < c_blocks and d != K_BLOCKS]
    return ConfigSpace(
        [
            # the knob before the others; the compiler's untuned tile last, if not there
            tile,
            ChoiceKnob("k_blocks", passes, default=K_BLOCKS),
            ChoiceKnob("tile_order", TILE_ORDERS, default=TILE_ORDERS[0]),
            ChoiceKnob("unroll_rci", divisors(wl.ib), default=1),
            ChoiceKnob("parallel_loops", (1, 2), default=1),
            ChoiceKnob("oc_blocks", [1] + [b for b in OC_BLOCKS if out_blocks % b == 0], default=1),
        ],
        functools.partial(_pointwise_problem, args),
    )


def _pointwise_problem(args: tuple, config) -> str | None:
    """Why a point of the pointwise template's space for ``args`` does not build, or builds
    the loops of another point (a ``k_blocks`` that runs one pass where ``K_BLOCKS``, the
    default, does too), or None."""
    from dataclasses import replace

    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc import SPARE_REGISTERS
    from pyvta.compiler.ops.cpu.pointwise import K_BLOCKS, PointwiseKnobs, in_passes, loop_problem
    from pyvta.compiler.targets.cpu.kernels import default_pointwise_knobs

    wl = nchwc_workload(*args)
    k = PointwiseKnobs(**schedule_of_template("pointwise", config)["knobs"])
    t = CpuTarget.host()
    room = t.vector_registers - SPARE_REGISTERS
    accs = k.p_block * k.oc_blocks * max(1, (k.oc_tile or wl.ob) // t.vector_lanes("float32"))
    if accs > room:
        return (
            f"{accs} accumulators ({k.p_block} pixels x {k.oc_blocks} blocks) spill: at most"
            f" {room} vector registers"
        )
    untuned = default_pointwise_knobs(wl).p_block
    if k.oc_blocks == 1 and accs < MIN_TILE_SHARE * room and k.p_block != untuned:
        return f"{accs} accumulators fill under {MIN_TILE_SHARE:.0%} of the {room} registers"
    if (
        k.k_blocks != K_BLOCKS
        and not in_passes(k, wl)
        and not in_passes(replace(k, k_blocks=K_BLOCKS), wl)
    ):
        return f"k_blocks {k.k_blocks} runs one pass, as the default {K_BLOCKS} does here"
    return loop_problem(k, wl)


def _pointwise_instantiate(config, *args):
    return graph_conv(nchwc_workload(*args), "pointwise", config)


def _pointwise_reference(arrays, *args):
    """``tuner.cpu_nchwc.nchwc_reference`` of the pixel-flattened arrays (its result in
    ``out``'s shape)."""
    wl = nchwc_workload(*args)
    data, wgt, bias = arrays[:3]
    ob = wgt.shape[-1]
    return nchwc_reference(
        [data.reshape(1, wl.c // wl.ib, wl.h, wl.w, wl.ib),
         wgt.reshape(wl.o // ob, wl.c // wl.ib, 1, 1, wl.ib, ob), bias, arrays[-1]],
        *args,
    )  # fmt: skip


POINTWISE_NCHWC = Template(
    "cpu.pointwise_nchwc",
    _pointwise_space,
    _pointwise_instantiate,
    reference_fn=_pointwise_reference,
    **ON_CPU,
)
