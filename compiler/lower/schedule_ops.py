"""Lowering a schedule to loop IR: loop nests, attach points, buffers, guards, tensorize.

Each stage computes a region of its output (the whole tensor at the root, the region its
consumer needs when attached with ``compute_at``) into a buffer whose origin is the region's
minimum. Reductions get an init nest placed just outside their outermost reduce loop. Guards
``if idx < extent`` appear only where the simplifier cannot prove an index in bounds.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import (
    BinOp,
    IntImm,
    Load,
    Reduce,
    TensorRead,
    all_,
    substitute,
    transform,
)
from pyvta.compiler.ir.printer import expr_str
from pyvta.compiler.ir.simplify import linear_form, simplify, var_coef
from pyvta.compiler.ir.stmt import (
    THREAD_TAGS,
    Allocate,
    Buffer,
    For,
    IfThenElse,
    PrimFunc,
    Store,
    seq,
)
from pyvta.compiler.lower.bound import infer_region
from pyvta.compiler.lower.loops import leaf_extents, root_values
from pyvta.compiler.schedule.intrin import TensorRegion
from pyvta.compiler.schedule.scope import shared_across
from pyvta.isa.errors import PyvtaError

_SHARABLE = (*THREAD_TAGS, "vthread")  # loop kinds a buffer may be shared across


class LowerError(PyvtaError, ValueError):
    pass


class _Ctx:
    def __init__(self, sch, params: dict):
        self.sch = sch
        self.bufs: dict = dict(params)  # Tensor -> (Buffer, origin exprs)
        self.ranges: dict = {}  # Var -> (lo, hi) for loops in scope
        self.children: dict = {}  # (Stage, LoopAxis) -> [Stage]
        self.bound: dict = {}  # Var -> GPU launch tag or "vthread", for such loops in scope
        for st in sch.stages:
            if st.attach[0] == "at":
                self.children.setdefault((st.attach[1], st.attach[2]), []).append(st)


def _inline(sch, e):
    """Substitute the bodies of inlined stages into ``e`` (recursively)."""

    def f(n):
        if isinstance(n, TensorRead):
            st = sch.stage_of(n.tensor)
            if st is not None and st.attach[0] == "inline":
                vmap = {a.var: i for a, i in zip(st.data_axes, n.indices, strict=True)}
                return _inline(sch, substitute(st.body, vmap))
        return None

    return transform(e, f)


def _to_loads(ctx: _Ctx, e):
    def f(n):
        if isinstance(n, TensorRead):
            if n.tensor not in ctx.bufs:
                raise LowerError(
                    f"{n.tensor.name} is read before it is computed; pass it as an argument or "
                    "check the compute_at placement"
                )
            buf, origin = ctx.bufs[n.tensor]
            return Load(buf, _flat(buf, [i - o for i, o in zip(n.indices, origin, strict=True)]))
        return None

    return transform(e, f)


def _flat(buf: Buffer, idx) -> object:
    out = None
    for i, s in zip(idx, buf.strides_elems(), strict=True):
        term = i * IntImm(s) if s != 1 else i
        out = term if out is None else out + term
    return out


def _loop(ctx: _Ctx, st, axis, ext: int, body):
    kind = st.annotations.get(axis, "serial")
    return For(axis.var, IntImm(0), IntImm(ext), kind, body)


def _emit_stage(ctx: _Ctx, st, region) -> object:
    """Loop nest computing ``region`` (``[(min, extent)]`` per dim) of ``st``. The caller has
    registered the stage's buffer in ``ctx.bufs`` and wraps the nest in its ``Allocate``."""
    return _StageNest(ctx, st, region).build(0)


