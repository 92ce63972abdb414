"""From a stage's split / fuse relations to loop extents and root-axis index expressions."""

from __future__ import annotations

from pyvta.compiler.ir.expr import IntImm
from pyvta.compiler.schedule.schedule import Fuse, Split


def leaf_extents(stage, root_extents: dict) -> dict:
    """Extent of every axis of ``stage`` given the extents of its root axes."""
    ext = dict(root_extents)
    for r in stage.relations:
        if isinstance(r, Split):
            e = ext[r.parent]
            if r.factor is not None:
                ext[r.inner], ext[r.outer] = r.factor, -(-e // r.factor)
            else:
                ext[r.outer], ext[r.inner] = r.nparts, -(-e // r.nparts)
        elif isinstance(r, Fuse):
            ext[r.fused] = ext[r.outer] * ext[r.inner]
    return ext


def root_values(stage, ext: dict) -> dict:
    """Expression of every axis in terms of the leaf loop variables (``LoopAxis -> Expr``)."""
    val = {a: a.var for a in stage.leaf}
    for r in reversed(stage.relations):
        if isinstance(r, Split):
            val[r.parent] = val[r.outer] * IntImm(ext[r.inner]) + val[r.inner]
        elif isinstance(r, Fuse):
            n = IntImm(ext[r.inner])
            val[r.outer] = val[r.fused] // n
            val[r.inner] = val[r.fused] % n
    return val
