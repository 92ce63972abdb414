"""The VTA block layout: packing NCHW activations and OIHW weights into B-element blocks.

With block size ``B`` (``HwConfig.block_in == block_out``: 16 on the default config) and batch
block 1:

- activations ``(N, C, H, W)`` -> ``(N, ceil(C/B), H, W, 1, B)`` ("NCHW1n16c"),
- conv weights ``(O, I, KH, KW)`` -> ``(ceil(O/B), ceil(I/B), KH, KW, B, B)`` ("OIHW16o16i"),
- dense inputs ``(N, C)`` -> ``(N, ceil(C/B), 1, B)``, dense weights ``(O, I)`` -> ``(O/B, I/B, B, B)``,
- biases ``(O,)`` -> ``(ceil(O/B), B)``.

Channels are zero-padded up to a multiple of ``B``; unpacking drops the padding again.
"""

from __future__ import annotations

import numpy as np

from pyvta.isa import DEFAULT_CONFIG

# The default config's block; a compile for another config passes its ``HwConfig.block_in``.
BLOCK_ELEMS = DEFAULT_CONFIG.block_in


def _pad_axis(a: np.ndarray, axis: int, block: int) -> np.ndarray:
    extra = -a.shape[axis] % block
    if not extra:
        return a
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, extra)
    return np.pad(a, widths)


def pack_nchw(x: np.ndarray, block: int = BLOCK_ELEMS) -> np.ndarray:
    """``(N, C, H, W)`` -> ``(N, ceil(C/B), H, W, 1, B)``, zero-padded channels."""
    x = _pad_axis(x, 1, block)
    n, c, h, w = x.shape
    return np.ascontiguousarray(
        x.reshape(n, c // block, block, h, w, 1).transpose(0, 1, 3, 4, 5, 2)
    )


def unpack_nchw(x: np.ndarray, channels: int) -> np.ndarray:
    """``(N, C/B, H, W, 1, B)`` -> ``(N, channels, H, W)``, dropping padded channels."""
    n, cb, h, w, bn, blk = x.shape
    out = x.transpose(0, 4, 1, 5, 2, 3).reshape(n * bn, cb * blk, h, w)
    return np.ascontiguousarray(out[:, :channels])


def pack_nc(x: np.ndarray, block: int = BLOCK_ELEMS) -> np.ndarray:
    """``(N, C)`` -> ``(N, ceil(C/B), 1, B)``."""
    x = _pad_axis(x, 1, block)
    n, c = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, 1, block))


def unpack_nc(x: np.ndarray, channels: int) -> np.ndarray:
    """``(N, C/B, 1, B)`` -> ``(N, channels)``."""
    n, cb, bn, blk = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(n * bn, cb * blk)[:, :channels])


