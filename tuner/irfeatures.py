"""Features of lowered loop IR (``compiler.ir.PrimFunc``) for the cost model.

The IR is walked once; every ``Store`` becomes a *statement* with its enclosing loop nest
(innermost first) and its buffer accesses (the store plus every ``Load`` in its value). For
each access and each loop level ``l`` (loops ``0..l`` counted from the innermost):

- ``stride``: elements the flat index moves when the level's variable steps by one
  (the index is evaluated at 0 and 1, so it is exact for affine indices);
- ``inner``: product of the extents of loops ``0..l`` (iterations of the sub-nest);
- ``touch``: distinct elements the sub-nest touches, estimated as
  ``min(prod of extents with nonzero stride, 1 + sum (extent - 1) |stride|, buffer size)``;
- ``reuse``: ``inner / touch``.

Three feature vectors, all ``float32``:

- ``loop_features(func)``: per loop of the heaviest statement (extent, kind, inner/outer
  products, per access stride/touch/reuse), padded to ``MAX_DEPTH`` levels;
- ``curve_features(func)``: the "context relation" curves ``log2 touch`` and ``log2 reuse``
  against ``log2 inner`` sampled at ``CURVE_POINTS`` fixed points, for the heaviest
  ``N_STMTS`` statements and ``N_ACCESSES`` accesses each, plus loop-kind summaries. Its length
  (``CURVE_LEN``) is the same for every workload, so a model transfers across shapes and
  operators.
"""

from __future__ import annotations

import math

import numpy as np

from pyvta.compiler.ir.expr import BinOp, Call, Cast, Compare, IntImm, Load, Not, Select, Var
from pyvta.compiler.ir.stmt import Allocate, Evaluate, For, IfThenElse, Let, Seq, Store

KINDS = ("serial", "parallel", "vectorized", "unrolled", "vthread")
MAX_DEPTH = 8
N_ACCESSES = 3  # the store and the two largest loads
N_STMTS = 2
CURVE_POINTS = 12  # log2 inner = 0, 2, 4, ..., 22
_ACCESS_LEN = 2 * CURVE_POINTS + 3
_STMT_LEN = N_ACCESSES * _ACCESS_LEN + 5
CURVE_LEN = N_STMTS * _STMT_LEN + 3
LOOP_LEN = MAX_DEPTH * (8 + 3 * N_ACCESSES) + 2


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


class _Unknown(Exception):
    pass


def _eval(e, env: dict) -> int:
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env.get(e.name, 0)
    if isinstance(e, BinOp):
        a, b = _eval(e.a, env), _eval(e.b, env)
        op = e.op
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "//":
            return a // b if b else 0
        if op == "%":
            return a % b if b else 0
        if op == "min":
            return min(a, b)
        if op == "max":
            return max(a, b)
        if op == "<<":
            return a << b
        if op == ">>":
            return a >> b
    raise _Unknown


def _loads(e, out: list) -> None:
    if isinstance(e, Load):
        out.append(e)
        _loads(e.index, out)
    elif isinstance(e, BinOp | Compare):
        _loads(e.a, out)
        _loads(e.b, out)
    elif isinstance(e, Select):
        _loads(e.cond, out)
        _loads(e.t, out)
        _loads(e.f, out)
    elif isinstance(e, Cast):
        _loads(e.value, out)
    elif isinstance(e, Not):
        _loads(e.a, out)
    elif isinstance(e, Call):
        for a in e.args:
            _loads(a, out)


class _Access:
    __slots__ = ("size", "local", "strides", "is_store")

    def __init__(self, buffer, index, loops, is_store):
        self.size = buffer.size_elems
        self.local = buffer.scope != "global"
        self.is_store = is_store
        try:
            base = _eval(index, {})
            self.strides = [abs(_eval(index, {v: 1}) - base) for v, _, _ in loops]
        except _Unknown:
            self.strides = [1] * len(loops)

    def levels(self, loops):
        """Per level (innermost first): (stride, inner, touch, reuse)."""
        out, inner, prod_nz, span = [], 1, 1, 1
        for (_, extent, _), s in zip(loops, self.strides, strict=True):
            inner *= extent
            if s:
                prod_nz *= extent
                span += (extent - 1) * s
            touch = max(1, min(prod_nz, span, self.size))
            out.append((s, inner, touch, inner / touch))
        return out


class _Stmt:
    __slots__ = ("loops", "accesses", "trips")

    def __init__(self, loops, accesses):
        self.loops = loops  # innermost first: (var name, extent, kind)
        self.accesses = accesses
        self.trips = math.prod(e for _, e, _ in loops) if loops else 1


def _const_extent(e) -> int:
    try:
        return max(1, _eval(e, {}))
    except _Unknown:
        return 1


