"""Grouped convs in the direct NCHWc template: which input blocks or channels each output
block reads (:class:`GroupSpan`), and the weights packed for it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.ir.expr import const
from pyvta.compiler.te.expr_ops import minimum

# Output blocks a grouped conv's exact tile may span (``GroupSpan.exact_tile``): its
# accumulators are that many blocks' per column, so longer repeats leave too few columns. Zen 5,
# 2 threads, kernels alone, against the span's untuned tile: groups of 40 (5 blocks, 4-5
# columns) 240 at 28 x 28 1.65x, 560 at 14 1.30x, 1360 at 7 1.54x, 80 at 56 (one tile) 0.93x;
# RegNetX-4.0GF 1.09x paired (``benchmarks/cpu_grouped.py``). Groups of 56 (7 blocks, 4
# columns) 224 at 28 0.86x, 448 at 14 1.04x, 896 at 7 1.57x: not taken
MAX_EXACT_TILE = 5


@dataclass(frozen=True)
class GroupSpan:
    """A grouped conv in the direct template: ``group`` groups of ``group_in`` input and
    ``group_out`` output channels (the layer's own counts; padded channels past them belong to
    no group). Output block ``f`` reads the ``count`` input blocks from :meth:`start` on, those
    its groups' channels fall in (fewer than all: group 4 reads about a quarter); the template
    skips those past the first :meth:`needed` (zero weights: the span is the most any block
    reads)."""

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

    def needed(self, f, ic: int, oc: int, c_blocks: int, count: int):
        """How many of the ``count`` blocks from :meth:`start` hold channels of output block
        ``f``'s groups (an index expression; the rest have zero weights)."""
        g1 = minimum(((f + 1) * oc - 1) // const(self.group_out), const(self.group - 1))
        last = ((g1 + 1) * self.group_in - 1) // const(ic)
        return last - self.start(f, ic, oc, c_blocks, count) + 1

    def reads(self, f: int, ic: int, oc: int, c_blocks: int, count: int) -> range:
        """The input blocks output block ``f`` reads: the first :meth:`needed` of the ``count``
        from :meth:`start` on (as the template's reduction skips the rest)."""
        first = self.start(f, ic, oc, c_blocks, count)
        return range(first, min(first + count, self._first_last(f, ic, oc)[1] + 1))

    def exact_tile(self, ib: int, ob: int, o_blocks: int) -> int | None:
        """The output blocks of a register tile in which the template reads exactly each
        output channel's ``group_in`` input channels (:func:`conv2d_nchwc` with ``oc_blocks``
        this many): the blocks over which the groups' boundaries repeat (``group_out`` 24 in
        blocks of 16: 3 blocks, 2 groups; the middle block's lanes blend two groups' broadcast
        inputs). None where the span reads no zeros (groups of whole blocks), where a block
        holds more than two groups' channels (``group_out`` below the block), or the repeat
        is longer than ``MAX_EXACT_TILE`` blocks or does not divide the ``o_blocks``."""
        if self.group_in % ib == 0 and self.group_out % ob == 0:
            return None
        period = math.lcm(self.group_out, ob) // ob
        if self.group_out < ob or period > MAX_EXACT_TILE or o_blocks % period:
            return None
        return period

    def reads_exactly(self, oc_blocks: int, ib: int, ob: int, o_blocks: int) -> bool:
        """Whether a tile of ``oc_blocks`` output blocks is :meth:`exact_tile` (the template
        then reads a channels-last input and weights of :meth:`pack_exact`)."""
        return oc_blocks == self.exact_tile(ib, ob, o_blocks)

    def pack_exact(self, w: np.ndarray, ob: int) -> np.ndarray:
        """The block-diagonal weights ``[O, C, KH, KW]`` -> each output channel's own group's
        ``[O/ob, group_in, KH, KW, ob]`` (the exact form; padded output channels past the
        groups read the last group's channels, with zero weights)."""
        o = w.shape[0]
        first = np.minimum(np.arange(o) // self.group_out, self.group - 1) * self.group_in
        own = w[np.arange(o)[:, None], first[:, None] + np.arange(self.group_in)[None, :]]
        blocked = own.reshape(o // ob, ob, self.group_in, *w.shape[2:])
        return np.ascontiguousarray(blocked.transpose(0, 2, 3, 4, 1).astype(np.float32))

    def unpack_exact(self, packed: np.ndarray, c: int) -> np.ndarray:
        """:meth:`pack_exact`'s inverse: ``[O/ob, group_in, KH, KW, ob]`` -> the
        block-diagonal ``[O, C, KH, KW]``."""
        o_blocks, gin, kh, kw, ob = packed.shape
        o = o_blocks * ob
        own = packed.transpose(0, 4, 1, 2, 3).reshape(o, gin, kh, kw)
        first = np.minimum(np.arange(o) // self.group_out, self.group - 1) * self.group_in
        full = np.zeros((o, c, kh, kw), packed.dtype)
        full[np.arange(o)[:, None], first[:, None] + np.arange(gin)[None, :]] = own
        return full

    def pack(self, packed: np.ndarray) -> np.ndarray:
        """:func:`pack_conv_weights` of the block-diagonal weights ``[O/oc, C/ic, KH, KW, ic,
        oc]`` -> the ``count`` input blocks each output block reads ``[O/oc, count, ...]``."""
        o_blocks, c_blocks, _, _, ic, oc = packed.shape
        n = self.count(ic, oc, c_blocks, o_blocks)
        rows = [packed[f, self.start(f, ic, oc, c_blocks, n) :][:n] for f in range(o_blocks)]
        return np.ascontiguousarray(np.stack(rows))
