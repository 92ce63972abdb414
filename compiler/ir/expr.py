"""Expression nodes of the one IR node family shared by tensor expressions and loop IR.

Every node is immutable after construction and compares by identity; structural equality is
decided by the printed text (see ``compiler.ir.printer``). Index arithmetic is ``int32``.
Division on integers is floor division (``//``) and ``%`` is floor modulo, as in Python.
"""

from __future__ import annotations

DTYPES = ("bool", "int8", "int32", "int64", "float32")
INDEX_DTYPE = "int32"


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported (allowed: {', '.join(DTYPES)})")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_int(dtype: str) -> bool:
    return dtype.startswith("int")


INT_BITS = {"int8": 8, "int32": 32, "int64": 64}
"""Bits of the loop IR's integer dtypes (signed, two's complement): their ranges
(``int_range``) and wrapping (``wrap_int``) follow from it."""


def int_range(dtype: str) -> tuple[int, int]:
    """The least and the greatest value of the integer ``dtype``."""
    half = 1 << (INT_BITS[dtype] - 1)
    return -half, half - 1


def wrap_int(v: int, dtype: str) -> int:
    """``v`` wrapped to the integer ``dtype`` (two's complement), as the hardware computes."""
    bits = INT_BITS[dtype]
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def const(value, dtype: str | None = None) -> Expr:
    """Wrap a Python number (or pass an Expr through)."""
    if isinstance(value, Expr):
        return value
    if isinstance(getattr(value, "var", None), Var):  # an IterVar stands for its variable
        return value.var
    if isinstance(value, bool):
        return IntImm(int(value), dtype or "bool")
    if isinstance(value, int):
        return IntImm(value, dtype or INDEX_DTYPE)
    if isinstance(value, float):
        return FloatImm(value, dtype or "float32")
    raise TypeError(
        f"cannot use {type(value).__name__} {value!r} as an expression (int, float, Expr)"
    )


def _binary_dtype(op: str, a: Expr, b: Expr) -> str:
    if a.dtype != b.dtype:
        raise TypeError(
            f"operands of {op!r} have dtypes {a.dtype} and {b.dtype}; insert an explicit astype()"
        )
    return a.dtype


def _lift(a, b) -> tuple[Expr, Expr]:
    """Convert Python numbers to immediates of the other operand's dtype."""
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = const(b, a.dtype if not isinstance(b, float) or is_float(a.dtype) else None)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = const(a, b.dtype if not isinstance(a, float) or is_float(b.dtype) else None)
    return const(a), const(b)


class Expr:
    """Base class of all expressions; ``dtype`` is one of ``DTYPES``."""

    __slots__ = ("dtype",)

    def __add__(self, o):
        return binary("+", self, o)

    def __radd__(self, o):
        return binary("+", o, self)

    def __sub__(self, o):
        return binary("-", self, o)

    def __rsub__(self, o):
        return binary("-", o, self)

    def __mul__(self, o):
        return binary("*", self, o)

    def __rmul__(self, o):
        return binary("*", o, self)

    def __floordiv__(self, o):
        return binary("//", self, o)

    def __rfloordiv__(self, o):
        return binary("//", o, self)

    def __mod__(self, o):
        return binary("%", self, o)

    def __rmod__(self, o):
        return binary("%", o, self)

    def __truediv__(self, o):
        return binary("/", self, o)

    def __rshift__(self, o):
        return binary(">>", self, o)

    def __lshift__(self, o):
        return binary("<<", self, o)

    def __neg__(self):
        return binary("-", const(0, self.dtype) if is_int(self.dtype) else FloatImm(0.0), self)

    def __lt__(self, o):
        return compare("<", self, o)

    def __le__(self, o):
        return compare("<=", self, o)

    def __gt__(self, o):
        return compare(">", self, o)

    def __ge__(self, o):
        return compare(">=", self, o)

    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("an Expr has no truth value; use compiler.te.all/any/select instead")

    def astype(self, dtype: str) -> Expr:
        return Cast(dtype, self)

    def __repr__(self):
        from pyvta.compiler.ir.printer import expr_str

        return expr_str(self)


class Var(Expr):
    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str = INDEX_DTYPE):
        self.name = name
        self.dtype = check_dtype(dtype)


class IntImm(Expr):
    __slots__ = ("value",)

    def __init__(self, value: int, dtype: str = INDEX_DTYPE):
        self.value = int(value)
        self.dtype = check_dtype(dtype)


