"""``batch_images``: a function lowered for one image, run on a batch of ``N`` in one call.

The one-image function's parameters that are per image (shape ``[1, ...]``) become ``[N, ...]``,
its global scratch buffers hold ``N`` images, and every read and write of them is offset to the
image being computed. A top-level ``parallel`` loop of ``M`` iterations becomes one loop of
``N x M`` (one launch for the batch: the threads share the images' iterations, and a batch has
one synchronisation per loop, not ``N``); any other top-level statement runs once per image, in
a serial loop, or in a parallel one (``parallel_images``) when it holds no parallel loop.

Correct for any function whose images are independent: per-image buffers are read and written
only for their own image, shared parameters (weights, bias) are only read.
"""

from __future__ import annotations

import itertools

from pyvta.compiler.ir.expr import Load, Var, const, transform
from pyvta.compiler.ir.stmt import (
    Allocate,
    For,
    Let,
    PrimFunc,
    Seq,
    Store,
    seq,
    stmt_children,
    stmt_map,
)


def _has_parallel(s) -> bool:
    if isinstance(s, For) and s.kind == "parallel":
        return True
    return any(_has_parallel(k) for k in stmt_children(s))


def batch_images(
    func: PrimFunc, batch: int, per_image: list[bool], parallel_images: bool = False
) -> PrimFunc:
    """``func`` (lowered for one image) over ``batch`` images; ``per_image[i]``: parameter ``i``
    has the image as its first axis (extent 1 in ``func``); the others are shared."""
    if len(per_image) != len(func.params):
        raise ValueError(f"per_image has {len(per_image)} flags for {len(func.params)} params")
    if batch == 1:
        return func
    images: dict = {}  # one-image buffer -> (batched buffer, elements of one image)
    count = itertools.count()

    def batched(buf, param: bool = True):
        """``buf`` for the batch: a parameter's first axis (1) becomes ``batch``; a scratch
        buffer gets a new first axis of ``batch``."""
        if param and buf.shape[0] != 1:
            raise ValueError(f"per-image parameter {buf.name} {buf.shape} must have 1 image first")
        shape = (batch, *buf.shape[1:]) if param else (batch, *buf.shape)
        nb = type(buf)(buf.name, buf.dtype, shape, buf.scope)
        images[buf] = (nb, buf.size_elems)
        return nb

    params = [batched(b) if p else b for b, p in zip(func.params, per_image, strict=True)]

    def on_image(s, img):
        """``s`` reading and writing image ``img``'s part of the per-image buffers."""

        def fexpr(e):
            def fn(n):
                hit = images.get(n.buffer) if isinstance(n, Load) else None
                return None if hit is None else Load(hit[0], n.index + img * const(hit[1]))

            return transform(e, fn)

        def fstmt(st):
            hit = images.get(st.buffer) if isinstance(st, Store) else None
            if hit is None:
                return None
            return Store(hit[0], st.index + img * const(hit[1]), st.value)

        return stmt_map(s, fstmt, fexpr)

    def top(s):
        if isinstance(s, Seq):
            return seq(*[top(c) for c in s.stmts])
        if isinstance(s, Allocate) and s.buffer.scope == "global":
            return Allocate(batched(s.buffer, param=False), top(s.body))
        img = Var(f"img{next(count)}")
        if isinstance(s, For) and s.kind == "parallel":
            fused = Var(f"{s.var.name}.img")
            body = Let(img, fused // s.extent, Let(s.var, s.min + fused % s.extent, s.body))
            return For(fused, 0, s.extent * batch, "parallel", on_image(body, img))
        kind = "parallel" if parallel_images and not _has_parallel(s) else "serial"
        return For(img, 0, batch, kind, on_image(s, img))

    return PrimFunc(func.name, params, top(func.body), func.workspace)