class _StageNest:
    """Builds one stage's loop nest, outermost loop first (attached stages go in as the
    loops are entered, so their buffers exist before the body reads them)."""

    def __init__(self, ctx: _Ctx, st, region):
        self.ctx, self.st = ctx, st
        root_ext = {a: n for a, (_, n) in zip(st.data_axes, region, strict=True)}
        root_ext.update({a: a.root_extent for a in st.root if a.kind == "reduce"})
        self.ext = ext = leaf_extents(st, root_ext)
        val = root_values(st, ext)
        index = {
            a.var: simplify(m + val[a]) for a, (m, _) in zip(st.data_axes, region, strict=True)
        }
        index.update({a.var: val[a] for a in st.root if a.kind == "reduce"})
        self.index = index
        self.body = _inline(ctx.sch, substitute(st.body, index))
        self.out_buf, origin = ctx.bufs[st.tensor]
        self.out_idx = [index[a.var] - o for a, o in zip(st.data_axes, origin, strict=True)]
        # a root axis may overrun its extent (split tails) or the tensor (relaxed regions)
        self.guards = [val[a] < IntImm(root_ext[a]) for a in st.root]
        for a, n in zip(st.data_axes, st.tensor.shape, strict=True):
            self.guards += [index[a.var] < IntImm(n), index[a.var] >= IntImm(0)]
        self.leaf_ranges = {a.var: (0, ext[a] - 1) for a in st.leaf}
        red = [i for i, a in enumerate(st.leaf) if a.kind == "reduce" or a in st.tensorized]
        self.init_pos = red[0] if red and isinstance(self.body, Reduce) else None
        self.where = self._where_terms()

    def _where_terms(self) -> dict:
        """A reduction's ``where``, by ``&&`` term: leaf position -> the terms tested around
        the nest from that position inwards (just inside the innermost loop a term reads,
        never outside the reduction's init)."""
        body = self.body
        if not isinstance(body, Reduce) or body.where is None:
            return {}
        if self.st.tensorized:
            raise LowerError(f"{self.st.name}: a reduction with a where cannot be tensorized")
        terms, stack = [], [body.where]
        while stack:
            t = stack.pop()
            if isinstance(t, BinOp) and t.op == "&&":
                stack += [t.b, t.a]
            else:
                terms.append(t)
        at: dict = {}
        pos_of = {a.var: i for i, a in enumerate(self.st.leaf)}
        for t in terms:
            inner = max((pos_of[v] + 1 for v in _vars_in(t) if v in pos_of), default=0)
            at.setdefault(max(inner, self.init_pos), []).append(t)
        return at

    def where_guard(self, pos, stmt):
        """``stmt`` (the nest from leaf ``pos`` inwards, its init excluded) under the
        reduction's ``where`` terms placed at ``pos``."""
        terms = self.where.get(pos)
        if not terms:
            return stmt
        cond = simplify(_to_loads(self.ctx, all_(*terms)), self._ranges())
        return stmt if isinstance(cond, IntImm) and cond.value else IfThenElse(cond, stmt)

    def _ranges(self) -> dict:
        return {**self.ctx.ranges, **self.leaf_ranges}

    def guarded(self, stmt, axes):
        conds = [simplify(g, self._ranges()) for g in self.guards]
        used = {a.var for a in axes} | set(self.ctx.ranges)
        conds = [c for c in conds if not (isinstance(c, IntImm) and c.value == 1)]
        conds = [c for c in conds if _vars_in(c) <= used]
        conds = list({expr_str(c): c for c in conds}.values())
        return IfThenElse(all_(*conds), stmt) if conds else stmt

    def main_store(self):
        body = self.body
        if isinstance(body, Reduce):
            old = TensorRead(self.st.tensor, [self.index[a.var] for a in self.st.data_axes])
            op = {"sum": "+", "max": "max", "min": "min"}[body.combiner]
            body = BinOp(op, old, body.source)
        flat = simplify(_flat(self.out_buf, self.out_idx), self._ranges())
        value = simplify(_to_loads(self.ctx, body), self._ranges())
        return self.guarded(Store(self.out_buf, flat, value), self.st.leaf)

    def init_nest(self, pos):
        st = self.st
        axes = [a for a in st.leaf[pos:] if a.kind == "data"]
        flat = simplify(_flat(self.out_buf, self.out_idx), self._ranges())
        stmt = self.guarded(Store(self.out_buf, flat, self.body.identity()), axes + st.leaf[:pos])
        for a in reversed(axes):
            stmt = _loop(self.ctx, st, a, self.ext[a], stmt)
        return stmt

    def build(self, pos):
        st, ctx = self.st, self.ctx
        if pos == len(st.leaf):
            return self.where_guard(pos, self.main_store())
        a = st.leaf[pos]
        if a in st.tensorized:
            inner = _emit_tensorized(ctx, st, pos, self.ext, self.body, self.out_buf, self.out_idx)
        else:
            ctx.ranges[a.var] = self.leaf_ranges[a.var]
            if st.annotations.get(a) in _SHARABLE:
                ctx.bound[a.var] = st.annotations[a]
            inner = _with_children(
                ctx, st, a, pos, self.ext, lambda: self.build(pos + 1), self.body
            )
            inner = _loop(ctx, st, a, self.ext[a], inner)
            del ctx.ranges[a.var]
            ctx.bound.pop(a.var, None)
        inner = self.where_guard(pos, inner)
        if pos == self.init_pos:
            return seq(self.init_nest(pos), inner)
        return inner


def _vars_in(e) -> set:
    from pyvta.compiler.ir.expr import free_vars

    return free_vars(e)


