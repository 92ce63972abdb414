"""The direct NCHWc convolution template (float32): ``conv2d_nchwc`` and its schedule knobs.

Register-tiled like ``conv2d_nchw_blocked``: ``ow_block`` columns x ``oc_tile`` channels of one
output block per tile, the input value broadcast and FMA'd into ``oc_tile / lanes`` vector
accumulators per column, inside cache tiles whose sizes and orders are knobs
(:class:`NchwcConvKnobs`). Grouped convs read only their groups' input blocks
(:class:`~compiler.ops.cpu.groups.GroupSpan`). The layout pieces it shares with the other NCHWc kernels (padding,
weight packing, :class:`~compiler.ops.cpu.nchwc.Epilogue`) live in ``nchwc.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.ops.cpu.conv2d import padding_skip, schedule_register_tile
from pyvta.compiler.ops.cpu.groups import GroupSpan
from pyvta.compiler.ops.cpu.nchwc import (
    SPARE_REGISTERS,
    VECTOR_BLOCK_TILE_BLOCKS,
    WIDE_REGISTER_FILE,
    Epilogue,
    conv_output_hw,
    pad_channels_last,
    pad_nchw,
    pad_nchwc,
    schedule_channels_last,
)
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import minimum, select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum

FLAT_BELOW_WIDTH = 8  # untuned convs with narrower output rows tile flattened positions
MIN_FLAT_TILE = 4  # columns of a flat tile (x two vectors: 8 accumulators, the FMA latency)


def register_tiles(
    target, out_width: int, out_block: int, oc_blocks: int = 1
) -> list[tuple[int, int]]:
    """``(ow_block, oc_tile)`` register tiles of an NCHWc conv on ``target``: ``oc_tile`` whole
    vectors dividing ``out_block`` (the block itself when it is less than one vector),
    ``ow_block`` up to ``out_width`` (a tile need not divide it: the last tile of a row takes
    the rest), ``ow_block x oc_tile / lanes`` accumulators (times ``oc_blocks``, the output
    blocks a tile spans) within the vector registers less ``SPARE_REGISTERS`` (more spill:
    7 x 16 channels ran 1.7x slower than 7 x 8 on AVX2)."""
    lanes = target.vector_lanes("float32")
    room = target.vector_registers - SPARE_REGISTERS
    octs = [t for t in range(lanes, out_block + 1, lanes) if out_block % t == 0] or [out_block]
    if oc_blocks > 1:
        octs = [out_block]  # a tile of several blocks takes each whole
    return [
        (d, t)
        for t in octs
        for d in range(1, out_width + 1)
        if d * oc_blocks * max(1, t // lanes) <= room
    ]


# On a target of fewer vector registers than this (AVX2's 16), an output block of one vector
# or less feeds one FMA per broadcast input value and its tile of at most 12 columns cannot
# hide the loads; the untuned tile then spans several output blocks (of OC_BLOCK_CHOICES, the
# fewest blocks computed past the layer's, then the first), one broadcast feeding each. Zen 4,
# AVX2, one thread, thread time, min of 7 interleaved runs (load 7): net3's 3x3 dilation-3 conv
# 192 -> 56 at 12 x 12 (7 blocks of 8) 0.468 -> 0.309 ms (2 blocks x 6 columns), 16 -> 24 5x5
# stride 2 at 52 x 52 (3 blocks) 0.284 -> 0.156 ms (3 x 4; 2 x 6: 0.192), 64 -> 64 3x3 at 28 x
# 28 in blocks of 8 0.893 -> 0.558 ms. On AVX-512 (32 registers) the same layers gained nothing
# (blocks of 8: 0.313 -> 0.326-0.362 ms, 0.146 -> 0.147-0.195; 0.626 -> 0.530): left as it was.
# On two threads the narrower tiles read the weights more often per column: 24 -> 24 7x7 at
# 49 x 49 (113 KiB of weights for 3 blocks) ran 1.4 -> 2.7 ms, while 16 -> 24 5x5 s2 (38 KiB)
# ran 0.251 -> 0.135 ms (AVX2, in the network, load 7-9): a tile's weights stay under this.
BLOCK_TILES_BELOW_REGISTERS = WIDE_REGISTER_FILE
OC_BLOCK_CHOICES = (2, 3)
TILE_WEIGHT_MAX_BYTES = 64 * 1024


# the cache-tile loops of the direct conv's output (f: output channel blocks, y: rows, x: a
# row's register tiles), and the reduction's outer loops (c: input channel blocks of a chunk, y:
# kernel rows, x: kernel columns): their orders are permutations of these letters
LOOP_AXES = "fyx"
REDUCE_AXES = "cyx"
PAD_PLACES = ("root", "inline", "tile")  # the padding stage: whole tensor, in the reads, per tile


def _permutations(letters: str) -> tuple[str, ...]:
    return tuple("".join(p) for p in itertools.permutations(letters))


LOOP_ORDERS = _permutations(LOOP_AXES)
REDUCE_ORDERS = _permutations(REDUCE_AXES)


def order_problem(knob: str, order: str, home: str, present: str) -> str | None:
    """Why ``order`` (a permutation of ``home``) is not a canonical order of the loops
    ``present``, or None. An absent loop keeps its ``home`` position, so each order of the
    present loops is one value only (no two configs build the same loops)."""
    if sorted(order) != sorted(home):
        raise ValueError(f"{knob} {order!r} must be a permutation of {home!r}")
    moved = [a for a in home if a not in present and order.index(a) != home.index(a)]
    if moved:
        return (
            f"{knob} {order!r} moves the absent loop {moved[0]!r} (absent loops keep their"
            f" place in {home!r})"
        )
    return None


@dataclass(frozen=True)
class NchwcConvKnobs:
    """The direct NCHWc conv's schedule (defaults: the loops before the cache tiles were knobs).

    Register tile: ``ow_block`` unrolled output columns per register tile (at most the output
    width; when it does not divide it, the row's last tile is narrower); ``oc_tile`` output
    channels per register tile (a multiple of the vector lanes dividing the output block; 0: the
    whole block), so a tile holds ``oc_tile / lanes * ow_block`` vector accumulators; ``flat``
    the output positions as one axis, the tiles running on across rows (only the layer's last
    tile is cut short, not each row's).

    Cache tiles around it (1: none): ``tile_f`` output channel blocks, ``tile_y`` output rows
    (not ``flat``; a divisor of the rows), ``tile_x`` register tiles of a row (of the
    positions, ``flat``) per cache tile; ``outer_order`` the order of the loops over cache tiles
    and ``inner_order`` of those inside one (permutations of ``LOOP_AXES``; a loop that is not
    there keeps its place: see :func:`order_problem`).

    Reduction, all inside the register tile (the accumulators stay in registers):
    ``rco_block`` input channel blocks per chunk (cache blocking of the reduction; 0: one chunk
    of all, no split); ``reduce_order`` the order of (the chunk's channel blocks, kernel rows,
    kernel columns) inside a chunk (a permutation of ``REDUCE_AXES``); ``unroll_rx`` the
    kernel-width loop inside the channel loop and unrolled (neighbouring columns share loads,
    stride 1); ``unroll_ry`` the kernel-height loop unrolled; ``unroll_rci`` the input channel
    loop unrolled by this factor (a divisor of the input block; 1: not unrolled).

    Threads: ``parallel`` the outermost ``parallel_loops`` loops of the output (after the
    order) fused and run across threads. ``pad_at``: the padding stage over the whole tensor
    (``root``), inlined into the conv's reads (``inline``), or computed per register tile and
    reduction chunk (``tile``); one of ``PAD_PLACES``.

    ``oc_blocks``: output channel blocks one register tile spans (whole blocks, ``oc_tile`` 0),
    the input value broadcast once per column for all of them; the blocks' loop (``f``) then
    runs over tiles of them, the last maybe short (computed as a copy of the last block).

    The channel blocks are the layout's, not knobs: they are the blocks of the tensors the
    conv reads and writes."""

    ow_block: int = 4
    oc_tile: int = 0
    unroll_rx: bool = False
    parallel: bool = True
    flat: bool = False
    tile_f: int = 1
    tile_y: int = 1
    tile_x: int = 1
    outer_order: str = LOOP_AXES
    inner_order: str = LOOP_AXES
    rco_block: int = 0
    reduce_order: str = REDUCE_AXES
    unroll_ry: bool = False
    unroll_rci: int = 1
    parallel_loops: int = 2
    pad_at: str = "root"
    oc_blocks: int = 1

    def to_dict(self) -> dict:
        return asdict(self)

    def unrolled_fmas(self, kernel: tuple[int, int], ob: int, lanes: int) -> int:
        """Vector FMAs of one step of the reduction written out as straight-line code: the
        register tile's ``ow_block`` columns x its vectors (``oc_blocks`` blocks of ``oc_tile``
        channels, ``lanes`` a vector) x the taps of the unrolled kernel loops x ``unroll_rci``
        input channels. What a build costs grows with it (``tuner.cpu.MAX_UNROLLED_FMAS``)."""
        kh, kw = kernel
        vectors = self.oc_blocks * -(-(self.oc_tile or ob) // lanes)
        taps = (kh if self.unroll_ry else 1) * (kw if self.unroll_rx else 1)
        return self.ow_block * vectors * taps * self.unroll_rci

    def col_tiles(self, out_hw: tuple[int, int]) -> int:
        """Register tiles of a row (of all positions when ``flat``), the last maybe narrower."""
        cols = out_hw[0] * out_hw[1] if self.flat else out_hw[1]
        return -(-cols // self.ow_block)

    def present_loops(self) -> tuple[str, str]:
        """The cache-tile loops there are: ``(outer, inner)`` as letters of ``LOOP_AXES``."""
        outer = "fx" if self.flat else LOOP_AXES
        tiles = {"f": self.tile_f, "y": self.tile_y, "x": self.tile_x}
        return outer, "".join(a for a in LOOP_AXES if tiles[a] > 1)

    def size_problem(
        self, out_hw: tuple[int, int], out_blocks: int, in_blocks: int, ib: int, ob: int
    ) -> str | None:
        """Why the sizes do not fit a layer (output ``out_hw``, ``out_blocks`` / ``in_blocks``
        channel blocks, blocks ``ib`` / ``ob``), or None."""
        oh, ow = out_hw
        cols = oh * ow if self.flat else ow
        oct_ = self.oc_tile or ob
        if not 0 < self.ow_block <= cols or oct_ < 1 or ob % oct_:
            return (
                f"ow_block {self.ow_block} must be in 1..{cols} (the output "
                f"{'positions' if self.flat else 'width'}), oc_tile {oct_} divide the block {ob}"
            )
        if self.flat and self.tile_y != 1:
            return f"tile_y {self.tile_y}: a flat conv has no rows (1)"
        if self.oc_blocks < 1 or (self.oc_blocks > 1 and oct_ != ob):
            return (
                f"oc_blocks {self.oc_blocks} must be 1, or above with oc_tile the whole block"
                f" ({ob}, not {oct_})"
            )
        if self.oc_blocks > out_blocks:
            return f"oc_blocks {self.oc_blocks} must be at most the {out_blocks} output blocks"
        for name, t, n in (
            ("tile_f", self.tile_f, -(-out_blocks // self.oc_blocks)),
            ("tile_y", self.tile_y, oh),
            ("tile_x", self.tile_x, self.col_tiles(out_hw)),
        ):
            if t != 1 and not 1 < t < n:
                return f"{name} {t} must be 1 (none) or in 2..{n - 1} (below the {n} there are)"
        if self.tile_y > 1 and oh % self.tile_y:
            return f"tile_y {self.tile_y} must divide the {oh} rows"
        if self.rco_block != 0 and not (
            0 < self.rco_block < in_blocks and in_blocks % self.rco_block == 0
        ):
            return (
                f"rco_block {self.rco_block} must be 0 (one chunk) or a divisor of the"
                f" {in_blocks} input blocks below it"
            )
        if self.unroll_rci < 1 or ib % self.unroll_rci:
            return f"unroll_rci {self.unroll_rci} must divide the input block {ib}"
        return None

    def loop_problem(self, padded: bool) -> str | None:
        """Why the loop orders, threads or padding placement do not fit (``padded``: the conv
        has a padding stage), or None."""
        outer, inner = self.present_loops()
        why = order_problem("outer_order", self.outer_order, LOOP_AXES, outer)
        why = why or order_problem("inner_order", self.inner_order, LOOP_AXES, inner)
        red = REDUCE_AXES.replace("x", "") if self.unroll_rx else REDUCE_AXES
        why = why or order_problem("reduce_order", self.reduce_order, REDUCE_AXES, red)
        if why:
            return why
        if not 1 <= self.parallel_loops <= len(outer) + len(inner):
            return (
                f"parallel_loops {self.parallel_loops} must be in 1..{len(outer) + len(inner)}"
                " (the cache-tile loops)"
            )
        if self.pad_at not in PAD_PLACES:
            return f"pad_at {self.pad_at!r} (allowed: {', '.join(PAD_PLACES)})"
        if self.pad_at != "root" and not padded:
            return f"pad_at {self.pad_at!r}: the conv has no padding stage (root only)"
        return None

    def layer_problem(
        self,
        out_hw: tuple[int, int],
        out_blocks: int,
        in_blocks: int,
        ib: int,
        ob: int,
        padded: bool,
        groups: GroupSpan | None = None,
    ) -> str | None:
        """Why the knobs do not fit a layer (:meth:`size_problem` and :meth:`loop_problem`; a
        grouped conv's reduction runs over its groups' span of blocks, or in an exact tile,
        ``GroupSpan.exact_tile``, over ``group_in`` channels of a channels-last copy of its
        input made at the root), or None."""
        if groups is not None and groups.reads_exactly(self.oc_blocks, ib, ob, out_blocks):
            why = self.size_problem(out_hw, out_blocks, 1, groups.group_in, ob)
            why = why or self.loop_problem(True)
            if not why and self.pad_at != "root":
                why = (
                    f"pad_at {self.pad_at!r}: a grouped conv's exact tile reads a channels-last"
                    " copy of its input (root only)"
                )
            return why
        if groups is not None:
            in_blocks = groups.count(ib, ob, in_blocks, out_blocks)
        return self.size_problem(out_hw, out_blocks, in_blocks, ib, ob) or self.loop_problem(padded)

    @staticmethod
    def for_target(
        target,
        out_width: int,
        out_block: int,
        out_height: int = 1,
        out_blocks: int = 1,
        block_weight_bytes: int = 0,
        shared_input: bool = True,
        exact_tile: int | None = None,
    ) -> NchwcConvKnobs:
        """Of :func:`register_tiles`: the widest channel tile (one broadcast of an input value
        feeds the most FMAs; whole cache lines of weights), then the fewest tiles per output
        row, then the most even ones (7 columns as 4 + 3, not 6 + 1: a one-column tile cannot
        hide the FMA latency). On AVX2 (ResNet-18, one thread) this took the 14- and 7-wide
        layers from 7 x 8 to 5 x 16 and 4 x 16 tiles, about 15-25% faster. Rows narrower than
        ``FLAT_BELOW_WIDTH`` run ``flat``: the widest channel tile, then of at least
        ``MIN_FLAT_TILE`` columns the fewest positions computed (layer 4's 7 x 7 as 10 tiles
        of 5, not 14 of 4: about 5% faster). Below ``BLOCK_TILES_BELOW_REGISTERS`` vector
        registers, blocks of at most one vector run several (of ``out_blocks``) per tile, when
        their weights (``block_weight_bytes`` each) fit ``TILE_WEIGHT_MAX_BYTES``; with more,
        blocks of exactly one vector run ``nchwc.VECTOR_BLOCK_TILE_BLOCKS`` per tile where that
        divides ``out_blocks`` (whatever their weights weigh: the tile is 14 columns wide).
        Without ``shared_input`` (a grouped conv: each output block reads its own groups'
        input blocks, so no broadcast value feeds two), with 32 registers, a tile of rows (not
        flat) keeps those columns but takes one block. A grouped conv of an ``exact_tile``
        (:meth:`GroupSpan.exact_tile`) takes that tile's blocks in rows of the fewest tiles,
        where at least ``MIN_FLAT_TILE`` columns of them fit the registers."""
        tiles = register_tiles(target, out_width, out_block, exact_tile or 1)
        if exact_tile is not None and max(d for d, _ in tiles) >= MIN_FLAT_TILE:
            # RegNetX-600MF's groups of 24 in blocks of 16 (tiles of 3 blocks, 7-8 columns),
            # Zen 5, 2 threads, kernels alone, 40 interleaved rounds, medians, against the
            # span's untuned tile (one block): 240 ch at 14 x 14 1.38x, 528 at 7 x 7 1.86x, 96
            # at 28 x 28 1.71x; stride 2: 96 at 56 1.55x, 240 at 28 1.48x, 528 at 14 1.41x, 48
            # at 112 1.51x. Rows, not flat: 528 at 7 x 7 flat ran 1.5x slower (prototype)
            ow_block, _ = min(tiles, key=lambda dt: (-(-out_width // dt[0]), dt[0]))
            return NchwcConvKnobs(ow_block, 0, oc_blocks=exact_tile)

        oc_blocks = 1
        lanes = target.vector_lanes("float32")
        if target.vector_registers < BLOCK_TILES_BELOW_REGISTERS and out_block <= lanes:
            fits = [
                b
                for b in OC_BLOCK_CHOICES
                if b <= out_blocks and b * block_weight_bytes <= TILE_WEIGHT_MAX_BYTES
            ]
            if fits:
                oc_blocks = min(fits, key=lambda b: -out_blocks % b)
        elif out_block == lanes and out_blocks % VECTOR_BLOCK_TILE_BLOCKS == 0:  # 32 registers
            oc_blocks = VECTOR_BLOCK_TILE_BLOCKS
        tiles = register_tiles(target, out_width, out_block, oc_blocks)
        flat = out_width < FLAT_BELOW_WIDTH
        if flat:
            pos = out_width * out_height
            wide = [dt for dt in tiles if dt[0] >= MIN_FLAT_TILE] or tiles
            ow_block, oc_tile = min(wide, key=lambda dt: (-dt[1], -pos % dt[0], -dt[0]))
        else:
            ow_block, oc_tile = min(tiles, key=lambda dt: (-dt[1], -(-out_width // dt[0]), dt[0]))
        oc_tile = oc_tile if oc_tile != out_block else 0
        if not shared_input and not flat and target.vector_registers >= WIDE_REGISTER_FILE:
            # a grouped conv's blocks read different input blocks (their groups'), so a tile of
            # several broadcasts each value for one block anyway, and does not skip the blocks
            # past its groups' (``GroupSpan.needed``): one block, the same columns. Zen 5, 2
            # threads, one-conv networks, 40 interleaved runs, medians: 64 -> 64 group 4 at
            # 56 x 56 0.408 -> 0.348 ms (2 blocks x 14 columns -> 1 x 14; 1 x 28, the widest
            # tile of one block, ran 0.02-0.09 ms slower than 1 x 14), 128 -> 128 group 32
            # 0.785 -> 0.690, 96 -> 96 group 4 at 28 x 28 0.340 -> 0.252, 256 -> 256 group 32
            # at 28 x 28 0.393 -> 0.317, 128 -> 128 group 8 0.223 -> 0.180. Not a flat tile:
            # 1024 -> 1024 group 32 at 7 x 7 ran 0.176 ms against 0.158 with two blocks (the
            # tile's 7 positions alone hold too few accumulators; benchmarks/cpu_grouped.py).
            # With AVX2's 16 registers (blocks of 8, several a tile) not measured: as it was.
            # (Groups narrower than the block, such as group 32 of 128 or 256 channels, now run
            # the depthwise template untuned: ``ConvWorkload.group_width``.) Kernels alone,
            # later: 512 -> 512 group 32 at 14 x 14 0.101 ms either way, stride 2 (28 -> 14)
            # 0.136 against 0.178 with two blocks.
            oc_blocks = 1
        return NchwcConvKnobs(ow_block, oc_tile, flat=flat, oc_blocks=oc_blocks)


def conv2d_nchwc(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    ic: int,
    oc: int,
    knobs: NchwcConvKnobs = NchwcConvKnobs(),
    epilogue: Epilogue | None = None,
    nchw_input: bool = False,
    dilations: tuple[int, int] = (1, 1),
    groups: GroupSpan | None = None,
):
    """``(sch, [data, weight, bias, (residual,) out])``: data ``[1, C/ic, H, W, ic]`` (with
    ``nchw_input``: NCHW ``[1, C, H, W]``, padded as NCHW, ``ic`` its channels), weight
    from :func:`pack_conv_weights`, bias ``[O]``, residual and out ``[1, O/oc, OH, OW, oc]``;
    ``dilations`` (rows, columns) space the kernel's taps; ``groups``: a grouped conv, the
    weight ``GroupSpan.pack``ed (each output block reads only its groups' input blocks)."""
    if c % ic or o % oc:
        raise ValueError(f"channels {c}/{o} must be multiples of the blocks ic={ic}/oc={oc}")
    epilogue = epilogue or Epilogue()
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    oh, ow = conv_output_hw(h, w, kernel, strides, pads, dilations)
    owb, oct_ = knobs.ow_block, knobs.oc_tile or oc
    c_blocks = c // ic
    span = groups.count(ic, oc, c_blocks, o // oc) if groups is not None else c_blocks
    # a grouped conv whose tile spans its groups' repeat reads exactly their channels
    exact = groups is not None and groups.reads_exactly(knobs.oc_blocks, ic, oc, o // oc)
    period, gin = (knobs.oc_blocks, groups.group_in) if exact else (None, None)
    padded = nchw_input or any(pads)
    why = knobs.layer_problem((oh, ow), o // oc, c_blocks, ic, oc, padded, groups)
    if why:
        raise ValueError(why)
    # flat: the output positions as one axis (the same bytes as [1, O/oc, OH, OW, oc]), so
    # register tiles run on across rows and only the layer's last tile is narrower
    oshape = (1, o // oc, oh * ow, oc) if knobs.flat else (1, o // oc, oh, ow, oc)
    dshape = (1, c, h, w) if nchw_input else (1, c // ic, h, w, ic)
    data = placeholder(dshape, "float32", "data")
    wshape = (o // oc, gin, kh, kw, oc) if exact else (o // oc, span, kh, kw, ic, oc)
    wgt = placeholder(wshape, "float32", "weight")
    bias = placeholder((o,), "float32", "bias")
    args = [data, wgt, bias]
    res = None
    if epilogue.residual:
        res = placeholder(oshape, "float32", "residual")
        args.append(res)
    # an NCHW input is padded as NCHW (rows copied as rows) and read from its channel planes:
    # blocking it in the padding copy (NCHW3c, 3-lane vectors) cost 5-9% more (first convs of
    # 3 channels, one thread, Zen 4)
    if exact:
        dp = pad_channels_last(data, pads, "data.pad", c)
    elif nchw_input:
        dp = pad_nchw(data, pads, 0.0, "data.pad")

        def read(n, cb, yy, xx, ci):
            return dp[n, cb * ic + ci, yy, xx]
    else:
        dp = pad_nchwc(data, pads, 0.0, "data.pad")

        def read(n, cb, yy, xx, ci):
            return dp[n, cb, yy, xx, ci]

    rco, ry, rx = (
        reduce_axis(1 if exact else span, "rco"),
        reduce_axis(kh, "ry"),
        reduce_axis(kw, "rx"),
    )
    rci = reduce_axis(gin if exact else ic, "rci")

    def skip(y, x):
        # the kernel rows that read the zero padding, a test per row and register tile; not
        # single columns (a test per column, tap and input channel: AVX2, 1 thread, net27's
        # dilated 7x7 on 13 x 13, 3.05 ms -> 2.38 rows only, 2.88 rows and columns); not flat
        # tiles (their rows vary within a tile)
        if knobs.flat or not any(pads):
            return None
        return padding_skip(y, x, ry, rx, (h, w), (oh, ow), kernel, strides, pads, dilations,
                            column_share=None)  # fmt: skip

    def group_blocks(f):
        # the span's input blocks past those of the output block's groups (zero weights),
        # skipped with a test per block and tile: net27's 184 -> 112 group-4 3x3 (blocks of
        # 16 straddle groups: a span of 7 of 12 blocks, 3-7 needed) 0.337 -> 0.269 ms AVX2,
        # 0.182 -> 0.147 AVX-512 (1 thread); not where a tile spans several blocks (the test
        # would run per block inside the reduction)
        if groups is None or knobs.oc_blocks > 1 or exact:
            return None
        return rco < groups.needed(f, ic, oc, c_blocks, span)

    # tiles of oc_blocks blocks: blocks past the last are computed as a copy of it (clamped)
    f_blocks = o // oc
    f_pad = -(-f_blocks // knobs.oc_blocks) * knobs.oc_blocks

    def exact_read(n, f, yy, xx, fi):
        # the tile's blocks f % period (unrolled: constants) hold groups lo and hi (the same
        # group, or a block straddling two: its lanes before hi's first channel read lo's),
        # both broadcast from the channels-last copy and blended by lane
        first, t = (f // period) * (period * oc // groups.group_out), f % period
        last = const(groups.group - 1)
        lo = minimum(first + t * oc // groups.group_out, last)
        hi = minimum(first + (t * oc + oc - 1) // groups.group_out, last)
        lane_in_lo = t * oc + fi < (hi - first) * groups.group_out
        a, b = (dp[n, yy, xx, g * gin + rco + rci] for g in (lo, hi))
        return select(lane_in_lo, a, b) * wgt[f, rci, ry, rx, fi]

    def conv_fn(n, f, y, x, fi):
        if f_pad > f_blocks:
            f = minimum(f, const(f_blocks - 1))
        yy, xx = y * sh + ry * dh, x * sw + rx * dw
        if exact:
            term = exact_read(n, f, yy, xx, fi)
        else:
            cb = rco if groups is None else groups.start(f, ic, oc, c_blocks, span) + rco
            term = read(n, cb, yy, xx, rci) * wgt[f, rco, ry, rx, rci, fi]
        where = [t for t in (skip(y, x), group_blocks(f)) if t is not None]
        return te_sum(term, [rco, ry, rx, rci], where=all_(*where) if where else None)

    def out_fn(*idx):
        r = res[idx] if res is not None else None
        return epilogue.apply(conv[idx], bias[idx[1] * oc + idx[-1]], r)

    # the accumulators cover whole register tiles: columns past the last are computed as a
    # copy of it (clamped index) and not stored, so the reduction has no bounds checks
    cols = oshape[-2]
    cols_pad = -(-cols // owb) * owb
    cshape = (1, f_pad) + oshape[2:-2] + (cols_pad, oc)

    def last(x):
        return minimum(x, const(cols - 1)) if cols_pad > cols else x

    if knobs.flat:
        conv = compute(
            cshape, lambda n, f, x, fi: conv_fn(n, f, last(x) // ow, last(x) % ow, fi), "conv"
        )
        out = compute(oshape, lambda n, f, x, fi: out_fn(n, f, x, fi), name="out")
    else:
        conv = compute(cshape, lambda n, f, y, x, fi: conv_fn(n, f, y, last(x), fi), "conv")
        out = compute(oshape, lambda n, f, y, x, fi: out_fn(n, f, y, x, fi), name="out")
    s = create_schedule(out)
    if exact:
        _schedule_direct(s, conv, out, None, knobs, oct_, gin)
        schedule_channels_last(s[dp], ic, knobs.parallel)
    else:
        _schedule_direct(s, conv, out, dp if dp is not data else None, knobs, oct_, ic, nchw_input)
    return s, args + [out]


def _schedule_direct(
    s, conv, out, dp, knobs: NchwcConvKnobs, oc_tile: int, ib: int, nchw: bool = False
) -> None:
    """The direct conv's schedule of ``knobs`` (checked by the caller): register tiles of
    ``out`` (``x`` split by ``ow_block``, ``fi`` by ``oc_tile``) inside the cache tiles, the
    accumulators ``conv`` computed per register tile (``ib`` input channels per block), the
    padding stage ``dp`` (None: none; ``nchw``: of an NCHW input, its rows left to LLVM)."""
    s[conv].set_scope("local")
    xo, xi = s[out].split("x", knobs.ow_block)
    fo, fi = s[out].split("fi", oc_tile)
    outer_names, _ = knobs.present_loops()
    f_loop, tile = "f", []
    if knobs.oc_blocks > 1:
        f_loop, f_in = s[out].split("f", knobs.oc_blocks)
        tile = [f_in]
    loops = {"f": f_loop, "y": "y", "x": xo}
    outer, inner = {}, {}
    for a, t in (("f", knobs.tile_f), ("y", knobs.tile_y), ("x", knobs.tile_x)):
        if a in outer_names:
            outer[a], inner[a] = s[out].split(loops[a], t) if t > 1 else (loops[a], None)
    order = [outer[a] for a in knobs.outer_order if a in outer]
    order += [inner[a] for a in knobs.inner_order if inner.get(a) is not None]
    s[out].reorder("n", *order, fo, *tile, xi, fi)
    s[conv].compute_at(s[out], fo)
    reduce = {"c": "rco", "y": "ry", "x": "rx"}
    chunks = []
    if knobs.rco_block:
        chunks = [s[conv].split("rco", knobs.rco_block)[0].name]
        reduce["c"] = "rco.inner"
    rci = ["rci"]
    if 1 < knobs.unroll_rci < ib:
        rci = [a.name for a in s[conv].split("rci", knobs.unroll_rci)]
    schedule_register_tile(
        s[conv], knobs.unroll_rx, rows=not knobs.flat,
        reduce=chunks + [reduce[a] for a in knobs.reduce_order], rci=rci,
        blocks=knobs.oc_blocks > 1,
    )  # fmt: skip
    if knobs.unroll_ry:
        s[conv].unroll("ry")
    if knobs.unroll_rci > 1:
        s[conv].unroll(rci[-1])
    s[out].unroll(xi)
    for f_in in tile:
        s[out].unroll(f_in)
    s[out].vectorize(fi)
    if dp is not None:
        if knobs.pad_at == "inline":
            s[dp].compute_inline()
        else:
            if not nchw:
                s[dp].vectorize("ci")
        if knobs.pad_at == "tile":
            s[dp].compute_at(s[conv], (chunks + [reduce[a] for a in knobs.reduce_order])[0])
    if knobs.parallel:
        fused = order[0]
        for loop in order[1 : knobs.parallel_loops]:
            fused = s[out].fuse(fused, loop)
        s[out].parallel(fused)
        if dp is not None and knobs.pad_at == "root":
            s[dp].parallel(s[dp].fuse("ch", "y"))