def pack_oihw(w: np.ndarray, block: int = BLOCK_ELEMS) -> np.ndarray:
    """``(O, I, KH, KW)`` -> ``(O/B, I/B, KH, KW, B_o, B_i)``, zero-padded O and I."""
    w = _pad_axis(_pad_axis(w, 0, block), 1, block)
    o, i, kh, kw = w.shape
    w = w.reshape(o // block, block, i // block, block, kh, kw)
    return np.ascontiguousarray(w.transpose(0, 2, 4, 5, 1, 3))


def block_groups(
    in_channels: int, out_channels: int, groups: int, block: int = BLOCK_ELEMS, min_out_blocks=1
) -> int:
    """The most block groups a conv of ``groups`` groups splits into: output blocks
    ``[k * co_b / G, ...)`` reading input blocks ``[k * ci_b / G, ...)`` only, every group's
    channels inside one block group (a depthwise conv of 64 channels: 4, one block each; 1 when
    the groups straddle the blocks: the whole conv as one block-diagonal GEMM); each block group
    with ``min_out_blocks`` output blocks at least (where they exist)."""
    ci_b, co_b = -(-in_channels // block), -(-out_channels // block)
    cpg, opg = in_channels // groups, out_channels // groups
    fits = [
        d
        for d in range(1, min(ci_b, co_b) + 1)
        if ci_b % d == 0 and co_b % d == 0 and (d == 1 or co_b // d >= min_out_blocks)
    ]
    for g in sorted(fits, reverse=True):
        cib, cob = ci_b // g, co_b // g
        if all(
            len({j * cpg // block // cib, ((j + 1) * cpg - 1) // block // cib,
                 j * opg // block // cob, ((j + 1) * opg - 1) // block // cob}) == 1
            for j in range(groups)
        ):  # fmt: skip
            return g
    return 1


def dense_group_oihw(w: np.ndarray, groups: int) -> np.ndarray:
    """Grouped weights ``(O, I/groups, KH, KW)`` -> the equal ungrouped ``(O, I, KH, KW)``."""
    o, cpg, kh, kw = w.shape
    opg = o // groups
    dense = np.zeros((o, cpg * groups, kh, kw), w.dtype)
    for j in range(groups):
        dense[j * opg : (j + 1) * opg, j * cpg : (j + 1) * cpg] = w[j * opg : (j + 1) * opg]
    return dense


def pack_group_oihw(
    w: np.ndarray, groups: int, block_groups: int, block: int = BLOCK_ELEMS
) -> np.ndarray:
    """Grouped weights ``(O, I/groups, KH, KW)`` -> ``(O/B, I/B/block_groups, KH, KW, B, B)``:
    each output block's weights over the input blocks of its block group (``block_groups``),
    zero outside its own group (block-diagonal)."""
    p = pack_oihw(dense_group_oihw(w, groups), block)
    ob, ib = p.shape[:2]
    cob, cib = ob // block_groups, ib // block_groups
    return np.ascontiguousarray(
        np.stack([p[k, k // cob * cib : (k // cob + 1) * cib] for k in range(ob)])
    )


def unpack_oihw(w: np.ndarray, out_channels: int, in_channels: int) -> np.ndarray:
    """Inverse of :func:`pack_oihw`."""
    ob, ib, kh, kw, bo, bi = w.shape
    w = w.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, ib * bi, kh, kw)
    return np.ascontiguousarray(w[:out_channels, :in_channels])


def pack_oi(w: np.ndarray, block: int = BLOCK_ELEMS) -> np.ndarray:
    """Dense weights ``(O, I)`` -> ``(O/B, I/B, B_o, B_i)``."""
    w = _pad_axis(_pad_axis(w, 0, block), 1, block)
    o, i = w.shape
    return np.ascontiguousarray(
        w.reshape(o // block, block, i // block, block).transpose(0, 2, 1, 3)
    )


def pack_bias(b: np.ndarray, block: int = BLOCK_ELEMS) -> np.ndarray:
    """``(O,)`` -> ``(O/B, B)``, zero-padded."""
    b = _pad_axis(b, 0, block)
    return np.ascontiguousarray(b.reshape(-1, block))


def fold_taps_blocks(in_channels: int, kernel, stride: int, block: int = BLOCK_ELEMS):
    """(row taps, channel blocks) of a conv with its taps folded (``pack_fold_taps``):
    ``ceil(KH / s)`` row taps over ``ceil(s * KW * C / B)`` blocks."""
    kh, kw = kernel
    return -(-kh // stride), -(-stride * kw * in_channels // block)


def folds_taps(in_channels: int, kernel, strides, block: int = BLOCK_ELEMS) -> bool:
    """Whether a conv's kernel taps are folded into its reduction axis (``pack_fold_taps``): its
    channels padded to blocks would waste more than 10% more of the GEMM's reduction than the
    folded form (the ResNet stem: 3 channels x 7x7 taps are 49 blocks padded, 4 x 3 = 12 folded)."""
    kh, kw = kernel
    if strides[0] != strides[1] or kh * kw == 1:
        return False
    taps, blocks = fold_taps_blocks(in_channels, kernel, strides[0], block)
    return -(-in_channels // block) * kh * kw > 1.1 * taps * blocks


def pack_fold_taps(x: np.ndarray, kernel, strides, pads, block: int = BLOCK_ELEMS) -> np.ndarray:
    """``(N, C, H, W)`` int8 -> ``(N, KB, Y, OW, 1, B)``: for a conv of stride ``s``, each row
    pair (``s`` input rows: space-to-depth along H) and output column holds the ``s x KW x C``
    values the column's taps read, in (dy, kw, c) order, zero-padded to ``KB`` blocks
    (``fold_taps_blocks``); ``Y = OH + ceil(KH / s) - 1``. The conv is then a ``ceil(KH/s) x 1``
    conv of stride 1 without padding over ``fold_oihw`` weights, whose row taps the
    accelerator's 2-D DMA loads (no host copy per tap). Host work: ``Y * OW * KB * B`` bytes
    written (the ResNet stem: 115 x 112 x 48 = 618 KB; packing its 3 channels to a block of
    16 would write 802 KB)."""
    (kh, kw), (s, _), (t, lft, b, r) = kernel, strides, pads
    n, c, h, w = x.shape
    oh, ow = (h + t + b - kh) // s + 1, (w + lft + r - kw) // s + 1
    taps, kb = fold_taps_blocks(c, kernel, s, block)
    y_rows = oh + taps - 1
    xp = np.zeros((n, s * y_rows, max(w + lft + r, s * (ow - 1) + kw), c), x.dtype)
    rows = min(h, s * y_rows - t)
    xp[:, t : t + rows, lft : lft + w] = x[:, :, :rows].transpose(0, 2, 3, 1)
    flat = np.zeros((n, y_rows, ow, kb * block), x.dtype)
    # one (kw, c) run of kw*c contiguous bytes per (row, column, dy): copied as one item
    run = np.dtype((np.void, kw * c * x.itemsize))
    st, ft = xp.strides, flat.strides
    src = np.ndarray((n, y_rows, ow, s), run, xp, 0, (st[0], s * st[1], s * st[2], st[1]))
    dst = np.ndarray((n, y_rows, ow, s), run, flat, 0, (ft[0], ft[1], ft[2], run.itemsize))
    dst[...] = src
    rows16 = flat.view(np.dtype((np.void, block))).reshape(n, y_rows, ow, kb)  # one block a row
    out = np.ascontiguousarray(rows16.transpose(0, 3, 1, 2))
    return out.view(x.dtype).reshape(n, kb, y_rows, ow, 1, block)


def fold_oihw(w: np.ndarray, stride: int, block: int = BLOCK_ELEMS) -> np.ndarray:
    """``(O, I, KH, KW)`` -> packed ``(O/B, KB, ceil(KH/s), 1, B, B)`` weights over
    ``pack_fold_taps``'s (dy, kw, c) channels: ``w2[o, (dy, kw, c), j] = w[o, c, s*j + dy, kw]``
    (zero where ``s*j + dy >= KH``)."""
    o, c, kh, kw = w.shape
    taps, _ = fold_taps_blocks(c, (kh, kw), stride, block)
    wp = np.zeros((o, taps * stride, kw, c), w.dtype)
    wp[:, :kh] = w.transpose(0, 2, 3, 1)
    w2 = wp.reshape(o, taps, stride * kw * c).transpose(0, 2, 1)[..., None]  # (O, s*KW*C, T, 1)
    return pack_oihw(np.ascontiguousarray(w2), block)
