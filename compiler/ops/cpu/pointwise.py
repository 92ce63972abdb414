"""Pointwise (1x1, stride 1, no padding) conv in the blocked NCHW{c}c layout, float32 batch 1,
fused epilogue: a GEMM over the flattened pixels.

A 1x1 conv reads and writes ``[1, C/c, H, W, c]`` tensors whose pixels of one channel block
are contiguous, so the kernel views them as ``[1, C/c, H*W, c]`` (the same bytes) and
register-tiles ``p_block`` consecutive pixels x ``oc_tile`` output channels, across row ends:
a 7x7 layer is 49 pixels (e.g. eight tiles of 6 and one of 1), not seven rows of 4 + 3
columns. For each input channel the tile broadcasts one value per pixel and FMAs it into
``oc_tile / lanes`` weight vectors. Weights: ``nchwc.pack_conv_weights`` (OIHW{ic}i{oc}o,
read as ``[O/oc, C/ic, ic, oc]``).

Wide layers accumulate in passes of ``k_blocks`` input channel blocks (as MLAS takes 128
input channels at a time): every pixel tile of an output block runs one pass before the next
starts, on the block's partial sums in a ``local`` buffer, so a pass's weights (8 KB for
128 x 16 channels) stay in L1 for all the tiles and a tile's inputs are 128 channels, not
all of them. In MobileNet (one thread, in the network, CPU time) this took the 256- to
1024-channel pointwise layers ~4% faster; layers whose partial sums would outgrow
``MAX_PARTIAL_SUM_BYTES`` take all channels in one pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum

TILE_COST_PIXELS = 2  # a register tile's fixed cost (weight loads, latency), in pixels' worth
K_BLOCKS = 8  # input channel blocks per accumulation pass (128 channels of 16)
MAX_PARTIAL_SUM_BYTES = 64 * 1024  # an output block's partial sums (on the stack), at most
# pixels per tile, at most, when the output block is one vector (AVX-512's 16 lanes, 16
# channels): in MobileNet's 512 -> 512 at 14 x 14 and 256 -> 256 at 28 x 28 on a Zen 4 (2
# threads, the layer alone) tiles of 7 or 8 pixels ran 0.50 ms, tiles of 12 to 28 (what the
# register file would hold) 1.0 to 3.3 ms
MAX_SINGLE_VECTOR_PIXELS = 8


TILE_ORDERS = ("channels", "pixels")  # which register-tile loop of a block runs outside


@dataclass(frozen=True)
class PointwiseKnobs:
    """``p_block`` pixels x ``oc_tile`` output channels (a multiple of the vector lanes
    dividing the output block; 0: the whole block) per register tile; ``parallel`` output
    channel blocks across threads; ``k_blocks`` input channel blocks per accumulation pass
    (0: all in one pass; see the module docstring).

    Defaults the loops of before: ``tile_order`` the loop over a block's channel tiles
    outside the one over its pixel tiles (``channels``: a channel tile's weights serve every
    pixel) or inside (``pixels``: a pixel tile's inputs serve every channel tile; one pass
    only); ``unroll_rci`` the input channel loop unrolled by this factor (a divisor of the
    input block; 1: not); ``parallel_loops`` the output blocks alone (1) or fused with the
    next loop (2) across threads.

    ``oc_blocks``: output channel blocks one register tile spans (1: one; above, whole blocks,
    ``oc_tile`` 0, dividing the layer's output blocks), each pixel's input value broadcast
    once for all of them: a block of one vector (AVX-512's 16 lanes) otherwise feeds one FMA
    per broadcast. In MobileNet's 512 -> 512 at 14 x 14 (Zen 5, AVX-512, one thread, CPU
    time) 8 pixels x 1 block ran 0.58 ms, the direct template's flat 7 x 2 blocks 0.42 ms."""

    p_block: int = 6
    oc_tile: int = 0
    parallel: bool = True
    k_blocks: int = K_BLOCKS
    tile_order: str = "channels"
    unroll_rci: int = 1
    parallel_loops: int = 1
    oc_blocks: int = 1

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def for_target(target, pixels: int, out_block: int, out_blocks: int = 1) -> PointwiseKnobs:
        """The whole output block per tile (one broadcast feeds the most FMAs) and, of the
        pixel counts that leave ``SPARE_REGISTERS`` of the vector registers free (AVX2: up to
        6 x 16), the one computing the layer in the least time when a tile costs as much as
        ``TILE_COST_PIXELS`` more pixels: 49 pixels (7 x 7) as 9 tiles of 5 and one of 4, not
        8 of 6 and one of 1 (a one-pixel tile cannot hide the FMA latency; 1024 -> 1024
        channels at 7 x 7 ran ~6% faster on AVX2, one thread); 196 stay tiles of 6. A block of
        one vector takes at most ``MAX_SINGLE_VECTOR_PIXELS`` pixels per tile. Layers whose
        tiles do not divide the pixels take all input channels in one pass (``k_blocks`` 0):
        the passes' partial sums with a last, narrower tile ran 2.4x slower (160 -> 64
        channels at 14 x 14, tiles of 8, Zen 4, 2 threads: 0.086 ms; one pass 0.035 ms).
        A block of one vector (of ``out_blocks`` in the layer) spans ``VECTOR_BLOCK_TILE_BLOCKS``
        blocks per tile where they divide ``out_blocks``, with ``WIDE_REGISTER_FILE`` registers
        (``compiler.ops.cpu.nchwc``)."""
        from pyvta.compiler.ops.cpu.nchwc import (
            SPARE_REGISTERS,
            VECTOR_BLOCK_TILE_BLOCKS,
            WIDE_REGISTER_FILE,
        )

        lanes = target.vector_lanes("float32")
        vecs = max(1, out_block // lanes)
        free = target.vector_registers - SPARE_REGISTERS
        blocks = 1
        wide = target.vector_registers >= WIDE_REGISTER_FILE
        if wide and out_block == lanes and out_blocks % VECTOR_BLOCK_TILE_BLOCKS == 0:
            blocks = VECTOR_BLOCK_TILE_BLOCKS
        room = max(1, free // (vecs * blocks))
        if vecs == 1:
            room = min(room, MAX_SINGLE_VECTOR_PIXELS)
        best = min(
            range(min(room, pixels), 0, -1),
            key=lambda p: -(-pixels // p) * (p + TILE_COST_PIXELS),
        )
        k_blocks = K_BLOCKS if pixels % best == 0 else 0
        return PointwiseKnobs(best, 0, k_blocks=k_blocks, oc_blocks=blocks)


def pointwise_nchwc(c, h, w, o, ic, oc, knobs=None, epilogue=None):
    """``(sch, [data, weight, bias, (residual,) out])``: data ``[1, C/ic, H*W, ic]``, weight
    ``[O/oc, C/ic, ic, oc]``, bias ``[O]``, residual and out ``[1, O/oc, H*W, oc]``."""
    from pyvta.compiler.ops.cpu.nchwc import Epilogue

    knobs = knobs or PointwiseKnobs()
    epilogue = epilogue or Epilogue()
    if c % ic or o % oc:
        raise ValueError(f"channels {c}/{o} must be multiples of the blocks ic={ic}/oc={oc}")
    npix = h * w
    pb, oct_ = knobs.p_block, knobs.oc_tile or oc
    if not 0 < pb <= npix or oc % oct_:
        raise ValueError(
            f"p_block {pb} must be in 1..{npix} (the pixels), oc_tile {oct_} divide the block {oc}"
        )
    data = placeholder((1, c // ic, npix, ic), "float32", "data")
    wgt = placeholder((o // oc, c // ic, ic, oc), "float32", "weight")
    bias = placeholder((o,), "float32", "bias")
    args = [data, wgt, bias]
    res = None
    if epilogue.residual:
        res = placeholder((1, o // oc, npix, oc), "float32", "residual")
        args.append(res)
    rco, rci = reduce_axis(c // ic, "rco"), reduce_axis(ic, "rci")
    conv = compute(
        (1, o // oc, npix, oc),
        lambda n, f, p, fi: te_sum(data[n, rco, p, rci] * wgt[f, rco, rci, fi], [rco, rci]),
        name="conv",
    )

    def out_fn(n, f, p, fi):
        r = res[n, f, p, fi] if res is not None else None
        return epilogue.apply(conv[n, f, p, fi], bias[f * oc + fi], r)

    out = compute(conv.shape, out_fn, name="out")
    kb = knobs.k_blocks
    passes = _in_passes(knobs, c // ic, npix, oct_)
    why = _loop_problem(knobs, passes, ic) or _blocks_problem(knobs, o // oc, oct_ == oc)
    if why:
        raise ValueError(why)
    s = create_schedule(out)
    s[conv].set_scope("local")
    f_loop, blocks = "f", []
    if knobs.oc_blocks > 1:  # the tile's blocks: inside its pixels, each broadcast feeds all
        f_loop, f_in = s[out].split("f", knobs.oc_blocks)
        blocks = [f_in]
    po, pi = s[out].split("p", pb)
    fo, fi = s[out].split("fi", oct_)
    tiles = [fo, po] if knobs.tile_order == "channels" else [po, fo]
    s[out].reorder("n", f_loop, *tiles, pi, *blocks, fi)  # channels: weights serve every pixel
    s[out].unroll(pi)
    for f_in in blocks:
        s[out].unroll(f_in)
    s[out].vectorize(fi)
    f_conv = ["f"] if blocks else []  # the conv's blocks loop, inside its pixels
    rci = ["rci"]
    if 1 < knobs.unroll_rci < ic:
        rci = [a.name for a in s[conv].split("rci", knobs.unroll_rci)]
    if passes:
        s[conv].compute_at(s[out], fo)  # the output block's partial sums, pass by pass
        cpo, cpi = s[conv].split("p", pb)
        ko, ki = s[conv].split("rco", kb)
        outer = ["n"] if blocks else ["n", "f"]
        s[conv].reorder(*outer, ko, cpo, ki, *rci, cpi, *f_conv, "fi")
        s[conv].unroll(cpi)
    else:
        s[conv].compute_at(s[out], tiles[-1])
        outer = ["n"] if blocks else ["n", "f"]
        s[conv].reorder(*outer, "rco", *rci, "p", *f_conv, "fi")
        s[conv].unroll("p")
    for f in f_conv:
        s[conv].unroll(f)
    if knobs.unroll_rci > 1:
        s[conv].unroll(rci[-1])
    s[conv].vectorize("fi")
    if knobs.parallel:
        s[out].parallel(f_loop if knobs.parallel_loops == 1 else s[out].fuse(f_loop, tiles[0]))
    return s, args + [out]


def _in_passes(knobs: PointwiseKnobs, c_blocks: int, pixels: int, oc_tile: int) -> bool:
    """Whether the input channels run in passes of ``k_blocks`` blocks (the partial sums of
    an output block within ``MAX_PARTIAL_SUM_BYTES``)."""
    partial_sum_bytes = -(-pixels // knobs.p_block) * knobs.p_block * oc_tile * 4
    partial_sum_bytes *= knobs.oc_blocks
    return 0 < knobs.k_blocks < c_blocks and partial_sum_bytes <= MAX_PARTIAL_SUM_BYTES


def in_passes(knobs: PointwiseKnobs, wl) -> bool:
    """Whether the 1x1 layer ``wl`` (a ``ConvWorkload``) runs its input channels in passes."""
    return _in_passes(knobs, wl.c // wl.ib, wl.h * wl.w, knobs.oc_tile or wl.ob)


def loop_problem(knobs: PointwiseKnobs, wl) -> str | None:
    """Why ``knobs`` do not fit the 1x1 layer ``wl`` (a ``ConvWorkload``: pixels, channel
    blocks; register tiles aside), found without building anything; or None."""
    whole = (knobs.oc_tile or wl.ob) == wl.ob
    return _loop_problem(knobs, in_passes(knobs, wl), wl.ib) or _blocks_problem(
        knobs, wl.o // wl.ob, whole
    )


def _blocks_problem(knobs: PointwiseKnobs, out_blocks: int, whole_block: bool) -> str | None:
    """Why ``knobs.oc_blocks`` does not fit ``out_blocks`` output blocks (``whole_block``: the
    tile takes each block whole), or None."""
    b = knobs.oc_blocks
    if b < 1 or out_blocks % b:
        return f"oc_blocks {b} must divide the {out_blocks} output blocks"
    if b > 1 and not whole_block:
        return f"oc_blocks {b} needs whole blocks per tile (oc_tile 0)"
    return None


def _loop_problem(knobs: PointwiseKnobs, passes: bool, ic: int) -> str | None:
    """Why ``knobs``' loop order, unrolling or threads do not fit (``passes``: the input
    channels run in passes), or None."""
    if knobs.tile_order not in TILE_ORDERS:
        return f"tile_order {knobs.tile_order!r} (allowed: {', '.join(TILE_ORDERS)})"
    if passes and knobs.tile_order != "channels":
        return "tile_order 'pixels' runs the input channels in one pass (k_blocks 0)"
    if knobs.unroll_rci < 1 or ic % knobs.unroll_rci:
        return f"unroll_rci {knobs.unroll_rci} must divide the input block {ic}"
    if knobs.parallel_loops not in (1, 2):
        return f"parallel_loops {knobs.parallel_loops} must be 1 or 2"
    return None
