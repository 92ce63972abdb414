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
``MAX_PARTIAL_SUM_BYTES``, or whose input blocks ``k_blocks`` does not divide, take all
channels in one pass. A pass's register tile is a stage of its own (``part``: its sums start at
zero, in registers) added into the partial sums after the pass: accumulated in the partial sums
themselves, LLVM kept them in registers only up to about 16 vectors (3 blocks x 7 pixels stored
every FMA: 0.36-0.42x one pass, Zen 5) and not across a last, shorter pass (480 -> 480 at 7 x 7:
0.38x).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from pyvta.compiler.ir.expr import const
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import minimum
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
# output blocks of one vector an untuned tile spans (AVX-512: 32 registers), the first of these
# that divides the layer's blocks and leaves two tiles or more. Zen 5, 2 threads, kernels alone:
# 96 -> 96 at 28 x 28 and 56 x 56 (6 blocks) 3 x 8 pixels ran 1.26x and 1.41x 2 x 8, 192, 384
# and 768 channels 0.98-1.01x; RegNetX's odd counts, where 2 does not divide (before: one
# block, 7-8 pixels): 528 -> 528 at 7 x 7 (33 blocks) 1.15x, 240 -> 240 at 14 x 14 and 28 x 28
# 1.01x and 1.05x. Layers of 3 blocks stay at one (all 3 a tile: one tile, one thread, 0.78x).
# 5 where neither divides (RegNetX-4.0GF's 35 and 85 blocks): a tile of 5 blocks x 4 pixels
# (its 5 weight vectors beside the 20 accumulators), pixels outside (PIXEL_ORDER_FROM_BLOCKS),
# against one block of 8 pixels: 560 -> 560 at 14 x 14 1.17x, 1360 -> 1360 at 7 x 7 1.19x, 560
# -> 1360 at 14 x 14 1.12x (channels outside: 1.02x, 1.10x, 1.08x; 5 pixels: 0.97x, 1.22x, 0.98x)
TILE_BLOCKS = (3, 2, 5)
PIXEL_ORDER_FROM_BLOCKS = 5  # tiles of this many blocks or more run their pixels outside
# An untuned layer of fewer than PIXEL_TASKS_BELOW_TILES tiles of output blocks that do not
# spread evenly over SPREAD_THREADS threads (the hosts measured have 2) runs its pixel tiles
# outside its channel tiles and across threads with its blocks (``tile_order`` "pixels",
# ``parallel_loops`` 2; one pass). Zen 5, 2 threads, kernels alone (two runs): 32 -> 16 at
# 112 x 112 (one tile: one thread before) 1.59x and 1.76x, 48 -> 48 at 56 x 56 (3 tiles) 1.13x
# and 1.21x (masked to AVX2: 1.46x, 1.23x); layers of 2 tiles ran 0.95-0.99x so, and keep their
# blocks across threads. Odd counts up to 9 (60 rounds, medians): 5 tiles (240 -> 240 at 14 x
# 14, 96 -> 240 at 28, 160 at 14 and 28, 80 at 28, 48 -> 80 at 56) 1.10-1.17x, 7 (112 at 14)
# 1.06x; masked to AVX2 (blocks of 8, one a tile) 5 and 7 tiles 1.07x, 9 1.01x, 11 0.96x and
# 15 1.00x (with 32 registers 11, 13 and 21 tiles 1.02-1.04x)
PIXEL_TASKS_BELOW_TILES = 10
SPREAD_THREADS = 2


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
    def for_target(
        target, pixels: int, out_block: int, out_blocks: int = 1, in_blocks: int | None = None
    ) -> PointwiseKnobs:
        """The whole output block per tile (one broadcast feeds the most FMAs) and, of the
        pixel counts that leave ``SPARE_REGISTERS`` of the vector registers free (AVX2: up to
        6 x 16), the one computing the layer in the least time when a tile costs as much as
        ``TILE_COST_PIXELS`` more pixels: 49 pixels (7 x 7) as 9 tiles of 5 and one of 4, not
        8 of 6 and one of 1 (a one-pixel tile cannot hide the FMA latency; 1024 -> 1024
        channels at 7 x 7 ran ~6% faster on AVX2, one thread); 196 stay tiles of 6. A block of
        one vector takes at most ``MAX_SINGLE_VECTOR_PIXELS`` pixels per tile. Layers whose
        tiles do not divide the pixels take all input channels in one pass (``k_blocks`` 0):
        the passes' partial sums with a last, narrower tile ran 2.4x slower (160 -> 64
        channels at 14 x 14, tiles of 8, Zen 4, 2 threads: 0.086 ms; one pass 0.035 ms);
        given the layer's ``in_blocks``, ``K_BLOCKS`` stands where it runs one pass anyway
        (the tuning space's point for one pass). A block of one vector (of ``out_blocks`` in
        the layer) spans the first of ``TILE_BLOCKS`` blocks per tile that divides
        ``out_blocks`` and leaves two tiles or more, with ``WIDE_REGISTER_FILE`` registers
        (``compiler.ops.cpu.nchwc``), its pixels as many as leave room for the blocks' weight
        vectors too. A layer of few tiles of output blocks (``PIXEL_TASKS_BELOW_TILES``), or
        of tiles of ``PIXEL_ORDER_FROM_BLOCKS`` blocks or more, runs its pixels outside and
        across threads too."""
        from pyvta.compiler.ops.cpu.nchwc import SPARE_REGISTERS, WIDE_REGISTER_FILE

        lanes = target.vector_lanes("float32")
        vecs = max(1, out_block // lanes)
        free = target.vector_registers - SPARE_REGISTERS
        blocks = 1
        if target.vector_registers >= WIDE_REGISTER_FILE and out_block == lanes:
            blocks = next((b for b in TILE_BLOCKS if out_blocks % b == 0 and out_blocks > b), 1)
        # SPARE_REGISTERS hold one block's weight vectors; a tile of several keeps one more each
        room = max(1, (free - (blocks - 1)) // (vecs * blocks))
        if vecs == 1:
            room = min(room, MAX_SINGLE_VECTOR_PIXELS)
        best = min(
            range(min(room, pixels), 0, -1),
            key=lambda p: -(-pixels // p) * (p + TILE_COST_PIXELS),
        )
        knobs = PointwiseKnobs(best, 0, k_blocks=K_BLOCKS, oc_blocks=blocks)
        tiles = out_blocks // blocks
        few = tiles < PIXEL_TASKS_BELOW_TILES and tiles % SPREAD_THREADS
        if few or blocks >= PIXEL_ORDER_FROM_BLOCKS:
            knobs = replace(knobs, tile_order="pixels", parallel_loops=2)  # one pass only
        one_pass = pixels % best or knobs.tile_order == "pixels"
        if one_pass and (in_blocks is None or _in_passes(knobs, in_blocks, pixels, out_block)):
            return replace(knobs, k_blocks=0)  # a last, narrower tile, or pixels outside
        return knobs  # K_BLOCKS also where it runs one pass (the space's point for it)


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
    c_blocks = c // ic
    passes = _in_passes(knobs, c_blocks, npix, oct_)
    why = _loop_problem(knobs, passes, ic) or _blocks_problem(knobs, o // oc, oct_ == oc)
    if why:
        raise ValueError(why)
    part = None
    if passes:  # each pass's register tile a stage of its own, added into the partial sums
        kb = knobs.k_blocks
        p_pad = -(-npix // pb) * pb  # whole tiles: the last one's extra pixels read the last
        rki, rci = reduce_axis(kb, "rki"), reduce_axis(ic, "rci")
        part = compute(
            (c_blocks // kb, 1, o // oc, p_pad, oc),
            lambda ko, n, f, p, fi: te_sum(
                data[n, ko * kb + rki, minimum(p, const(npix - 1)), rci]
                * wgt[f, ko * kb + rki, rci, fi],
                [rki, rci],
            ),
            name="part",
        )
        rko = reduce_axis(c_blocks // kb, "rko")
        conv = compute(
            (1, o // oc, npix, oc),
            lambda n, f, p, fi: te_sum(part[rko, n, f, p, fi], [rko]),
            name="conv",
        )
    else:
        rco, rci = reduce_axis(c_blocks, "rco"), reduce_axis(ic, "rci")
        conv = compute(
            (1, o // oc, npix, oc),
            lambda n, f, p, fi: te_sum(data[n, rco, p, rci] * wgt[f, rco, rci, fi], [rco, rci]),
            name="conv",
        )

    def out_fn(n, f, p, fi):
        r = res[n, f, p, fi] if res is not None else None
        return epilogue.apply(conv[n, f, p, fi], bias[f * oc + fi], r)

    out = compute(conv.shape, out_fn, name="out")
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
    outer = ["n"] if blocks else ["n", "f"]
    tile = s[part] if part is not None else s[conv]  # the stage of the register tile
    rci = ["rci"]
    if 1 < knobs.unroll_rci < ic:
        rci = [a.name for a in tile.split("rci", knobs.unroll_rci)]
    if part is not None:
        s[conv].compute_at(s[out], fo)  # the output block's partial sums, pass by pass
        cpo, cpi = s[conv].split("p", pb)
        s[conv].reorder(*outer, "rko", cpo, cpi, *f_conv, "fi")
        s[conv].unroll(cpi)
        s[conv].vectorize("fi")
        for f in f_conv:
            s[conv].unroll(f)
        tile.set_scope("local")
        tile.compute_at(s[conv], cpo)  # one pass's sums of a tile: registers, added after
        tile.reorder("ko", *outer, "rki", *rci, "p", *f_conv, "fi")
    else:
        s[conv].compute_at(s[out], tiles[-1])
        tile.reorder(*outer, "rco", *rci, "p", *f_conv, "fi")
    tile.unroll("p")
    for f in f_conv:
        tile.unroll(f)
    if knobs.unroll_rci > 1:
        tile.unroll(rci[-1])
    tile.vectorize("fi")
    if knobs.parallel:
        s[out].parallel(f_loop if knobs.parallel_loops == 1 else s[out].fuse(f_loop, tiles[0]))
    return s, args + [out]


def _in_passes(knobs: PointwiseKnobs, c_blocks: int, pixels: int, oc_tile: int) -> bool:
    """Whether the input channels run in passes of ``k_blocks`` blocks (dividing them; the
    partial sums of an output block within ``MAX_PARTIAL_SUM_BYTES``)."""
    partial_sum_bytes = -(-pixels // knobs.p_block) * knobs.p_block * oc_tile * 4
    partial_sum_bytes *= knobs.oc_blocks
    return (
        0 < knobs.k_blocks < c_blocks
        and c_blocks % knobs.k_blocks == 0
        and partial_sum_bytes <= MAX_PARTIAL_SUM_BYTES
    )


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
