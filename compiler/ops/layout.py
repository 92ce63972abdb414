"""Layout packing: NCHW <-> NCHW{c}c data, OIHW -> blocked weights."""

from __future__ import annotations

from pyvta.compiler.te.tensor import Tensor, compute


def _check_block(name: str, n: int, block: int) -> None:
    if isinstance(block, bool) or not isinstance(block, int) or block <= 0 or n % block:
        raise ValueError(f"{name} block {block!r} must be a positive int dividing {n}")


def pack_nchwc(data: Tensor, block: int, name: str = "pack") -> Tensor:
    """NCHW ``[N, C, H, W]`` -> NCHW{block}c ``[N, C/block, H, W, block]``."""
    n, c, h, w = data.shape
    _check_block("channel", c, block)
    return compute(
        (n, c // block, h, w, block),
        lambda nn, co, hh, ww, ci: data(nn, co * block + ci, hh, ww),
        name=name,
    )


def unpack_nchwc(data: Tensor, name: str = "unpack") -> Tensor:
    """NCHW{c}c ``[N, C/c, H, W, c]`` -> NCHW ``[N, C, H, W]``."""
    n, co, h, w, ci = data.shape
    return compute(
        (n, co * ci, h, w), lambda nn, c, hh, ww: data(nn, c // ci, hh, ww, c % ci), name=name
    )


def pack_oihw(kernel: Tensor, o_block: int, i_block: int, inner: str = "oi", name: str = "packw"):
    """OIHW ``[O, I, KH, KW]`` -> OIHW{o}o{i}i ``[O/o, I/i, KH, KW, o, i]`` (``inner="oi"``) or
    OIHW{i}i{o}o ``[O/o, I/i, KH, KW, i, o]`` (``inner="io"``, the CPU-friendly order)."""
    o, i, kh, kw = kernel.shape
    _check_block("output-channel", o, o_block)
    _check_block("input-channel", i, i_block)
    if inner == "oi":
        return compute(
            (o // o_block, i // i_block, kh, kw, o_block, i_block),
            lambda a, b, y, x, oo, ii: kernel(a * o_block + oo, b * i_block + ii, y, x),
            name=name,
        )
    if inner == "io":
        return compute(
            (o // o_block, i // i_block, kh, kw, i_block, o_block),
            lambda a, b, y, x, ii, oo: kernel(a * o_block + oo, b * i_block + ii, y, x),
            name=name,
        )
    raise ValueError(f"inner must be 'oi' or 'io', got {inner!r}")
