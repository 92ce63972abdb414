"""Zero (or constant) padding of any tensor."""

from __future__ import annotations

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.te.expr_ops import select
from pyvta.compiler.te.tensor import Tensor, compute


def pad(data: Tensor, pad_before, pad_after=None, value=0, name: str = "pad") -> Tensor:
    """``out[i] = data[i - pad_before]`` inside, ``value`` outside; one pad per dimension."""
    pad_after = pad_before if pad_after is None else pad_after
    if len(pad_before) != data.ndim or len(pad_after) != data.ndim:
        raise ValueError(
            f"pad needs {data.ndim} before/after values for {data.name}{list(data.shape)}, "
            f"got {list(pad_before)} / {list(pad_after)}"
        )
    if any(p < 0 for p in list(pad_before) + list(pad_after)):
        raise ValueError("pad amounts must be non-negative")
    shape = [d + a + b for d, a, b in zip(data.shape, pad_before, pad_after, strict=True)]
    fill = const(float(value) if data.dtype == "float32" else int(value), data.dtype)

    def f(*idx):
        conds, src = [], []
        for i, d, b, a in zip(idx, data.shape, pad_before, pad_after, strict=True):
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < d + b)
            src.append(i - b if b else i)
        if not conds:
            return data(*src)
        return select(all_(*conds), data(*src), fill)

    return compute(shape, f, name=name)