class FloatImm(Expr):
    __slots__ = ("value",)

    def __init__(self, value: float, dtype: str = "float32"):
        self.value = float(value)
        self.dtype = check_dtype(dtype)


BINARY_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", ">>", "<<", "&&", "||")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")


class BinOp(Expr):
    """Arithmetic ``a op b``; ``//`` and ``%`` are floor division and modulo on integers."""

    # lin: ``compiler.ir.simplify.linear_form`` of the node, kept once computed (nodes are
    # immutable; a bottom-up simplification asks again for each enclosing sum); canon: the node
    # is the canonical form of its linear form (``simplify.from_linear`` made it), so folding
    # it again would only rebuild it
    __slots__ = ("op", "a", "b", "lin", "canon")

    def __init__(self, op: str, a: Expr, b: Expr):
        self.lin = None
        self.canon = False
        if op not in BINARY_OPS:
            raise ValueError(f"unknown binary op {op!r} (allowed: {BINARY_OPS})")
        self.op, self.a, self.b = op, a, b
        self.dtype = _binary_dtype(op, a, b)
        if op in ("//", "%", ">>", "<<") and not is_int(self.dtype):
            raise TypeError(f"{op!r} needs integer operands, got {self.dtype}")
        if op == "/" and not is_float(self.dtype):
            raise TypeError("'/' is float division; use '//' for integers")


class Compare(Expr):
    __slots__ = ("op", "a", "b")

    def __init__(self, op: str, a: Expr, b: Expr):
        if op not in COMPARE_OPS:
            raise ValueError(f"unknown comparison {op!r} (allowed: {COMPARE_OPS})")
        _binary_dtype(op, a, b)
        self.op, self.a, self.b = op, a, b
        self.dtype = "bool"


class Not(Expr):
    __slots__ = ("a",)

    def __init__(self, a: Expr):
        self.a = a
        self.dtype = "bool"


class Select(Expr):
    """``cond ? t : f``. Only the chosen branch is guaranteed to be evaluated when a branch reads
    memory, so ``select(in_bounds, A[i - 1], 0)`` is a safe padding read."""

    __slots__ = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr):
        if cond.dtype != "bool":
            raise TypeError(f"select condition must be bool, got {cond.dtype}")
        t, f = _lift(t, f)
        self.cond, self.t, self.f = cond, t, f
        self.dtype = _binary_dtype("select", t, f)


class Cast(Expr):
    __slots__ = ("value",)

    def __init__(self, dtype: str, value: Expr):
        self.dtype = check_dtype(dtype)
        self.value = const(value)


class Load(Expr):
    """Read ``buffer`` at flat element ``index``."""

    __slots__ = ("buffer", "index")

    def __init__(self, buffer, index: Expr):
        self.buffer, self.index = buffer, const(index)
        self.dtype = buffer.dtype


class Call(Expr):
    """A pure intrinsic call such as ``exp`` or a backend intrinsic name."""

    __slots__ = ("name", "args")

    def __init__(self, name: str, args, dtype: str):
        self.name, self.args, self.dtype = name, tuple(const(a) for a in args), check_dtype(dtype)


class TensorRead(Expr):
    """Tensor-expression read ``tensor[i0, i1, ...]``; replaced by ``Load`` during lowering."""

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor, indices):
        self.tensor = tensor
        self.indices = tuple(const(i) for i in indices)
        self.dtype = tensor.dtype
        if len(self.indices) != len(tensor.shape):
            raise IndexError(
                f"tensor {tensor.name} has {len(tensor.shape)} dims, indexed with {len(indices)}"
            )


REDUCERS = ("sum", "max", "min")


class Reduce(Expr):
    """Reduction ``combiner`` of ``source`` over ``axes`` (reduce IterVars); only at the top of a
    compute body. ``where`` (bool, or None: every point): the points of the reduction domain
    that count; the others are skipped, as if they held the combiner's identity. Lowering
    tests each of its ``&&`` terms once per iteration of the innermost loop it depends on (a
    term of the output index and the kernel row skips whole rows of taps)."""

    __slots__ = ("combiner", "source", "axes", "where")

    def __init__(self, combiner: str, source: Expr, axes, where: Expr | None = None):
        if combiner not in REDUCERS:
            raise ValueError(f"unknown reducer {combiner!r} (allowed: {REDUCERS})")
        if where is not None and where.dtype != "bool":
            raise TypeError(f"reduction where must be bool, got {where.dtype}")
        self.combiner, self.source, self.axes = combiner, const(source), tuple(axes)
        self.where = where
        self.dtype = self.source.dtype

    def identity(self) -> Expr:
        if self.combiner == "sum":
            return const(0.0 if is_float(self.dtype) else 0, self.dtype)
        if is_float(self.dtype):
            return const(float("-inf") if self.combiner == "max" else float("inf"), self.dtype)
        lowest, highest = int_range(self.dtype)
        return const(lowest if self.combiner == "max" else highest, self.dtype)


