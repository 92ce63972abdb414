"""CPU graph kernels in the blocked NCHW{c}c layout, with fused epilogues (float32, batch 1).

A network compiled for the CPU keeps its activations as ``[1, C/c, H, W, c]`` from the first
conv to the last pool (``compiler.targets.cpu.alter_cpu_layout`` plans it); these templates
read and write that layout, so no transform runs between layers:

- ``conv2d_nchwc``: direct convolution, register-tiled like ``conv2d_nchw_blocked``
  (``ow_block`` columns x one output block of ``oc`` channels per tile, the input value
  broadcast and FMA'd into ``oc / lanes`` vector accumulators per column),
- (depthwise and pointwise convs: ``depthwise.py``, ``pointwise.py``),
- ``max_pool_nchwc``, ``global_avg_pool_nchwc``, ``dense_nc``, ``softmax_nc``,
  ``layout_transform``, ``elementwise``.

Every conv / dense kernel applies its :class:`Epilogue` in the same loop nest as the
accumulation: ``clip(acc + bias[o] + residual)``. Kernels take ``(inputs..., out)``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.ops.cpu.conv2d import schedule_register_tile
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import cast, exp, maximum, minimum, select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import max as te_max
from pyvta.compiler.te.tensor import sum as te_sum

F32_LOWEST = -3.4028234663852886e38


@dataclass(frozen=True)
class Epilogue:
    """What a conv / dense adds to its accumulator before storing it: the bias (always), a
    residual of the output's shape, and a clip ``[lo, hi]`` (relu: ``[0, inf]``)."""

    residual: bool = False
    clip: tuple[float, float] | None = None

    def apply(self, acc, bias, res=None):
        v = acc + bias
        if self.residual:
            v = v + res
        if self.clip is not None:
            lo, hi = self.clip
            if lo > -math.inf:
                v = maximum(v, const(float(lo)))
            if hi < math.inf:
                v = minimum(v, const(float(hi)))
        return v


SPARE_REGISTERS = 4  # vector registers a conv tile leaves for the input broadcast and weights
FLAT_BELOW_WIDTH = 8  # untuned convs with narrower output rows tile flattened positions
MIN_FLAT_TILE = 4  # columns of a flat tile (x two vectors: 8 accumulators, the FMA latency)


