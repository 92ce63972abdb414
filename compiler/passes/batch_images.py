"""``batch_images``: a function lowered for one image, run on a batch of ``N`` in one call.

The one-image function's parameters that are per image (shape ``[1, ...]``) become ``[N, ...]``,
its global scratch buffers hold ``N`` images, and every read and write of them is offset to the
image being computed. A top-level ``parallel`` loop of ``M`` iterations becomes one loop of
``N x M`` (one launch for the batch: the threads share the images' iterations, and a batch has
one synchronisation per loop, not ``N``); any other top-level statement runs once per image, in
a serial loop, or in a parallel one (``parallel_images``) when it holds no parallel loop. A
function with more scratch than ``FUSED_SCRATCH_MAX_BYTES`` for the batch runs whole for each
image in turn instead.

Correct for any function whose images are independent: per-image buffers are read and written
only for their own image, shared parameters (weights, bias) are only read.
"""

from __future__ import annotations

import itertools

import numpy as np

from pyvta.compiler.ir.expr import Load, Var, transform
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

# A batch whose scratch (all images) is larger runs its images one after another through the
# whole function (one image's scratch, reused), not as fused loops: the Winograd template's
# transformed tiles (~400 KiB an image for 32 channels at 27 x 27) for 4 images interleaved ran
# 1.2-1.45x slower on one thread (Zen 4, 1 MiB of L2 a core).
FUSED_SCRATCH_MAX_BYTES = 512 * 1024


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
                return None if hit is None else Load(hit[0], n.index + img * hit[1])

            return transform(e, fn)

        def fstmt(st):
            hit = images.get(st.buffer) if isinstance(st, Store) else None
            if hit is None:
                return None
            return Store(hit[0], st.index + img * hit[1], st.value)

        return stmt_map(s, fstmt, fexpr)

    def top(s):
        if isinstance(s, Seq):
            return seq(*[top(c) for c in s.stmts])
        if isinstance(s, Allocate) and s.buffer.scope == "global":
            return Allocate(batched(s.buffer, param=False), top(s.body))
        img = Var(f"img{next(count)}")
        if isinstance(s, For) and s.kind == "parallel":
            fused = Var(f"{s.var.name}.img")
            # iteration fused = row x N + image: the image as the remainder of the loop's own
            # index lets LLVM bound the image's offsets (its quotient, fused // M, left each
            # column of a register tile its own address register: 1 FMA in 3, AVX-512)
            body = Let(img, fused % batch, Let(s.var, s.min + fused // batch, s.body))
            return For(fused, 0, s.extent * batch, "parallel", on_image(body, img))
        kind = "parallel" if parallel_images and not _has_parallel(s) else "serial"
        return For(img, 0, batch, kind, on_image(s, img))

    if batch * _scratch_bytes(func.body) > FUSED_SCRATCH_MAX_BYTES:
        img = Var("img")  # each image in turn through all the stages, one image's scratch
        return PrimFunc(func.name, params, For(img, 0, batch, "serial", on_image(func.body, img)))
    return PrimFunc(func.name, params, top(func.body), func.workspace)


def _scratch_bytes(s) -> int:
    """Bytes of the global scratch buffers allocated at the top of a function body."""
    if isinstance(s, Seq):
        return sum(_scratch_bytes(c) for c in s.stmts)
    if isinstance(s, Allocate) and s.buffer.scope == "global":
        b = s.buffer
        return b.size_elems * np.dtype(b.dtype).itemsize + _scratch_bytes(s.body)
    return 0