def binary(op: str, a, b) -> Expr:
    a, b = _lift(a, b)
    return BinOp(op, a, b)


def compare(op: str, a, b) -> Expr:
    a, b = _lift(a, b)
    return Compare(op, a, b)


def equal(a, b) -> Expr:
    return compare("==", a, b)


def min_(a, b) -> Expr:
    return binary("min", a, b)


def max_(a, b) -> Expr:
    return binary("max", a, b)


def all_(*conds) -> Expr:
    out = None
    for c in conds:
        out = c if out is None else BinOp("&&", out, c)
    return out if out is not None else IntImm(1, "bool")


# Each node type's children (in ``rebuild``'s order) and how to rebuild it from new ones: one
# table, looked up by the exact type (no node type is subclassed), so a walk of a large unrolled
# body pays one dict lookup a node, not a chain of isinstance tests. Leaves have no entry.
_NODE_KIDS = {
    BinOp: (lambda e: (e.a, e.b), lambda e, k: BinOp(e.op, k[0], k[1])),
    Compare: (lambda e: (e.a, e.b), lambda e, k: Compare(e.op, k[0], k[1])),
    Not: (lambda e: (e.a,), lambda e, k: Not(k[0])),
    Select: (lambda e: (e.cond, e.t, e.f), lambda e, k: Select(*k)),
    Cast: (lambda e: (e.value,), lambda e, k: Cast(e.dtype, k[0])),
    Load: (lambda e: (e.index,), lambda e, k: Load(e.buffer, k[0])),
    Call: (lambda e: e.args, lambda e, k: Call(e.name, k, e.dtype)),
    TensorRead: (lambda e: e.indices, lambda e, k: TensorRead(e.tensor, k)),
    Reduce: (
        lambda e: (e.source,) if e.where is None else (e.source, e.where),
        lambda e, k: Reduce(e.combiner, k[0], e.axes, k[1] if len(k) > 1 else None),
    ),
}
LEAF_TYPES = (Var, IntImm, FloatImm)


def children(e: Expr) -> tuple:
    entry = _NODE_KIDS.get(type(e))
    return () if entry is None else entry[0](e)


def _same(kids: tuple, old: tuple) -> bool:
    # a loop, not all() over a generator: called once a node of every walk, it is the faster
    for k, c in zip(kids, old, strict=True):  # noqa: SIM110
        if k is not c:
            return False
    return True


def rebuild(e: Expr, kids: tuple) -> Expr:
    """A copy of ``e`` with new children (same order as ``children``)."""
    entry = _NODE_KIDS.get(type(e))
    if entry is None:
        if kids:
            raise TypeError(f"cannot rebuild {type(e).__name__}")
        return e
    return e if _same(kids, entry[0](e)) else entry[1](e, kids)


def transform(e: Expr, fn) -> Expr:
    """Post-order rewrite: ``fn(node_with_rewritten_children)`` returns a node or None (keep)."""
    entry = _NODE_KIDS.get(type(e))
    if entry is not None:
        old = entry[0](e)
        kids = tuple(transform(c, fn) for c in old)
        if not _same(kids, old):
            e = entry[1](e, kids)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, vmap: dict, memo: dict | None = None) -> Expr:
    """Replace Vars (keys are Var objects) by expressions. ``memo`` (a dict, empty at first,
    for one ``vmap``): each node's result already found, for many expressions that share
    sub-expressions (an unrolled body's statements)."""
    if not vmap:
        return e
    return _substitute(e, vmap, {} if memo is None else memo)


def _substitute(e: Expr, vmap: dict, memo: dict) -> Expr:
    t = type(e)
    if t is Var:
        return vmap.get(e, e)
    entry = _NODE_KIDS.get(t)
    if entry is None:
        return e
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:  # the node itself kept: its id is not reused
        return hit[1]
    old = entry[0](e)
    kids = tuple(_substitute(c, vmap, memo) for c in old)
    out = e if _same(kids, old) else entry[1](e, kids)
    memo[id(e)] = (e, out)
    return out


def free_vars(e: Expr, out: set | None = None) -> set:
    out = set() if out is None else out
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            out.add(n)
        stack.extend(children(n))
    return out