def register_tiles(target, out_width: int, out_block: int) -> list[tuple[int, int]]:
    """``(ow_block, oc_tile)`` register tiles of an NCHWc conv on ``target``: ``oc_tile`` whole
    vectors dividing ``out_block`` (the block itself when it is less than one vector),
    ``ow_block`` up to ``out_width`` (a tile need not divide it: the last tile of a row takes
    the rest), ``ow_block x oc_tile / lanes`` accumulators within the vector registers less
    ``SPARE_REGISTERS`` (more spill: 7 x 16 channels ran 1.7x slower than 7 x 8 on AVX2)."""
    lanes = target.vector_lanes("float32")
    room = target.vector_registers - SPARE_REGISTERS
    octs = [t for t in range(lanes, out_block + 1, lanes) if out_block % t == 0] or [out_block]
    return [(d, t) for t in octs for d in range(1, out_width + 1) if d * max(1, t // lanes) <= room]


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

    def to_dict(self) -> dict:
        return asdict(self)

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
        for name, t, n in (
            ("tile_f", self.tile_f, out_blocks),
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

    @staticmethod
    def for_target(target, out_width: int, out_block: int, out_height: int = 1) -> NchwcConvKnobs:
        """Of :func:`register_tiles`: the widest channel tile (one broadcast of an input value
        feeds the most FMAs; whole cache lines of weights), then the fewest tiles per output
        row, then the most even ones (7 columns as 4 + 3, not 6 + 1: a one-column tile cannot
        hide the FMA latency). On AVX2 (ResNet-18, one thread) this took the 14- and 7-wide
        layers from 7 x 8 to 5 x 16 and 4 x 16 tiles, about 15-25% faster. Rows narrower than
        ``FLAT_BELOW_WIDTH`` run ``flat``: the widest channel tile, then of at least
        ``MIN_FLAT_TILE`` columns the fewest positions computed (layer 4's 7 x 7 as 10 tiles
        of 5, not 14 of 4: about 5% faster)."""
        tiles = register_tiles(target, out_width, out_block)
        flat = out_width < FLAT_BELOW_WIDTH
        if flat:
            pos = out_width * out_height
            wide = [dt for dt in tiles if dt[0] >= MIN_FLAT_TILE] or tiles
            ow_block, oc_tile = min(wide, key=lambda dt: (-dt[1], -pos % dt[0], -dt[0]))
        else:
            ow_block, oc_tile = min(tiles, key=lambda dt: (-dt[1], -(-out_width // dt[0]), dt[0]))
        return NchwcConvKnobs(ow_block, oc_tile if oc_tile != out_block else 0, flat=flat)


@dataclass(frozen=True)
class GroupSpan:
    """A grouped conv in the direct template: ``group`` groups of ``group_in`` input and
    ``group_out`` output channels (the layer's own counts; padded channels past them belong to
    no group). Output block ``f`` reads the ``count`` input blocks from :meth:`start` on, those
    its groups' channels fall in (fewer than all: group 4 reads about a quarter)."""

    group: int
    group_in: int
    group_out: int

    def _first_last(self, f: int, ic: int, oc: int) -> tuple[int, int]:
        g0 = min(f * oc // self.group_out, self.group - 1)
        g1 = min(((f + 1) * oc - 1) // self.group_out, self.group - 1)
        return g0 * self.group_in // ic, ((g1 + 1) * self.group_in - 1) // ic

    def count(self, ic: int, oc: int, c_blocks: int, o_blocks: int) -> int:
        """Input blocks an output block reads (the most any reads)."""
        spans = [self._first_last(f, ic, oc) for f in range(o_blocks)]
        return min(c_blocks, max(b - a + 1 for a, b in spans))

    def start(self, f, ic: int, oc: int, c_blocks: int, count: int):
        """The first input block of output block ``f`` (an int, or an index expression)."""
        if isinstance(f, int):
            return min(self._first_last(f, ic, oc)[0], c_blocks - count)
        g0 = minimum(f * oc // const(self.group_out), const(self.group - 1))
        return minimum(g0 * self.group_in // const(ic), const(c_blocks - count))

    def pack(self, packed: np.ndarray) -> np.ndarray:
        """:func:`pack_conv_weights` of the block-diagonal weights ``[O/oc, C/ic, KH, KW, ic,
        oc]`` -> the ``count`` input blocks each output block reads ``[O/oc, count, ...]``."""
        o_blocks, c_blocks, _, _, ic, oc = packed.shape
        n = self.count(ic, oc, c_blocks, o_blocks)
        rows = [packed[f, self.start(f, ic, oc, c_blocks, n) :][:n] for f in range(o_blocks)]
        return np.ascontiguousarray(np.stack(rows))


def pack_conv_weights(kernel: np.ndarray, ic: int, oc: int) -> np.ndarray:
    """OIHW weights -> OIHW{ic}i{oc}o ``[O/oc, C/ic, KH, KW, ic, oc]`` (float32, contiguous)."""
    o, c, kh, kw = kernel.shape
    w = kernel.astype(np.float32).reshape(o // oc, oc, c // ic, ic, kh, kw)
    return np.ascontiguousarray(w.transpose(0, 2, 4, 5, 3, 1))


def _padded(data, pads, fill: float, name: str, block: int | None = None):
    """``data [1, C/c, H, W, c]`` with ``pads`` (top, left, bottom, right) of ``fill``. With
    ``block``, ``data`` is NCHW ``[1, C, H, W]``: the stage is always made, and reads it into
    NCHW{block}c as it pads (the layout transform fused into the padding copy)."""
    if block is None:
        _, cb, h, w, blk = data.shape
    else:
        _, c, h, w = data.shape
        cb, blk = c // block, block
    t, lft, b, r = pads
    if not any(pads) and block is None:
        return data

    def read(n, ch, y, x, ci):
        if block is None:
            return data[n, ch, y, x, ci]
        return data[n, ch * block + ci, y, x]

    def f(n, ch, y, x, ci):
        if not any(pads):
            return read(n, ch, y, x, ci)
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        return select(inside, read(n, ch, y - t, x - lft, ci), const(fill))

    return compute((1, cb, h + t + b, w + lft + r, blk), f, name=name)


def _conv_shape(h, w, kernel, strides, pads, dilations=(1, 1)):
    (kh, kw), (sh, sw), (t, lft, b, r), (dh, dw) = kernel, strides, pads, dilations
    oh = (h + t + b - (kh - 1) * dh - 1) // sh + 1
    ow = (w + lft + r - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"kernel {kernel} larger than the padded input {h + t + b}x{w + lft + r}")
    return oh, ow


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
    epilogue: Epilogue = Epilogue(),
    nchw_input: bool = False,
    dilations: tuple[int, int] = (1, 1),
    groups: GroupSpan | None = None,
):
    """``(sch, [data, weight, bias, (residual,) out])``: data ``[1, C/ic, H, W, ic]`` (with
    ``nchw_input``: NCHW ``[1, C, H, W]``, read into NCHW{ic}c by the padding stage), weight
    from :func:`pack_conv_weights`, bias ``[O]``, residual and out ``[1, O/oc, OH, OW, oc]``;
    ``dilations`` (rows, columns) space the kernel's taps; ``groups``: a grouped conv, the
    weight ``GroupSpan.pack``ed (each output block reads only its groups' input blocks)."""
    if c % ic or o % oc:
        raise ValueError(f"channels {c}/{o} must be multiples of the blocks ic={ic}/oc={oc}")
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    oh, ow = _conv_shape(h, w, kernel, strides, pads, dilations)
    owb, oct_ = knobs.ow_block, knobs.oc_tile or oc
    c_blocks = c // ic
    span = groups.count(ic, oc, c_blocks, o // oc) if groups is not None else c_blocks
    padded = nchw_input or any(pads)
    why = knobs.size_problem((oh, ow), o // oc, span, ic, oc) or knobs.loop_problem(padded)
    if why:
        raise ValueError(why)
    # flat: the output positions as one axis (the same bytes as [1, O/oc, OH, OW, oc]), so
    # register tiles run on across rows and only the layer's last tile is narrower
    oshape = (1, o // oc, oh * ow, oc) if knobs.flat else (1, o // oc, oh, ow, oc)
    dshape = (1, c, h, w) if nchw_input else (1, c // ic, h, w, ic)
    data = placeholder(dshape, "float32", "data")
    wgt = placeholder((o // oc, span, kh, kw, ic, oc), "float32", "weight")
    bias = placeholder((o,), "float32", "bias")
    args = [data, wgt, bias]
    res = None
    if epilogue.residual:
        res = placeholder(oshape, "float32", "residual")
        args.append(res)
    dp = _padded(data, pads, 0.0, "data.pad", ic if nchw_input else None)
    rco, ry, rx = reduce_axis(span, "rco"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    rci = reduce_axis(ic, "rci")

    def conv_fn(n, f, y, x, fi):
        cb = rco if groups is None else groups.start(f, ic, oc, c_blocks, span) + rco
        return te_sum(
            dp[n, cb, y * sh + ry * dh, x * sw + rx * dw, rci] * wgt[f, rco, ry, rx, rci, fi],
            [rco, ry, rx, rci],
        )

    def out_fn(*idx):
        r = res[idx] if res is not None else None
        return epilogue.apply(conv[idx], bias[idx[1] * oc + idx[-1]], r)

    # the accumulators cover whole register tiles: columns past the last are computed as a
    # copy of it (clamped index) and not stored, so the reduction has no bounds checks
    cols = oshape[-2]
    cols_pad = -(-cols // owb) * owb
    cshape = oshape[:-2] + (cols_pad, oc)

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
    _schedule_direct(s, conv, out, dp if dp is not data else None, knobs, oct_, ic)
    return s, args + [out]


def _schedule_direct(s, conv, out, dp, knobs: NchwcConvKnobs, oc_tile: int, ib: int) -> None:
    """The direct conv's schedule of ``knobs`` (checked by the caller): register tiles of
    ``out`` (``x`` split by ``ow_block``, ``fi`` by ``oc_tile``) inside the cache tiles, the
    accumulators ``conv`` computed per register tile (``ib`` input channels per block), the
    padding stage ``dp`` (None: none)."""
    s[conv].set_scope("local")
    xo, xi = s[out].split("x", knobs.ow_block)
    fo, fi = s[out].split("fi", oc_tile)
    outer_names, _ = knobs.present_loops()
    loops = {"f": "f", "y": "y", "x": xo}
    outer, inner = {}, {}
    for a, t in (("f", knobs.tile_f), ("y", knobs.tile_y), ("x", knobs.tile_x)):
        if a in outer_names:
            outer[a], inner[a] = s[out].split(loops[a], t) if t > 1 else (loops[a], None)
    order = [outer[a] for a in knobs.outer_order if a in outer]
    order += [inner[a] for a in knobs.inner_order if inner.get(a) is not None]
    s[out].reorder("n", *order, fo, xi, fi)
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
    )  # fmt: skip
    if knobs.unroll_ry:
        s[conv].unroll("ry")
    if knobs.unroll_rci > 1:
        s[conv].unroll(rci[-1])
    s[out].unroll(xi)
    s[out].vectorize(fi)
    if dp is not None:
        if knobs.pad_at == "inline":
            s[dp].compute_inline()
        else:
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


def _pool_schedule(red, out, parallel: bool):
    """A pool's schedule: the window reduction ``red`` kept local per output pixel, channels of
    the block as the vector, ``(channel block, row)`` in parallel."""
    s = create_schedule(out)
    s[red].set_scope("local")
    s[red].compute_at(s[out], "x")
    s[red].reorder("n", "ch", "y", "x", "ry", "rx", "ci")
    s[red].vectorize("ci")
    s[out].vectorize("ci")
    if parallel:
        s[out].parallel(s[out].fuse("ch", "y"))
    return s


def _pool_window(c, h, w, kernel, strides, pads, block):
    """A pool's input ``[1, C/c, H, W, c]``, output size, window axes and ``window(y, x)``:
    the input cell ``(yy, xx)`` the window at output ``(y, x)`` reads and whether it is inside
    the input (not padding)."""
    (kh, kw), (sh, sw) = kernel, strides
    data = placeholder((1, c // block, h, w, block), "float32", "data")
    t, lft = pads[0], pads[1]
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def window(y, x):
        yy, xx = y * sh + ry - t, x * sw + rx - lft
        return yy, xx, all_(yy >= 0, yy < h, xx >= 0, xx < w)

    return data, _conv_shape(h, w, kernel, strides, pads), (ry, rx), window


def max_pool_nchwc(c, h, w, kernel, strides, pads, block, parallel=True):
    """``(sch, [data, out])``: max pool of ``[1, C/c, H, W, c]``; padded cells never win."""
    data, (oh, ow), (ry, rx), window = _pool_window(c, h, w, kernel, strides, pads, block)

    def f(n, ch, y, x, ci):
        yy, xx, inside = window(y, x)
        return te_max(select(inside, data[n, ch, yy, xx, ci], const(F32_LOWEST)), [ry, rx])

    red = compute((1, c // block, oh, ow, block), f, name="pool")
    out = compute(red.shape, lambda n, ch, y, x, ci: red[n, ch, y, x, ci], name="out")
    return _pool_schedule(red, out, parallel), [data, out]


def avg_pool_nchwc(c, h, w, kernel, strides, pads, block, count_include_pad, parallel=True):
    """``(sch, [data, out])``: average pool of ``[1, C/c, H, W, c]``; padded cells add zero and
    count in the divisor only with ``count_include_pad`` (ONNX AveragePool)."""
    (kh, kw), (sh, sw) = kernel, strides
    t, lft = pads[0], pads[1]
    data, (oh, ow), (ry, rx), window = _pool_window(c, h, w, kernel, strides, pads, block)

    def f(n, ch, y, x, ci):
        yy, xx, inside = window(y, x)
        yc = minimum(maximum(yy, const(0)), const(h - 1))  # the read clamped into the input
        xc = minimum(maximum(xx, const(0)), const(w - 1))
        return te_sum(select(inside, data[n, ch, yc, xc, ci], const(0.0)), [ry, rx])

    red = compute((1, c // block, oh, ow, block), f, name="pool")

    def mean(n, ch, y, x, ci):
        if count_include_pad or not any(pads):
            return red[n, ch, y, x, ci] * const(1.0 / (kh * kw))
        y0, x0 = y * sh - t, x * sw - lft
        rows = minimum(y0 + kh, const(h)) - maximum(y0, const(0))
        cols = minimum(x0 + kw, const(w)) - maximum(x0, const(0))
        return red[n, ch, y, x, ci] / cast("float32", rows * cols)

    out = compute(red.shape, mean, name="out")
    return _pool_schedule(red, out, parallel), [data, out]


def global_avg_pool_nchwc(c, h, w, block):
    """``(sch, [data, out])``: mean over H, W of ``[1, C/c, H, W, c]`` -> ``[1, C/c, 1, 1, c]``
    (the same bytes as NCHW ``[1, C, 1, 1]``)."""
    data = placeholder((1, c // block, h, w, block), "float32", "data")
    ry, rx = reduce_axis(h, "ry"), reduce_axis(w, "rx")
    total = compute(
        (1, c // block, 1, 1, block),
        lambda n, ch, y, x, ci: te_sum(data[n, ch, ry, rx, ci], [ry, rx]),
        name="total",
    )
    scale = const(1.0 / (h * w))
    out = compute(total.shape, lambda n, ch, y, x, ci: total[n, ch, y, x, ci] * scale, "out")
    s = create_schedule(out)
    s[total].set_scope("local")
    s[total].compute_at(s[out], "x")
    s[total].reorder("n", "ch", "y", "x", "ry", "rx", "ci")
    s[total].vectorize("ci")
    s[out].vectorize("ci")
    return s, [data, out]


def pack_dense_weights(weight: np.ndarray, block: int) -> np.ndarray:
    """``[N, K]`` -> ``[N/b, K, b]`` column panels (float32, contiguous)."""
    n, k = weight.shape
    return np.ascontiguousarray(
        weight.astype(np.float32).reshape(n // block, block, k).transpose(0, 2, 1)
    )


def dense_nc(m, k, n, block, epilogue=Epilogue(), parallel=True, vector_lanes: int = 8):
    """``(sch, [x, weight, bias, (residual,) out])``: ``out[M, N] = epilogue(x @ W^T)`` with
    ``weight`` from :func:`pack_dense_weights`. A panel of ``block`` columns that holds several
    vectors of ``vector_lanes`` is computed as that many vectors side by side (one broadcast of
    ``x`` feeds independent FMA chains: 1000 outputs as panels of 5 x 8 ran the classifier of
    the zoo's models ~1.4x faster than panels of one vector on AVX2, one thread); LLVM is not
    given the panel as one vector (a 40-wide vector came out as shuffles and spills)."""
    if n % block:
        raise ValueError(f"dense: {n} outputs must be a multiple of the panel block {block}")
    x = placeholder((m, k), "float32", "x")
    wgt = placeholder((n // block, k, block), "float32", "weight")
    bias = placeholder((n,), "float32", "bias")
    args = [x, wgt, bias]
    res = placeholder((m, n), "float32", "residual") if epilogue.residual else None
    if res is not None:
        args.append(res)
    r = reduce_axis(k, "k")
    acc = compute(
        (m, n // block, block),
        lambda i, jo, ji: te_sum(x[i, r] * wgt[jo, r, ji], r),
        name="acc",
    )

    def out_fn(i, j):
        rv = res[i, j] if res is not None else None
        return epilogue.apply(acc[i, j // block, j % block], bias[j], rv)

    out = compute((m, n), out_fn, name="out")
    s = create_schedule(out)
    jo, ji = s[out].split("j", block)
    s[acc].set_scope("local")
    s[acc].compute_at(s[out], jo)
    s[acc].reorder("i", "jo", "k", "ji")
    for st, axis in ((s[acc], "ji"), (s[out], ji)):
        if block > vector_lanes and block % vector_lanes == 0:
            vecs, lanes = st.split(axis, vector_lanes)
            st.unroll(vecs)
            st.vectorize(lanes)
        else:
            st.vectorize(axis)
    if parallel:
        s[out].parallel(jo)
    return s, args + [out]


def blocked_shape(shape, block: int | None) -> tuple[int, ...]:
    """NCHW ``shape`` ``[N, C, H, W]`` in NCHW{block}c: ``[N, ceil(C / block), H, W, block]``
    (the channels past C, when the block does not divide C, are padding), or ``shape`` itself
    for block None."""
    n, c, h, w = shape
    return tuple(shape) if block is None else (n, -(-c // block), h, w, block)


def layout_transform(shape, src_block: int | None, dst_block: int | None, parallel=True):
    """``(sch, [data, out])`` between NCHW (block None) and NCHW{c}c layouts of an ``[1, C,
    H, W]`` tensor, or between two blocks (:func:`blocked_shape`; padded channels of the
    output are zero)."""
    _, c, h, w = shape

    def src_shape(b):
        return blocked_shape((1, c, h, w), b)

    data = placeholder(src_shape(src_block), "float32", "data")

    def read(ch, y, x):
        if src_block is None:
            return data[0, ch, y, x]
        return data[0, ch // src_block, y, x, ch % src_block]

    def read_padded(ch, y, x):  # zero past the C channels (the read clamped into them)
        return select(ch < const(c), read(minimum(ch, const(c - 1)), y, x), const(0.0))

    if dst_block is None:
        out = compute((1, c, h, w), lambda n, ch, y, x: read(ch, y, x), name="out")
        s = create_schedule(out)
        if w % 8 == 0:
            s[out].vectorize("x")
        if parallel:
            s[out].parallel(s[out].fuse("ch", "y"))
        return s, [data, out]
    b = dst_block
    rd = read if c % b == 0 else read_padded
    out = compute(src_shape(b), lambda n, co, y, x, ci: rd(co * b + ci, y, x), name="out")
    s = create_schedule(out)
    if parallel:
        s[out].parallel(s[out].fuse("co", "y"))
    return s, [data, out]


def concat_nchwc(parts: list[tuple[int, int]], h: int, w: int, block: int, parallel=True):
    """``(sch, [inputs..., out])``: the channel concat of NCHW{c}c tensors, ``parts`` their
    ``(channels, block)`` in order, into NCHW{block}c (:func:`blocked_shape` of the channel
    sum). An output channel ``ch`` of part ``j`` (at channel offset ``off``) reads channel
    ``ch - off`` of it, clamped into the part (every part is read; a select keeps one)."""
    ins = [
        placeholder(blocked_shape((1, cj, h, w), bj), "float32", f"in{j}")
        for j, (cj, bj) in enumerate(parts)
    ]
    total = sum(cj for cj, _ in parts)

    def f(n, co, y, x, ci):
        ch = co * block + ci
        val, off = None, total
        for (cj, bj), src in reversed(list(zip(parts, ins, strict=True))):
            off -= cj
            if bj == block and off % block == 0:  # aligned: whole vectors of the part
                cb = minimum(maximum(co - off // block, const(0)), const(-(-cj // bj) - 1))
                v = src[n, cb, y, x, ci]
            else:
                k = minimum(maximum(ch - off, const(0)), const(cj - 1))
                v = src[n, k // bj, y, x, k % bj]
            val = v if val is None else select(ch < const(off + cj), v, val)
        return val

    out = compute(blocked_shape((1, total, h, w), block), f, name="out")
    s = create_schedule(out)
    s[out].vectorize("ci")
    if parallel:
        s[out].parallel(s[out].fuse("co", "y"))
    return s, ins + [out]


def softmax_nc(m: int, n: int):
    """``(sch, [x, out])``: softmax over the last axis of ``x [M, N]`` (float32), the maximum
    subtracted first."""
    x = placeholder((m, n), "float32", "x")
    r1, r2 = reduce_axis(n, "j1"), reduce_axis(n, "j2")
    top = compute((m,), lambda i: te_max(x[i, r1], r1), name="top")
    e = compute((m, n), lambda i, j: exp(x[i, j] - top[i]), name="e")
    total = compute((m,), lambda i: te_sum(e[i, r2], r2), name="total")
    out = compute((m, n), lambda i, j: e[i, j] / total[i], name="out")
    return create_schedule(out), [x, out]


ELEMENTWISE = ("add", "relu", "clip")


def elementwise(op: str, size: int, attrs: dict):
    """``(sch, [a, (b,) out])`` of a float32 elementwise op over ``size`` elements (any layout:
    inputs and output share it): ``add``, ``relu``, ``clip`` (attrs ``min``, ``max``)."""
    if op not in ELEMENTWISE:
        raise ValueError(f"elementwise op {op!r} (allowed: {', '.join(ELEMENTWISE)})")
    a = placeholder((size,), "float32", "a")
    args = [a]
    if op == "add":
        b = placeholder((size,), "float32", "b")
        args.append(b)
        out = compute((size,), lambda i: a[i] + b[i], name="out")
    elif op == "relu":
        out = compute((size,), lambda i: maximum(a[i], const(0.0)), name="out")
    else:
        lo, hi = float(attrs["min"]), float(attrs["max"])
        out = compute((size,), lambda i: minimum(maximum(a[i], const(lo)), const(hi)), "out")
    s = create_schedule(out)
    lanes = 8 if size % 8 == 0 else 1
    if lanes > 1:
        io, ii = s[out].split("i", lanes)
        s[out].vectorize(ii)
    return s, args + [out]
