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