def _with_children(ctx: _Ctx, st, axis, pos, ext, build_inner, body):
    kids = ctx.children.get((st, axis), [])
    if not kids:
        return build_inner()
    relaxed = {a.var: (0, ext[a] - 1) for a in st.leaf[pos + 1 :]}
    allocs, nests = [], []
    for c in kids:
        shared = {v: ctx.ranges[v] for v, t in ctx.bound.items() if shared_across(c.scope, t)}
        region = infer_region(body, c.tensor, {**relaxed, **shared}, ctx.ranges)
        buf = Buffer(c.name, c.tensor.dtype, [n for _, n in region], c.scope)
        ctx.bufs[c.tensor] = (buf, [m for m, _ in region])
        nests.append(_emit_stage(ctx, c, region))
        allocs.append(buf)
    out = seq(*nests, build_inner())
    for b in reversed(allocs):
        out = Allocate(b, out)
    return out


def _emit_tensorized(ctx, st, pos, ext, body, out_buf, out_idx):
    intrin = st.tensorized[st.leaf[pos]]
    axes = st.leaf[pos:]
    got = tuple(ext[a] for a in axes)
    if got != intrin.loop_extents:
        raise LowerError(
            f"tensorize {intrin.name} on {st.name}: loop extents {got} from axis "
            f"{axes[0].name} inwards do not match the intrinsic's {intrin.loop_extents}"
        )
    combiner = body.combiner if isinstance(body, Reduce) else None
    if combiner != intrin.combiner:
        raise LowerError(
            f"tensorize {intrin.name} on {st.name}: reduction {combiner} does not match "
            f"the intrinsic's {intrin.combiner}"
        )
    zero = {a.var: IntImm(0) for a in axes}
    src = body.source if isinstance(body, Reduce) else body
    reads = []
    for t in _read_order(src):
        if t in ctx.bufs and t not in reads:
            reads.append(t)
    if len(reads) != len(intrin.inputs):
        raise LowerError(
            f"tensorize {intrin.name} on {st.name}: body reads {len(reads)} tensors, the "
            f"intrinsic takes {len(intrin.inputs)}"
        )

    def region(buf, flat):
        lin = linear_form(simplify(flat, ctx.ranges))
        strides = tuple(var_coef(lin, a.var) for a in axes)
        if None in strides:
            raise LowerError(f"tensorize {intrin.name}: index {flat} is not affine in its loops")
        return TensorRegion(buf, simplify(substitute(flat, zero), ctx.ranges), strides)

    ins = []
    for t in reads:
        tr = next(r for r in _reads_of(src, t))
        load = _to_loads(ctx, tr)
        ins.append(region(load.buffer, load.index))
    outs = [region(out_buf, _flat(out_buf, out_idx))]
    return intrin.emit(ins, outs)


def _read_order(e):
    from pyvta.compiler.ir.expr import children

    out, stack = [], [e]
    while stack:
        n = stack.pop()
        if isinstance(n, TensorRead):
            out.append(n.tensor)
        stack.extend(reversed(children(n)))
    return out


def _reads_of(e, t):
    from pyvta.compiler.lower.bound import collect_reads

    return collect_reads(e, t)


def lower_schedule(sch, args, name: str = "main") -> PrimFunc:
    """Loop IR for schedule ``sch``; ``args`` (tensors) become the parameters, in order."""
    params, seen = {}, set()
    for t in args:
        if t.name in seen:
            raise LowerError(f"argument name {t.name!r} appears twice")
        seen.add(t.name)
        params[t] = (Buffer(t.name, t.dtype, t.shape, "global"), [IntImm(0)] * len(t.shape))
    for t in sch.outputs:
        if t not in params:
            raise LowerError(f"output {t.name} must be one of the arguments")
    ctx = _Ctx(sch, params)
    nests, allocs = [], []
    for st in sch.stages:
        if st.attach[0] != "root":
            continue
        if st.tensor not in ctx.bufs:
            buf = Buffer(st.name, st.tensor.dtype, st.tensor.shape, st.scope)
            ctx.bufs[st.tensor] = (buf, [IntImm(0)] * len(st.tensor.shape))
            allocs.append((len(nests), buf))
        nests.append(_emit_stage(ctx, st, [(IntImm(0), n) for n in st.tensor.shape]))
    for t in args:
        st = sch.stage_of(t)
        if st is not None and st.attach[0] != "root":
            raise LowerError(f"argument {t.name} must be computed at the root")
    # each root allocation covers its producer nest and everything after it
    tail = None
    alloc_at = dict(allocs)
    for i in range(len(nests) - 1, -1, -1):
        tail = nests[i] if tail is None else seq(nests[i], tail)
        if i in alloc_at:
            tail = Allocate(alloc_at[i], tail)
    return PrimFunc(name, [params[t][0] for t in args], tail)
