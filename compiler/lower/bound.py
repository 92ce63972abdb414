"""Bound inference: the region of a producer that a consumer needs inside one of its loops.

A region is one ``(min_expr, extent)`` pair per tensor dimension; ``min_expr`` may refer to
loops outside the attach point, ``extent`` is a constant. Index expressions are affine in the
loop variables in the common case; anything else falls back to the whole dimension.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import IntImm, TensorRead, Var, children, free_vars
from pyvta.compiler.ir.printer import expr_str
from pyvta.compiler.ir.simplify import const_bound, from_linear, linear_form, simplify


def collect_reads(e, tensor) -> list[TensorRead]:
    out, stack = [], [e]
    while stack:
        n = stack.pop()
        if isinstance(n, TensorRead) and n.tensor is tensor:
            out.append(n)
        stack.extend(children(n))
    return out


def _dim_bound(idx, relaxed: dict, ranges: dict):
    """(symbolic_part, lo, hi) of one index, or None for 'unknown'."""
    terms, c = linear_form(simplify(idx, ranges))
    lo = hi = c
    sym = {}
    for key, (atom, k) in terms.items():
        if isinstance(atom, Var) and atom in relaxed:
            a, b = relaxed[atom]
        elif not (free_vars(atom) & set(relaxed)):
            sym[key] = (atom, k)
            continue
        else:
            ab = const_bound(atom, ranges)
            if ab is None:
                return None
            a, b = ab
        lo += min(k * a, k * b)
        hi += max(k * a, k * b)
    return from_linear((sym, 0)), lo, hi


def infer_region(body, tensor, relaxed: dict, ranges: dict) -> list[tuple]:
    """Region of ``tensor`` read by ``body`` when the ``relaxed`` loop variables (a map
    ``Var -> (lo, hi)``) sweep their ranges. Returns ``[(min_expr, extent), ...]``."""
    reads = collect_reads(body, tensor)
    all_ranges = {**ranges, **relaxed}
    region = []
    for d, n in enumerate(tensor.shape):
        full = (IntImm(0), n)
        parts = [_dim_bound(r.indices[d], relaxed, all_ranges) for r in reads]
        if not parts or any(p is None for p in parts):
            region.append(full)
            continue
        keys = {expr_str(p[0]) for p in parts}
        if len(keys) != 1:
            region.append(full)
            continue
        sym = parts[0][0]
        lo, hi = min(p[1] for p in parts), max(p[2] for p in parts)
        if isinstance(sym, IntImm):
            lo, hi = max(lo, 0), min(hi, n - 1)
        if hi - lo + 1 >= n:
            region.append(full)
            continue
        region.append((simplify(sym + lo, ranges), hi - lo + 1))
    return region
