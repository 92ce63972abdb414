"""Simplification of integer index expressions.

Affine sub-expressions (sums of ``var * const``) are put in a canonical form (terms in order of
first appearance, constant last); ``x // c`` and ``x % c`` are resolved when the known ranges
of the variables prove the quotient, and comparisons, ``min`` and ``max`` fold when the ranges
decide them. ``ranges`` maps ``Var`` to an inclusive ``(lo, hi)`` pair of ints.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import (
    LEAF_TYPES,
    BinOp,
    Cast,
    Compare,
    Expr,
    FloatImm,
    IntImm,
    Not,
    Select,
    Var,
    children,
    free_vars,
    is_int,
    rebuild,
    wrap_int,
)

Linear = tuple[dict, int]  # ({key: (atom, coef)}, constant); atoms are Vars or non-affine parts


def _atom_key(e: Expr) -> str:
    from pyvta.compiler.ir.printer import expr_str

    return e.name + "#" + str(id(e)) if isinstance(e, Var) else expr_str(e)


def linear_form(e: Expr) -> Linear:
    """``e`` as ``sum(coef * atom) + const``; an atom is a ``Var`` or a sub-expression that is
    not ``+``, ``-`` or ``*`` by a constant (kept whole)."""
    if isinstance(e, IntImm) and is_int(e.dtype):
        return {}, e.value
    if isinstance(e, BinOp):
        if e.lin is None:
            e.lin = _linear_form_of_binop(e)
        return e.lin
    return {_atom_key(e): (e, 1)}, 0


def _linear_form_of_binop(e: BinOp) -> Linear:
    """``linear_form`` of a ``BinOp`` (its callers do not change the dicts it returns)."""
    if e.op in ("+", "-"):
        (ta, ca), (tb, cb) = linear_form(e.a), linear_form(e.b)
        sign = 1 if e.op == "+" else -1
        terms = dict(ta)
        for k, (atom, c) in tb.items():
            terms[k] = (atom, terms.get(k, (atom, 0))[1] + sign * c)
        return {k: v for k, v in terms.items() if v[1] != 0}, ca + sign * cb
    if e.op == "*":
        la, lb = linear_form(e.a), linear_form(e.b)
        if la[0] and not lb[0]:
            la, lb = lb, la
        if not la[0]:
            k = la[1]
            return {key: (a, c * k) for key, (a, c) in lb[0].items() if c * k != 0}, lb[1] * k
    return {_atom_key(e): (e, 1)}, 0


def var_coef(lin: Linear, var: Var) -> int | None:
    """Coefficient of ``var`` in ``lin``; None when ``var`` also occurs inside an atom."""
    coef = 0
    for atom, c in lin[0].values():
        if atom is var:
            coef = c
        elif var in free_vars(atom):
            return None
    return coef


def is_affine(lin: Linear) -> bool:
    return all(isinstance(a, Var) for a, _ in lin[0].values())


def from_linear(lin: Linear, dtype: str = "int32") -> Expr:
    """The canonical expression of ``lin`` (its ``linear_form`` is ``lin``: kept on it)."""
    out = _from_linear(lin, dtype)
    if isinstance(out, BinOp):
        out.lin = lin
    return out


def _canon(op: str, a: Expr, b: Expr) -> BinOp:
    """A node of ``from_linear``'s output: each is the canonical form of its own linear form
    (its terms, in order, and no constant but the root's), so ``simplify`` keeps it as is."""
    out = BinOp(op, a, b)
    out.canon = True
    return out


def _from_linear(lin: Linear, dtype: str) -> Expr:
    terms, c = lin
    out: Expr | None = None
    for v, k in terms.values():
        if out is None:
            out = v if k == 1 else _canon("*", v, IntImm(k, dtype))
        elif k > 0:
            out = _canon("+", out, v if k == 1 else _canon("*", v, IntImm(k, dtype)))
        else:
            out = _canon("-", out, v if k == -1 else _canon("*", v, IntImm(-k, dtype)))
    if out is None:
        return IntImm(c, dtype)
    if c > 0:
        return _canon("+", out, IntImm(c, dtype))
    if c < 0:
        return _canon("-", out, IntImm(-c, dtype))
    return out


def linear_bound(lin: Linear, ranges: dict) -> tuple[int, int] | None:
    terms, c = lin
    lo = hi = c
    for atom, k in terms.values():
        if isinstance(atom, Var):
            if atom not in ranges:
                return None
            a, b = ranges[atom]
        else:
            ab = _nonlinear_bound(atom, ranges)
            if ab is None:
                return None
            a, b = ab
        lo += min(k * a, k * b)
        hi += max(k * a, k * b)
    return lo, hi


def const_bound(e: Expr, ranges: dict) -> tuple[int, int] | None:
    """Inclusive integer bounds of ``e`` under ``ranges``, or None when unknown."""
    if not is_int(e.dtype):
        return None
    return linear_bound(linear_form(e), ranges)


def _nonlinear_bound(e: Expr, ranges: dict) -> tuple[int, int] | None:
    if isinstance(e, BinOp) and e.op in ("//", "%", "min", "max", "*"):
        a, b = const_bound(e.a, ranges), const_bound(e.b, ranges)
        if e.op == "%" and isinstance(e.b, IntImm) and e.b.value > 0:
            if a is not None and a[0] >= 0 and a[0] // e.b.value == a[1] // e.b.value:
                return a[0] % e.b.value, a[1] % e.b.value
            return 0, e.b.value - 1
        if a is None or b is None:
            return None
        if e.op == "min":
            return min(a[0], b[0]), min(a[1], b[1])
        if e.op == "max":
            return max(a[0], b[0]), max(a[1], b[1])
        if e.op == "*":
            p = [x * y for x in a for y in b]
            return min(p), max(p)
        if b[0] != b[1] or b[0] <= 0 or e.op != "//":
            return None
        return a[0] // b[0], a[1] // b[0]
    if isinstance(e, Select):
        t, f = const_bound(e.t, ranges), const_bound(e.f, ranges)
        if t is None or f is None:
            return None
        return min(t[0], f[0]), max(t[1], f[1])
    return None


def _divmod_linear(op: str, lin: Linear, c: int, ranges: dict, dtype: str) -> Expr | None:
    terms, k0 = lin
    q_terms = {key: (a, k // c) for key, (a, k) in terms.items() if k % c == 0}
    r_terms = {key: (a, k) for key, (a, k) in terms.items() if k % c != 0}
    r_bound = linear_bound((r_terms, k0 % c), ranges)
    if r_bound is None or r_bound[0] < 0 or r_bound[1] >= c:
        # the remainder part may spill; try with the whole constant in the remainder
        return None
    if op == "//":
        return from_linear((q_terms, k0 // c), dtype)
    return from_linear((r_terms, k0 % c), dtype)


def _fold(e: Expr, ranges: dict) -> Expr:
    if isinstance(e, BinOp):
        a, b = e.a, e.b
        if isinstance(a, IntImm | FloatImm) and isinstance(b, IntImm | FloatImm):
            return _fold_const(e.op, a, b)
        if e.op in ("+", "-", "*") and is_int(e.dtype):
            return e if e.canon else from_linear(linear_form(e), e.dtype)
        if e.op in ("//", "%") and isinstance(b, IntImm):
            if b.value == 1:
                return a if e.op == "//" else IntImm(0, e.dtype)
            r = _divmod_linear(e.op, linear_form(a), b.value, ranges, e.dtype)
            if r is not None:
                return r
        if e.op in ("min", "max") and is_int(e.dtype):
            ba, bb = const_bound(a, ranges), const_bound(b, ranges)
            if ba and bb:
                a_wins = ba[1] <= bb[0] if e.op == "min" else ba[0] >= bb[1]
                b_wins = bb[1] <= ba[0] if e.op == "min" else bb[0] >= ba[1]
                if a_wins:
                    return a
                if b_wins:
                    return b
        if e.op == "&&":
            for x, y in ((a, b), (b, a)):
                if isinstance(x, IntImm):
                    return y if x.value else x
        if e.op == "||":
            for x, y in ((a, b), (b, a)):
                if isinstance(x, IntImm):
                    return x if x.value else y
        if (
            e.op in ("*", "+")
            and isinstance(b, FloatImm)
            and b.value == (1.0 if e.op == "*" else 0)
        ):
            return a
        return e
    if isinstance(e, Compare) and is_int(e.a.dtype):
        d = BinOp("-", e.a, e.b)
        bd = const_bound(_fold(d, ranges), ranges)
        if bd is not None:
            lo, hi = bd
            truth = {
                "<": (hi < 0, lo >= 0),
                "<=": (hi <= 0, lo > 0),
                ">": (lo > 0, hi <= 0),
                ">=": (lo >= 0, hi < 0),
                "==": (lo == hi == 0, lo > 0 or hi < 0),
                "!=": (lo > 0 or hi < 0, lo == hi == 0),
            }[e.op]
            if truth[0]:
                return IntImm(1, "bool")
            if truth[1]:
                return IntImm(0, "bool")
        return e
    if isinstance(e, Not) and isinstance(e.a, IntImm):
        return IntImm(1 - e.a.value, "bool")
    if isinstance(e, Select) and isinstance(e.cond, IntImm):
        return e.t if e.cond.value else e.f
    if isinstance(e, Cast):
        v = e.value
        if v.dtype == e.dtype:
            return v
        if isinstance(v, IntImm) and is_int(e.dtype):
            return IntImm(wrap_int(v.value, e.dtype), e.dtype)
        if isinstance(v, IntImm | FloatImm) and e.dtype == "float32":
            return FloatImm(float(v.value))
    return e


def _fold_const(op: str, a, b) -> Expr:
    x, y = a.value, b.value
    if op in ("<<", ">>") and y < 0:
        return BinOp(op, a, b)
    if op in ("//", "%") and y == 0:
        raise ZeroDivisionError(f"constant division by zero in {x} {op} 0")
    fn = {
        "+": lambda: x + y,
        "-": lambda: x - y,
        "*": lambda: x * y,
        "/": lambda: x / y,
        "//": lambda: x // y,
        "%": lambda: x % y,
        "min": lambda: min(x, y),
        "max": lambda: max(x, y),
        ">>": lambda: x >> y,
        "<<": lambda: x << y,
        "&&": lambda: int(bool(x and y)),
        "||": lambda: int(bool(x or y)),
    }[op]
    v = fn()
    if isinstance(a, FloatImm):
        return FloatImm(float(v), a.dtype)
    return IntImm(wrap_int(v, a.dtype) if a.dtype != "bool" else v, a.dtype)


def simplify(e: Expr, ranges: dict | None = None, memo: dict | None = None) -> Expr:
    """Bottom-up simplification of ``e`` under the variable ``ranges``. ``memo`` (a dict,
    empty at first, for one ``ranges``): each node's result already found, for many
    expressions that share sub-expressions (an unrolled body's statements)."""
    return _simplify(e, ranges or {}, {} if memo is None else memo)


def _simplify(e: Expr, ranges: dict, memo: dict) -> Expr:
    if type(e) in LEAF_TYPES:  # nothing folds a leaf
        return e
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:  # the node itself kept: its id is not reused
        return hit[1]
    cond = _simplify(e.cond, ranges, memo) if type(e) is Select else None
    if type(cond) is IntImm:  # only the side it picks (a transform's table of selects)
        out = _simplify(e.t if cond.value else e.f, ranges, memo)
    else:
        kids = tuple(_simplify(c, ranges, memo) for c in children(e))
        out = _fold(rebuild(e, kids), ranges)
    memo[id(e)] = (e, out)
    return out
