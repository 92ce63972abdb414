"""Constant operands that let the GEMM core do epilogue work the ALU would do more slowly.

Bias by GEMM: with the input row ``ones = (1, R, R, ..., R)`` (R = 127) and a weight block whose
row ``o`` holds digits ``d`` with ``d0 + R * (d1 + ... + d15) = bias[o]``, one GEMM pass adds the
bias (one cycle per output row instead of two for an ALU ADD with a register operand).
Residual by GEMM: a weight block ``2^k * I`` (k <= 6) adds ``residual << k`` in one pass.
"""

from __future__ import annotations

import numpy as np

RADIX = 127


def ones_row(block: int) -> np.ndarray:
    """(1, block) int8: the input row the bias digit blocks multiply."""
    row = np.full(block, RADIX, np.int8)
    row[0] = 1
    return row[None]


def bias_digit_blocks(bias: np.ndarray) -> np.ndarray | None:
    """(co_b, b) int32 biases -> (co_b, b_out, b_in) int8 digit blocks, or None if some bias is
    out of the representable range (about +-240,000 for b = 16)."""
    co_b, b = bias.shape
    flat = bias.astype(np.int64).reshape(-1)
    d0 = (flat + 63) % RADIX - 63  # in [-63, 63]
    rest = (flat - d0) // RADIX
    digits = np.zeros((flat.size, b), np.int64)
    digits[:, 0] = d0
    for k in range(1, b):
        take = np.clip(rest, -128, 127)
        digits[:, k] = take
        rest = rest - take
    if np.any(rest != 0):
        return None
    check = digits[:, 0] + RADIX * digits[:, 1:].sum(axis=1)
    assert np.array_equal(check, flat)
    return digits.reshape(co_b, b, b).astype(np.int8)


def identity_block(block: int, shift: int) -> np.ndarray:
    """(1, b, b) int8 weight block 2^min(shift, 6) * I."""
    return (np.eye(block, dtype=np.int64) << min(shift, 6)).astype(np.int8)[None]
