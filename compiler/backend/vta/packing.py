"""numpy packing between the plain layouts (NCHW, OIHW) and the accelerator's blocked ones."""

from __future__ import annotations

import numpy as np

from pyvta.compiler.backend.vta.workload import WorkloadError
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


def check_int32(name: str, a) -> np.ndarray:
    """``a`` as int32 if it is an integer array whose values all fit; WorkloadError otherwise
    (a float would be truncated, an int64 beyond int32 would wrap)."""
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "iu":
        got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
        raise WorkloadError(
            f"{name} must be an integer array (int32 range), got {got}; round and convert it"
            " explicitly, e.g. np.round(b).astype(np.int32)"
        )
    int32 = np.iinfo(np.int32)
    if a.size and (a.min() < int32.min or a.max() > int32.max):
        raise WorkloadError(
            f"{name} holds values in [{a.min()}, {a.max()}], outside int32"
            f" [{int32.min}, {int32.max}]"
        )
    return a.astype(np.int32)


def pack_bias(b: np.ndarray, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """(O,) integer (within int32) -> (O/b, b) int32, zero-padded."""
    b = check_int32("bias", b)
    if b.ndim != 1:
        raise WorkloadError(f"bias must be 1-D (O,), got shape {list(b.shape)}")
    out = np.zeros(_pad_to(b.shape[0], block), np.int32)
    out[: b.shape[0]] = b
    return out.reshape(-1, block)
