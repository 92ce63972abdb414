"""Index arithmetic of the CPU code generator emitted once: an unrolled tile's loads and
stores index their buffers by the same sum of loop variables times constants, plus a constant
of their own. Each prefix of that sum is emitted once where it dominates its uses
(``FnState.affine_index``, forgotten at the end of a loop's body or a branch) and, before a
branch, the parts its arms will need (a guarded column of an unrolled tile: one branch each).
LLVM would find the same values itself, but from IR of about twice the instructions: the
time to generate and optimise a large kernel is mostly its size. (What LLVM makes of the
smaller IR differs in places: on 36 tuning configs the kernels ran 1.05x faster in the
geomean, 0.77-2.89x; docs/measurements.md.)

A mixin of :class:`~pyvta.compiler.backend.llvm.codegen.CodeGen`: it uses the generator's
``expr``, ``_is_vec``, ``lanes`` and ``st``.
"""

from __future__ import annotations

from llvmlite import ir

from pyvta.compiler.backend.llvm.frame import I32
from pyvta.compiler.backend.llvm.vector import walk_exprs, walk_stmts
from pyvta.compiler.ir.expr import INDEX_DTYPE, BinOp, Load, Var, int_range
from pyvta.compiler.ir.simplify import linear_form
from pyvta.compiler.ir.stmt import For, Let, Store, stmt_exprs

AFFINE_OPS = ("+", "-", "*")


def affine_terms(e) -> tuple[list, int] | None:
    """``([(var, coef)], const)`` of an int32 ``+ - *`` whose linear form is variables times
    constants that fit in int32; None for anything else (a load in it, a division)."""
    if type(e) is not BinOp or e.op not in AFFINE_OPS or e.dtype != INDEX_DTYPE:
        return None
    terms, const = linear_form(e)
    pairs = list(terms.values())
    if any(type(v) is not Var for v, _ in pairs):
        return None
    lowest, highest = int_range(INDEX_DTYPE)
    if not all(lowest <= c <= highest for c in (const, *(c for _, c in pairs))):
        return None
    return pairs, const


class AffineIndices:
    def _affine(self, e: BinOp):
        """``e`` through ``FnState.affine_index`` when it is an index (``affine_terms``) of
        scalar variables, none of them the vector lane; else None."""
        found = affine_terms(e)
        if found is None:
            return None
        pairs, const = found
        if not pairs:  # a constant (a lane's offset, 0 substituted for the lane)
            return ir.Constant(I32, const)
        lane = self.lanes[0] if self.lanes is not None else None
        if any(v is lane for v, _ in pairs):
            return None
        values = [self.expr(v) for v, _ in pairs]
        if any(self._is_vec(v) for v in values):
            return None
        return self.st.affine_index(pairs, const, values)

    def _hoist_index_parts(self, stmts=(), exprs=()) -> None:
        """Before a branch to ``stmts`` or ``exprs``: emit here each index's longest prefix of
        variables that neither they bind (their loops', lets') nor the vector lane is, so
        that the arms find it (``FnState.scope`` gives each arm what is emitted before)."""
        inner = {s.var for st in stmts for s in walk_stmts(st) if isinstance(s, For | Let)}
        if self.lanes is not None:
            inner.add(self.lanes[0])
        indices = [s.index for st in stmts for s in walk_stmts(st) if isinstance(s, Store)]
        roots = [e for st in stmts for s in walk_stmts(st) for e in stmt_exprs(s)]
        for root in (*roots, *exprs):
            indices.extend(x.index for x in walk_exprs(root) if type(x) is Load)
        for index in indices:
            found = affine_terms(index)
            if found is None or not found[0]:
                continue
            prefix = []
            for v, c in found[0]:
                if v in inner or v not in self.st.vars:
                    break
                prefix.append((v, c))
            if prefix:
                values = [self.expr(v) for v, _ in prefix]
                if not any(self._is_vec(v) for v in values):
                    self.st.affine_index(prefix, 0, values)
