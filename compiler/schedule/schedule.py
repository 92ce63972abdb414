"""Schedules: per-stage loop transformations recorded as ``Step`` records.

``create_schedule(outputs)`` makes one ``Stage`` per compute operation reachable from
``outputs`` (producers first). Primitives are methods of ``Stage`` (``split``, ``tile``,
``reorder``, ``fuse``, ``compute_at``, ``compute_inline``, ``vectorize``, ``unroll``,
``parallel``, ``vthread``, ``bind``, ``tensorize``) and of ``Schedule`` (``cache_read``, ``cache_write``).
Axes are referred to by ``LoopAxis`` or by name; each call appends one ``Step``.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import INDEX_DTYPE, TensorRead, Var, transform
from pyvta.compiler.ir.stmt import THREAD_TAGS
from pyvta.compiler.schedule.step import Step
from pyvta.compiler.te.tensor import ComputeOp, IterVar, PlaceholderOp, Tensor

ANNOTATIONS = ("serial", "parallel", "vectorized", "unrolled", "vthread")


class LoopAxis:
    """A loop of a stage: a root axis (an op IterVar) or one made by split / fuse."""

    __slots__ = ("name", "var", "kind", "root_extent")

    def __init__(self, name: str, kind: str, var: Var | None = None, root_extent=None):
        self.name, self.kind = name, kind
        self.var = var if var is not None else Var(name, INDEX_DTYPE)
        self.root_extent = root_extent

    def __repr__(self):
        return f"LoopAxis({self.name}, {self.kind})"


class Split:
    __slots__ = ("parent", "outer", "inner", "factor", "nparts")

    def __init__(self, parent, outer, inner, factor, nparts):
        self.parent, self.outer, self.inner = parent, outer, inner
        self.factor, self.nparts = factor, nparts


class Fuse:
    __slots__ = ("outer", "inner", "fused")

    def __init__(self, outer, inner, fused):
        self.outer, self.inner, self.fused = outer, inner, fused


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


class Stage:
    """Schedule state of one compute op: its loops, annotations, attach point and scope."""

    def __init__(self, sch: Schedule, tensor: Tensor):
        op = tensor.op
        self.sch, self.tensor, self.name = sch, tensor, op.name
        self.body = op.body
        self.root = [LoopAxis(iv.name, iv.kind, iv.var, iv.extent) for iv in op.axis]
        self.root += [LoopAxis(iv.name, iv.kind, iv.var, iv.extent) for iv in op.reduce_axis]
        self.data_axes = [a for a in self.root if a.kind == "data"]
        self.leaf = list(self.root)
        self.relations: list = []
        self.annotations: dict = {}  # LoopAxis -> kind
        self.tensorized: dict = {}  # LoopAxis -> TensorIntrin
        self.attach: tuple = ("root",)
        self.scope = "global"
        self._names = {a.name: a for a in self.root}

    # -- helpers ---------------------------------------------------------------------------
    def __repr__(self):
        return f"Stage({self.name})"

    def axis(self, ref) -> LoopAxis:
        """The leaf loop ``ref`` (a ``LoopAxis``, ``IterVar`` or name) of this stage."""
        name = ref if isinstance(ref, str) else getattr(ref, "name", None)
        a = self._names.get(name)
        if a is None or (isinstance(ref, LoopAxis) and ref is not a):
            raise ValueError(
                f"axis {name!r} does not belong to stage {self.name} "
                f"(its axes: {', '.join(x.name for x in self.leaf)})"
            )
        if a not in self.leaf:
            raise ValueError(
                f"axis {name} of stage {self.name} was already split or fused; "
                f"use one of its leaf axes: {', '.join(x.name for x in self.leaf)}"
            )
        return a

    def _new_axis(self, name: str, kind: str) -> LoopAxis:
        if name in self._names:
            raise ValueError(f"stage {self.name} already has an axis named {name!r}")
        a = LoopAxis(name, kind)
        self._names[name] = a
        return a

    def _move_attach(self, old: LoopAxis, new: LoopAxis) -> None:
        """Stages attached at ``old`` follow it to ``new`` after a split or fuse."""
        for st in self.sch.stages:
            if st.attach[0] == "at" and st.attach[1] is self and st.attach[2] is old:
                st.attach = ("at", self, new)

    def _record(self, kind: str, **args) -> None:
        self.sch.steps.append(Step(kind, self.name, args))

    @property
    def op(self):
        return self.tensor.op

    # -- loop structure --------------------------------------------------------------------
    def split(self, axis, factor: int | None = None, nparts: int | None = None):
        """Split ``axis`` into ``(outer, inner)`` with ``inner`` of extent ``factor`` (or
        ``outer`` of extent ``nparts``). Returns the two new leaf axes."""
        if (factor is None) == (nparts is None):
            raise ValueError("split needs exactly one of factor= or nparts=")
        if factor is not None:
            _positive_int("split factor", factor)
        else:
            _positive_int("split nparts", nparts)
        a = self.axis(axis)
        outer = self._new_axis(f"{a.name}.outer", a.kind)
        inner = self._new_axis(f"{a.name}.inner", a.kind)
        self.relations.append(Split(a, outer, inner, factor, nparts))
        self._move_attach(a, inner)
        i = self.leaf.index(a)
        self.leaf[i : i + 1] = [outer, inner]
        if factor is not None:
            self._record("split", axis=a.name, factor=factor)
        else:
            self._record("split", axis=a.name, nparts=nparts)
        return outer, inner

    def tile(self, x_axis, y_axis, x_factor: int, y_factor: int):
        """Split two axes and order them ``x.outer, y.outer, x.inner, y.inner``."""
        x, y = self.axis(x_axis), self.axis(y_axis)
        if x is y:
            raise ValueError("tile needs two different axes")
        n = len(self.sch.steps)
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        del self.sch.steps[n:]
        self._record("tile", x_axis=x.name, y_axis=y.name, x_factor=x_factor, y_factor=y_factor)
        return xo, yo, xi, yi

    def reorder(self, *axes):
        """Put the given leaf axes in this order, in the slots they occupy now."""
        sel = [self.axis(a) for a in axes]
        if len({id(a) for a in sel}) != len(sel):
            raise ValueError(f"reorder got a repeated axis: {[a.name for a in sel]}")
        slots = sorted(self.leaf.index(a) for a in sel)
        for slot, a in zip(slots, sel, strict=True):
            self.leaf[slot] = a
        self._record("reorder", axes=[a.name for a in sel])

    def fuse(self, outer, inner):
        """Fuse two adjacent leaf axes (``outer`` directly outside ``inner``) into one."""
        o, i = self.axis(outer), self.axis(inner)
        io = self.leaf.index(o)
        if io + 1 >= len(self.leaf) or self.leaf[io + 1] is not i:
            raise ValueError(
                f"fuse needs adjacent axes with {o.name} directly outside {i.name}; "
                f"leaf order is {[a.name for a in self.leaf]}"
            )
        if o.kind != i.kind:
            raise ValueError(f"cannot fuse a {o.kind} axis with a {i.kind} axis")
        f = self._new_axis(f"{o.name}.{i.name}.fused", o.kind)
        self.relations.append(Fuse(o, i, f))
        self._move_attach(o, f)
        self._move_attach(i, f)
        self.leaf[io : io + 2] = [f]
        self._record("fuse", axes=[o.name, i.name])
        return f

    # -- annotations -----------------------------------------------------------------------
    def _annotate(self, axis, kind: str, step: str) -> LoopAxis:
        a = self.axis(axis)
        if kind in ("parallel", "vectorized", "vthread") and a.kind == "reduce":
            raise ValueError(f"cannot mark reduce axis {a.name} {kind} (a data axis is needed)")
        self.annotations[a] = kind
        self._record(step, axis=a.name)
        return a

    def vectorize(self, axis):
        """Emit ``axis`` (innermost, constant extent) as SIMD lanes."""
        return self._annotate(axis, "vectorized", "vectorize")

    def unroll(self, axis):
        """Fully unroll ``axis`` (constant extent)."""
        return self._annotate(axis, "unrolled", "unroll")

    def parallel(self, axis):
        """Run iterations of ``axis`` across CPU threads."""
        return self._annotate(axis, "parallel", "parallel")

    def vthread(self, axis):
        """Mark ``axis`` as a virtual thread: interleaved by accelerator backends, a plain
        serial loop on the CPU."""
        return self._annotate(axis, "vthread", "vthread")

    def bind(self, axis, thread: str):
        """Run ``axis`` as GPU launch index ``thread`` (one of ``THREAD_TAGS``: ``blockIdx.x``
        ... ``threadIdx.z``): each block / thread computes one iteration. The same tag in
        another stage means the same hardware index (a stage computed at a thread loop and
        bound to ``threadIdx.x`` again is fetched cooperatively by the block's threads)."""
        if thread not in THREAD_TAGS:
            raise ValueError(f"cannot bind to {thread!r} (allowed: {', '.join(THREAD_TAGS)})")
        a = self.axis(axis)
        if a.kind == "reduce":
            raise ValueError(
                f"cannot bind reduce axis {a.name} to {thread} (a data axis is needed)"
            )
        taken = [x.name for x, k in self.annotations.items() if k == thread and x in self.leaf]
        if taken:
            raise ValueError(f"stage {self.name} already binds {taken[0]} to {thread}")
        self.annotations[a] = thread
        self._record("bind", axis=a.name, thread=thread)
        return a

    def tensorize(self, axis, intrin):
        """Replace the sub-nest from ``axis`` inwards by ``intrin`` (checked at lowering)."""
        a = self.axis(axis)
        self.tensorized[a] = intrin
        self._record("tensorize", axis=a.name, intrin=intrin.name)
        return a

    # -- placement -------------------------------------------------------------------------
    def compute_at(self, parent: Stage, axis):
        """Compute this stage inside loop ``axis`` of consumer stage ``parent``."""
        if not isinstance(parent, Stage):
            raise TypeError(f"compute_at target must be a Stage, got {type(parent).__name__}")
        a = parent.axis(axis)
        consumers = self.sch.consumers(self)
        if parent not in consumers:
            raise ValueError(
                f"compute_at: {parent.name} does not consume {self.name} "
                f"(its consumers: {[c.name for c in consumers] or 'none, it is an output'})"
            )
        if len(consumers) > 1:
            raise ValueError(
                f"compute_at: {self.name} has several consumers "
                f"({[c.name for c in consumers]}); compute it at the root instead"
            )
        if self.sch.is_output(self):
            raise ValueError(f"compute_at: {self.name} is an output and must stay at the root")
        self.attach = ("at", parent, a)
        self._record("compute_at", target=parent.name, axis=a.name)

    def compute_inline(self):
        """Substitute this stage's expression into its consumers (no buffer, no loops)."""
        if any(a.kind == "reduce" for a in self.root):
            raise ValueError(f"compute_inline: {self.name} is a reduction and cannot be inlined")
        if self.sch.is_output(self):
            raise ValueError(f"compute_inline: {self.name} is an output")
        self.attach = ("inline",)
        self._record("compute_inline")

    def compute_root(self):
        self.attach = ("root",)
        self._record("compute_root")

    def set_scope(self, scope: str):
        if not isinstance(scope, str) or not scope:
            raise ValueError(f"scope must be a non-empty string, got {scope!r}")
        self.scope = scope
        self._record("set_scope", scope=scope)


class Schedule:
    """Stages of the ops reachable from ``outputs`` (producers first) and the steps taken."""

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.steps: list[Step] = []
        self.stages: list[Stage] = []
        self._by_tensor: dict = {}
        self.placeholders: list[Tensor] = []
        seen: set = set()

        def visit(t: Tensor) -> None:
            if t in seen:
                return
            seen.add(t)
            if isinstance(t.op, PlaceholderOp):
                self.placeholders.append(t)
                return
            for x in t.op.inputs:
                visit(x)
            self._add_stage(Stage(self, t))

        for t in self.outputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"schedule outputs must be Tensors, got {type(t).__name__}")
            visit(t)
        names = [s.name for s in self.stages] + [p.name for p in self.placeholders]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"tensor names must be unique within a schedule; repeated: {dup}")

    def _add_stage(self, st: Stage, before: Stage | None = None) -> None:
        if before is None:
            self.stages.append(st)
        else:
            self.stages.insert(self.stages.index(before), st)
        self._by_tensor[st.tensor] = st

    def __getitem__(self, ref) -> Stage:
        if isinstance(ref, Stage):
            return ref
        for st in self.stages:
            if st.tensor is ref or st.name == ref:
                return st
        name = getattr(ref, "name", ref)
        raise KeyError(
            f"no stage {name!r} in this schedule (stages: {[s.name for s in self.stages]}; "
            "placeholders have none)"
        )

    def tensor(self, name: str) -> Tensor:
        for t in self.placeholders:
            if t.name == name:
                return t
        return self[name].tensor

    def stage_of(self, t: Tensor) -> Stage | None:
        return self._by_tensor.get(t)

    def is_output(self, st: Stage) -> bool:
        return st.tensor in self.outputs

    def reads(self, st: Stage) -> list[Tensor]:
        out: dict = {}
        stack = [st.body]
        from pyvta.compiler.ir.expr import children

        while stack:
            n = stack.pop()
            if isinstance(n, TensorRead):
                out.setdefault(n.tensor, None)
            stack.extend(children(n))
        return list(out)

    def consumers(self, st: Stage) -> list[Stage]:
        """Non-inlined stages that read ``st`` (looking through inlined stages)."""
        out = []
        for c in self.stages:
            if st.tensor in self.reads(c):
                if c.attach[0] == "inline":
                    out.extend(x for x in self.consumers(c) if x not in out)
                elif c not in out:
                    out.append(c)
        return out

    # -- caching ---------------------------------------------------------------------------
    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """A copy ``<name>.<scope>`` of ``tensor`` that ``readers`` read instead. Returns it."""
        readers = [self[r] for r in readers]
        if not readers:
            raise ValueError("cache_read needs at least one reader stage")
        for r in readers:
            if tensor not in self.reads(r):
                raise ValueError(f"cache_read: stage {r.name} does not read {tensor.name}")
        name = f"{tensor.name}.{scope}"
        axes = [IterVar(f"ax{d}", n) for d, n in enumerate(tensor.shape)]
        body = tensor(*[a.var for a in axes])
        cache = ComputeOp(name, axes, body).output
        for r in readers:
            r.body = _replace_reads(r.body, tensor, cache)
        st = Stage(self, cache)
        st.scope = scope
        first = min(self.stages.index(r) for r in readers)
        self._add_stage(st, before=self.stages[first])
        self.steps.append(
            Step("cache_read", tensor.name, {"scope": scope, "readers": [r.name for r in readers]})
        )
        return cache

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into ``<name>.<scope>`` and make ``tensor`` a copy of it.

        Must come before any loop transformation of ``tensor``'s stage. Returns the cache."""
        st = self[tensor]
        if st.relations or st.annotations or st.attach != ("root",):
            raise ValueError(f"cache_write on {st.name} must come before its other steps")
        name = f"{st.name}.{scope}"
        op = st.op
        axes = [IterVar(f"{a.name}.c", a.extent) for a in op.axis]
        vmap = {a.var: b.var for a, b in zip(op.axis, axes, strict=True)}
        from pyvta.compiler.ir.expr import substitute

        body = substitute(st.body, vmap)
        cache = ComputeOp(name, axes, body, op.tag).output
        cst = Stage(self, cache)
        cst.scope = scope
        # the original stage becomes a copy without reduction axes
        st.body = cache(*[a.var for a in op.axis])
        st.root = [a for a in st.root if a.kind == "data"]
        st.leaf = list(st.root)
        st._names = {a.name: a for a in st.root}
        self._add_stage(cst, before=st)
        self.steps.append(Step("cache_write", st.name, {"scope": scope}))
        return cache


def _replace_reads(e, old: Tensor, new: Tensor):
    def f(n):
        if isinstance(n, TensorRead) and n.tensor is old:
            return TensorRead(new, n.indices)
        return None

    return transform(e, f)


def create_schedule(outputs) -> Schedule:
    """A default schedule (every stage at the root, loops in axis order) for ``outputs``."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    return Schedule(outputs)
