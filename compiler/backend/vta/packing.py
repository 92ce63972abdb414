"""numpy packing between the plain layouts (NCHW, OIHW) and the accelerator's blocked ones."""

from __future__ import annotations

import numpy as np

from pyvta.isa import DEFAULT_CONFIG

DEFAULT_BLOCK = DEFAULT_CONFIG.block_in  # a config's own block: ``HwConfig.block_in``


def _pad_to(n: int, block: int) -> int:
    return -(-n // block) * block


def pack_data(x: np.ndarray, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """(C, H, W) or (1, C, H, W) -> (C/b, H, W, b), channels zero-padded to the block."""
    if x.ndim == 4:
        if x.shape[0] != 1:
            raise ValueError(f"batch must be 1, got {x.shape[0]}")
        x = x[0]
    c, h, w = x.shape
    cp = _pad_to(c, block)
    xp = np.zeros((cp, h, w), x.dtype)
    xp[:c] = x
    return np.ascontiguousarray(xp.reshape(cp // block, block, h, w).transpose(0, 2, 3, 1))


def unpack_data(xp: np.ndarray, channels: int) -> np.ndarray:
    """(C/b, H, W, b) -> (1, C, H, W), dropping the channel padding."""
    cb, h, w, b = xp.shape
    return np.ascontiguousarray(xp.transpose(0, 3, 1, 2).reshape(1, cb * b, h, w)[:, :channels])


def pack_weights(w: np.ndarray, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """(O, I, KH, KW) -> (O/b, I/b, KH, KW, b_out, b_in), zero-padded channels."""
    o, i, kh, kw = w.shape
    op, ip = _pad_to(o, block), _pad_to(i, block)
    wp = np.zeros((op, ip, kh, kw), w.dtype)
    wp[:o, :i] = w
    return np.ascontiguousarray(
        wp.reshape(op // block, block, ip // block, block, kh, kw).transpose(0, 2, 4, 5, 1, 3)
    )


def pack_bias(b: np.ndarray, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """(O,) int32 -> (O/b, b), zero-padded."""
    out = np.zeros(_pad_to(b.shape[0], block), np.int32)
    out[: b.shape[0]] = b
    return out.reshape(-1, block)