def collect(func) -> tuple[list[_Stmt], int]:
    """Statements of ``func`` (heaviest first) and its number of allocations."""
    stmts: list[_Stmt] = []
    n_alloc = 0
    stack: list[tuple[str, int, str]] = []

    def visit(s):
        nonlocal n_alloc
        if isinstance(s, For):
            stack.append((s.var.name, _const_extent(s.extent), s.kind))
            visit(s.body)
            stack.pop()
        elif isinstance(s, Store):
            loops = stack[::-1]
            loads: list = []
            _loads(s.value, loads)
            acc = [_Access(s.buffer, s.index, loops, True)]
            acc += [_Access(ld.buffer, ld.index, loops, False) for ld in loads]
            stmts.append(_Stmt(loops, acc))
        elif isinstance(s, Allocate):
            n_alloc += 1
            visit(s.body)
        elif isinstance(s, Let):
            visit(s.body)
        elif isinstance(s, IfThenElse):
            visit(s.then)
            if s.orelse is not None:
                visit(s.orelse)
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c)
        elif isinstance(s, Evaluate):
            pass

    visit(func.body)
    stmts.sort(key=lambda st: -st.trips)
    return stmts, n_alloc


def _chosen_accesses(st: _Stmt) -> list:
    store = [a for a in st.accesses if a.is_store][:1]
    loads = sorted((a for a in st.accesses if not a.is_store), key=lambda a: -a.size)
    return (store + loads)[:N_ACCESSES]


def _kind_summary(st: _Stmt) -> list[float]:
    par = math.prod(e for _, e, k in st.loops if k == "parallel")
    vec = math.prod(e for _, e, k in st.loops if k == "vectorized")
    unr = math.prod(e for _, e, k in st.loops if k == "unrolled")
    return [_log2(st.trips), _log2(par), _log2(vec), _log2(unr), float(len(st.loops))]


def curve_features(func) -> np.ndarray:
    """``float32 [CURVE_LEN]`` (see the module docstring)."""
    stmts, n_alloc = collect(func)
    out = np.zeros(CURVE_LEN, dtype=np.float32)
    grid = np.arange(CURVE_POINTS, dtype=np.float64) * 2.0
    for si, st in enumerate(stmts[:N_STMTS]):
        base = si * _STMT_LEN
        for ai, acc in enumerate(_chosen_accesses(st)):
            lv = acc.levels(st.loops)
            xs = np.array([0.0] + [_log2(v[1]) for v in lv])
            touch = np.array([0.0] + [_log2(v[2]) for v in lv])
            reuse = np.array([0.0] + [_log2(v[3]) for v in lv])
            pos = np.searchsorted(xs, grid, side="right") - 1  # last level with x <= grid
            o = base + ai * _ACCESS_LEN
            out[o : o + CURVE_POINTS] = touch[pos]
            out[o + CURVE_POINTS : o + 2 * CURVE_POINTS] = reuse[pos]
            inner_stride = acc.strides[0] if acc.strides else 0
            out[o + 2 * CURVE_POINTS :][:3] = [
                _log2(inner_stride + 1),
                float(acc.local),
                _log2(acc.size),
            ]
        out[base + N_ACCESSES * _ACCESS_LEN : base + _STMT_LEN] = _kind_summary(st)
    total = sum(st.trips for st in stmts)
    out[-3:] = [float(len(stmts)), float(n_alloc), _log2(total)]
    return out


def loop_features(func) -> np.ndarray:
    """``float32 [LOOP_LEN]``: per loop of the heaviest statement, innermost first, padded to
    ``MAX_DEPTH``: log2 extent, kind one-hot (5), log2 inner and outer products, and per access
    log2(|stride| + 1), log2 touch, log2 reuse."""
    stmts, n_alloc = collect(func)
    out = np.zeros(LOOP_LEN, dtype=np.float32)
    if not stmts:
        return out
    st = stmts[0]
    accs = _chosen_accesses(st)
    levels = [a.levels(st.loops) for a in accs]
    width = 8 + 3 * N_ACCESSES
    for li, (_, extent, kind) in enumerate(st.loops[:MAX_DEPTH]):
        row = [_log2(extent)] + [float(kind == k) for k in KINDS]
        inner = levels[0][li][1] if levels else extent
        row += [_log2(inner), _log2(st.trips / inner)]
        for ai in range(N_ACCESSES):
            if ai < len(accs):
                s, _, touch, reuse = levels[ai][li]
                row += [_log2(s + 1), _log2(touch), _log2(reuse)]
            else:
                row += [0.0, 0.0, 0.0]
        out[li * width : (li + 1) * width] = row
    out[-2:] = [float(len(stmts)), float(n_alloc)]
    return out
