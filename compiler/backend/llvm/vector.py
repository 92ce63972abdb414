"""Analysis for explicit SIMD code generation: how an index moves with the vector lane, and
whether a ``vectorized`` loop body can be emitted as straight-line vector code."""

from __future__ import annotations

from pyvta.compiler.ir.expr import IntImm, Load, Select, children, free_vars, substitute
from pyvta.compiler.ir.simplify import linear_form, simplify, var_coef
from pyvta.compiler.ir.stmt import Allocate, For, IfThenElse, Store, stmt_children, stmt_exprs


def walk_stmts(s):
    yield s
    for c in stmt_children(s):
        yield from walk_stmts(c)


def walk_exprs(e):
    yield e
    for c in children(e):
        yield from walk_exprs(c)


def stmt_exprs_deep(s):
    for st in walk_stmts(s):
        for e in stmt_exprs(st):
            yield from walk_exprs(e)


def lane_coef(index, var) -> int | None:
    """Coefficient of ``var`` in affine ``index`` (0 when absent), None when not affine."""
    if var not in free_vars(index):
        return 0
    return var_coef(linear_form(simplify(index)), var)


def has_load(e) -> bool:
    return any(isinstance(x, Load) for x in walk_exprs(e))


MAX_SHUFFLED_STRIDE = 4  # strided vector loads up to this stride: one wide load + a shuffle
MAX_ROW_STRIDE = 16  # longer strides: a load of whole rows (row_column), up to rows this long


def row_column(index, var, stride: int, buffer) -> int | None:
    """Where lane ``var``'s strided load ``buffer[index]`` (``stride`` = its coefficient)
    reads rows of ``stride`` elements, the innermost axis of a ``global`` buffer, and the
    index's other terms are whole rows plus a constant: the column ``r`` it reads in each (the
    load is column ``r`` of the ``n`` consecutive rows its lanes fall in, all inside the
    buffer). Else None. Columns of an unrolled loop over ``r`` read the same rows. (A local
    buffer, a register tile, is left to per-lane reads: a wide load of it would keep LLVM
    from holding its elements in registers: int8 convs' accumulators spilled.)"""
    if (
        not MAX_SHUFFLED_STRIDE < stride <= MAX_ROW_STRIDE
        or buffer.shape[-1] != stride
        or buffer.scope != "global"
    ):
        return None
    terms, const = linear_form(simplify(index))
    if any(c % stride for atom, c in terms.values() if atom is not var):
        return None
    return const % stride


MAX_GATHER_ROW = 64  # a lane permutation's row, at most this many elements (one wide load)


def row_gather(index, var, lanes: int, buffer) -> tuple[int, tuple[int, ...]] | None:
    """Where lane ``var``'s load ``buffer[index]``, not affine in it (a permutation of the
    lanes, such as a narrow group's input channel ``(fi // g) * g + j``), reads for each of
    its ``lanes`` lanes an element of the same row of a ``global`` buffer's innermost axis
    (at most ``MAX_GATHER_ROW`` elements; the index's other terms whole rows plus a
    constant): ``(col0, columns)``, lane 0 reading column ``col0`` of that row and lane ``k``
    column ``columns[k]``. Else None. The load is one load of the row and a shuffle; the loads
    of an unrolled loop's other permutations of the same row load it once."""
    row = buffer.shape[-1]
    if buffer.scope != "global" or not isinstance(row, int) or row > MAX_GATHER_ROW:
        return None
    base = simplify(substitute(index, {var: IntImm(0)}))
    terms, const = linear_form(base)
    if any(c % row for _, c in terms.values()):
        return None
    col0 = const % row
    columns = []
    for k in range(lanes):
        d = simplify(substitute(index, {var: IntImm(k)}) - base)
        if not isinstance(d, IntImm) or not 0 <= col0 + d.value < row:
            return None
        columns.append(col0 + d.value)
    return col0, tuple(columns)


def masked_load_ok(e: Select, var) -> bool:
    """``select(c, A[stride 1..4], no-loads)``: vectorizable as one masked vector load (the
    code generator emits one where ``c`` varies over the lanes; else a branch, ``CodeGen.select``)."""
    return (
        isinstance(e.t, Load)
        and not has_load(e.t.index)
        and lane_coef(e.t.index, var) in range(1, MAX_SHUFFLED_STRIDE + 1)
        and not has_load(e.f)
        and not has_load(e.cond)
    )


def lane_blend_ok(e: Select, var) -> bool:
    """``select(c, a, b)`` whose sides do not vary over the lanes (a straddling grouped conv's
    two groups' input values): both read, broadcast and blended by the lanes' condition. Both
    sides are loaded for every lane, so their reads must be inside their buffers whatever the
    condition (the template's to ensure)."""
    return var not in free_vars(e.t) and var not in free_vars(e.f)


def vectorizable(s: For) -> bool:
    """Whether loop ``s`` can be emitted as straight-line SIMD code (else: a scalar loop)."""
    if not isinstance(s.extent, IntImm) or not isinstance(s.min, IntImm) or s.min.value:
        return False
    v = s.var
    for st in walk_stmts(s.body):
        if isinstance(st, For | Allocate):
            return False
        if isinstance(st, IfThenElse) and v in free_vars(st.cond):
            return False
        if isinstance(st, Store) and lane_coef(st.index, v) == 0 and v in free_vars(st.value):
            return False
    for e in stmt_exprs_deep(s.body):
        if (
            isinstance(e, Select)
            and v in free_vars(e.cond)
            and not masked_load_ok(e, v)
            and not lane_blend_ok(e, v)
            and (has_load(e.t) or has_load(e.f))
        ):
            return False
    return True
