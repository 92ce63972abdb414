"""Loop IR -> LLVM IR (llvmlite.ir).

The generated function is ``void name(i8* p0, i8* p1, ...)``, one pointer per buffer parameter.
``vectorized`` loops become explicit SIMD code (contiguous loads/stores, broadcasts, gathers
when the index is not unit-stride); a body that cannot be vectorized falls back to a scalar loop.
``parallel`` loops are outlined into ``i8* body(i8* closure)`` functions run by
``target.num_threads`` threads of the runtime's persistent pool (``runtime.py``).
"""

from __future__ import annotations

from llvmlite import ir

from pyvta.compiler.backend.llvm.dots import IntDots
from pyvta.compiler.backend.llvm.frame import (
    ELEM_BYTES,
    F32,
    I1,
    I8,
    I8P,
    I32,
    I64,
    LLTYPE,
    MEM_TYPE,
    FnState,
)
from pyvta.compiler.backend.llvm.indices import AFFINE_OPS, AffineIndices
from pyvta.compiler.backend.llvm.parallel import emit_parallel
from pyvta.compiler.backend.llvm.vector import (
    MAX_SHUFFLED_STRIDE,
    lane_coef,
    masked_load_ok,
    row_column,
    row_gather,
    vectorizable,
    walk_exprs,
)
from pyvta.compiler.ir.expr import (
    BinOp,
    Call,
    Cast,
    Compare,
    FloatImm,
    IntImm,
    Load,
    Not,
    Select,
    Var,
    free_vars,
    is_float,
    substitute,
)
from pyvta.compiler.ir.stmt import (
    Allocate,
    Evaluate,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Seq,
    Store,
)
from pyvta.isa.errors import PyvtaError


class CodegenError(PyvtaError, ValueError):
    pass


class CodeGen(IntDots, AffineIndices):
    """Emits one ``PrimFunc`` (plus its outlined parallel bodies) into an LLVM module."""

    def __init__(self, func: PrimFunc, target, scopes):
        self.func, self.target, self.scopes = func, target, scopes
        self.module = ir.Module(name=func.name)
        self.module.triple = target.triple
        self._par_count = 0  # outlined parallel bodies so far (for unique names)
        self._par_depth = 0  # > 0 inside a parallel body: nested parallel loops run serially
        self.lanes = None  # (Var, n, min) while emitting a vectorized body
        self._decls: dict = {}

    # -- module level ----------------------------------------------------------------------
    def _decl(self, name: str, ret, args):
        if name not in self._decls:
            self._decls[name] = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return self._decls[name]

    def _intrinsic(self, name: str, ty, nargs: int):
        """Declare overloaded LLVM intrinsic ``name`` for ``ty`` (scalar or vector)."""

        def suffix(t):
            if isinstance(t, ir.VectorType):
                return f"v{t.count}{suffix(t.element)}"
            return "f32" if t == F32 else f"i{t.width}"

        return self._decl(f"{name}.{suffix(ty)}", ty, [ty] * nargs)

    def generate(self) -> ir.Module:
        bufs = self.func.params + self.func.workspace
        fty = ir.FunctionType(ir.VoidType(), [I8P] * len(bufs))
        fn = ir.Function(self.module, fty, name=self.func.name)
        st = FnState(fn)
        for arg, buf in zip(fn.args, bufs, strict=True):
            arg.name = buf.name
            arg.add_attribute("noalias")
            st.bufs[buf] = st.builder.bitcast(arg, MEM_TYPE[buf.dtype].as_pointer())
        self.st = st
        self.stmt(self.func.body)
        self._finish(st)
        return self.module

    def _finish(self, st: FnState, ret=None):
        b = st.builder
        if ret is None:
            b.ret_void()
        else:
            b.ret(ret)
        with b.goto_block(st.entry):
            b.branch(st.body_start)

    @property
    def b(self) -> ir.IRBuilder:
        return self.st.builder

    # -- statements ------------------------------------------------------------------------
    def stmt(self, s) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Let):
            self.st.vars[s.var] = self.expr(s.value)
            with self.st.scope():
                self.stmt(s.body)
        elif isinstance(s, IfThenElse):
            self._hoist_index_parts([s.then] if s.orelse is None else [s.then, s.orelse])
            cond = self.expr(s.cond)
            if s.orelse is None:
                with self.b.if_then(cond), self.st.scope():
                    self.stmt(s.then)
            else:
                with self.b.if_else(cond) as (then, orelse):
                    with then, self.st.scope():
                        self.stmt(s.then)
                    with orelse, self.st.scope():
                        self.stmt(s.orelse)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        else:
            raise CodegenError(f"cannot generate code for {type(s).__name__}")

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        info = self.scopes.get(buf.scope)
        nbytes = buf.size_elems * ELEM_BYTES[buf.dtype]
        if info.max_bytes is not None and nbytes > info.max_bytes:
            raise CodegenError(
                f"buffer {buf.name} needs {nbytes} bytes; scope {buf.scope!r} holds at most "
                f"{info.max_bytes}"
            )
        ety = MEM_TYPE[buf.dtype]
        if info.on_stack:
            with self.b.goto_block(self.st.entry):
                ptr = self.b.alloca(ir.ArrayType(ety, buf.size_elems), name=buf.name)
                ptr.align = info.alignment_bytes
            self.st.bufs[buf] = self.b.bitcast(ptr, ety.as_pointer())
            self.stmt(s.body)
            return
        alloc = self._decl("aligned_alloc", I8P, [I64, I64])
        size = -(-nbytes // info.alignment_bytes) * info.alignment_bytes
        raw = self.b.call(alloc, [ir.Constant(I64, info.alignment_bytes), ir.Constant(I64, size)])
        self.st.bufs[buf] = self.b.bitcast(raw, ety.as_pointer())
        self.stmt(s.body)
        self.b.call(self._decl("free", ir.VoidType(), [I8P]), [raw])

    def _serial_loop(self, var: Var, lo, ext, emit_body, step: int = 1) -> None:
        b = self.b
        pre = b.block
        header = b.append_basic_block(f"{var.name}.header")
        body = b.append_basic_block(f"{var.name}.body")
        exit_ = b.append_basic_block(f"{var.name}.exit")
        end = b.add(lo, ext)
        b.branch(header)
        b.position_at_end(header)
        phi = b.phi(I32, name=var.name)
        phi.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", phi, end), body, exit_)
        b.position_at_end(body)
        self.st.vars[var] = phi
        with self.st.scope():
            emit_body()
        nxt = b.add(phi, ir.Constant(I32, step), flags=["nsw"])
        phi.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(exit_)

    def loop(self, s: For) -> None:
        lo, ext = self.expr(s.min), self.expr(s.extent)
        if s.kind == "vectorized" and self.lanes is None and vectorizable(s):
            n = s.extent.value
            self.st.vars[s.var] = ir.Constant(I32, 0)
            self.lanes = (s.var, n, lo)
            try:  # straight-line code: what it emits (no lane's index) serves what follows
                self.stmt(s.body)
            finally:
                self.lanes = None
            return
        if s.kind == "parallel" and self.target.num_threads > 1 and self._par_depth == 0:
            emit_parallel(self, s, lo, ext)
            return
        self._serial_loop(s.var, lo, ext, lambda: self.stmt(s.body))

    # -- memory ----------------------------------------------------------------------------
    def _ptr(self, buf, index_value, vector=None):
        """``&buf[index_value]`` (``vector``: as a pointer to that vector type), emitted once
        in scope (``FnState.pointer``)."""
        if buf not in self.st.bufs:
            raise CodegenError(f"buffer {buf.name} is not allocated here")
        return self.st.pointer(self.st.bufs[buf], index_value, vector)

    def store(self, s: Store) -> None:
        if self.lanes is None:
            val = self.expr(s.value)
            if s.buffer.dtype == "bool":
                val = self.b.zext(val, I8)
            self.b.store(val, self._ptr(s.buffer, self.expr(s.index)))
            return
        var, n, _ = self.lanes
        coef = lane_coef(s.index, var)
        val = self.expr(s.value)
        if coef == 0:
            self.b.store(self._scalar(val), self._ptr(s.buffer, self.expr(s.index)))
            return
        val = self._bcast(val, n)
        if coef == 1:
            base = self.expr(substitute(s.index, {var: IntImm(0)}))
            p = self._ptr(s.buffer, base, ir.VectorType(MEM_TYPE[s.buffer.dtype], n))
            self.b.store(val, p, align=ELEM_BYTES[s.buffer.dtype])
            return
        idx = self._bcast(self.expr(s.index), n)
        for lane in range(n):
            li = self.b.extract_element(idx, ir.Constant(I32, lane))
            self.b.store(
                self.b.extract_element(val, ir.Constant(I32, lane)), self._ptr(s.buffer, li)
            )

    def load(self, e: Load):
        ety = MEM_TYPE[e.buffer.dtype]
        if self.lanes is None:
            v = self.b.load(self._ptr(e.buffer, self.expr(e.index)))
            return self.b.trunc(v, I1) if e.dtype == "bool" else v
        var, n, _ = self.lanes
        coef = lane_coef(e.index, var)
        if coef == 0:
            return self.b.load(self._ptr(e.buffer, self.expr(e.index)))
        if coef == 1:
            base = self.expr(substitute(e.index, {var: IntImm(0)}))
            p = self._ptr(e.buffer, base, ir.VectorType(ety, n))
            return self.b.load(p, align=ELEM_BYTES[e.buffer.dtype])
        if coef is not None and 1 < coef <= MAX_SHUFFLED_STRIDE:
            true = ir.Constant(ir.VectorType(I1, n), [1] * n)
            undef = ir.Constant(ir.VectorType(ety, n), ir.Undefined)
            return self._strided_masked_load(e, coef, true, undef)
        col = row_column(e.index, var, coef, e.buffer) if coef is not None else None
        if col is not None:
            return self._column_load(e, coef, col)
        gather = row_gather(e.index, var, n, e.buffer) if coef is None else None
        if gather is not None:
            return self._row_gather_load(e, *gather)
        idx = self._bcast(self.expr(e.index), n)
        out = ir.Constant(ir.VectorType(ety, n), ir.Undefined)
        for lane in range(n):
            li = self.b.extract_element(idx, ir.Constant(I32, lane))
            out = self.b.insert_element(
                out, self.b.load(self._ptr(e.buffer, li)), ir.Constant(I32, lane)
            )
        return out

    # -- expressions -----------------------------------------------------------------------
    @staticmethod
    def _is_vec(v) -> bool:
        return isinstance(v.type, ir.VectorType)

    def _bcast(self, v, n):
        if self._is_vec(v):
            return v
        vt = ir.VectorType(v.type, n)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v.constant] * n)
        tmp = self.b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(
            tmp, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n)
        )

    def _scalar(self, v):
        return self.b.extract_element(v, ir.Constant(I32, 0)) if self._is_vec(v) else v

    def _pair(self, a, b):
        if self._is_vec(a) or self._is_vec(b):
            n = (a.type if self._is_vec(a) else b.type).count
            return self._bcast(a, n), self._bcast(b, n)
        return a, b

    def expr(self, e):
        if isinstance(e, Var):
            if self.lanes is not None and e is self.lanes[0]:
                n, lo = self.lanes[1], self.lanes[2]
                ramp = ir.Constant(ir.VectorType(I32, n), list(range(n)))
                return (
                    ramp
                    if isinstance(lo, ir.Constant) and lo.constant == 0
                    else self.b.add(self._bcast(lo, n), ramp)
                )
            if e not in self.st.vars:
                raise CodegenError(f"variable {e.name} is not bound")
            return self.st.vars[e]
        if isinstance(e, IntImm):
            return ir.Constant(LLTYPE[e.dtype], e.value)
        if isinstance(e, FloatImm):
            return ir.Constant(LLTYPE[e.dtype], e.value)
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Compare):
            a, b = self._pair(self.expr(e.a), self.expr(e.b))
            if is_float(e.a.dtype):
                return self.b.fcmp_ordered(e.op, a, b)
            return self.b.icmp_signed(e.op, a, b)
        if isinstance(e, Not):
            return self.b.not_(self.expr(e.a))
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, Call):
            return self.call(e)
        raise CodegenError(f"cannot generate code for expression {type(e).__name__}: {e}")

    def _fmuladd(self, e: BinOp):
        """``x * y + z`` as ``llvm.fmuladd`` so the backend may fuse it into one FMA."""
        mul, other = (e.a, e.b) if isinstance(e.a, BinOp) and e.a.op == "*" else (e.b, e.a)
        x, y, z = self.expr(mul.a), self.expr(mul.b), self.expr(other)
        n = next((v.type.count for v in (x, y, z) if self._is_vec(v)), None)
        if n is not None:
            x, y, z = self._bcast(x, n), self._bcast(y, n), self._bcast(z, n)
        fn = self._intrinsic("llvm.fmuladd", x.type, 3)
        return self.b.call(fn, [x, y, z])

    def binop(self, e: BinOp):
        if e.op in AFFINE_OPS:
            v = self._affine(e)
            if v is not None:
                return v
        if (
            e.op == "+"
            and is_float(e.dtype)
            and any(isinstance(x, BinOp) and x.op == "*" for x in (e.a, e.b))
        ):
            return self._fmuladd(e)
        if e.op == "+" and isinstance(e.b, Call) and e.b.name == "dot_u8s8x4":
            return self._dot_u8s8x4(e.b, self.expr(e.a))  # vpdpbusd accumulates
        a, b = self._pair(self.expr(e.a), self.expr(e.b))
        bd, op, fl = self.b, e.op, is_float(e.dtype)
        if op == "+":
            return bd.fadd(a, b) if fl else bd.add(a, b)
        if op == "-":
            return bd.fsub(a, b) if fl else bd.sub(a, b)
        if op == "*":
            return bd.fmul(a, b) if fl else bd.mul(a, b)
        if op == "/":
            return bd.fdiv(a, b)
        if op in ("min", "max"):
            if fl:
                # llvm.minimum/maximum propagate NaN as numpy's minimum/maximum do
                # (minnum/maxnum would return the other operand)
                name = "llvm.minimum" if op == "min" else "llvm.maximum"
                fn = self._intrinsic(name, a.type, 2)
                return bd.call(fn, [a, b])
            c = bd.icmp_signed("<" if op == "min" else ">", a, b)
            return bd.select(c, a, b)
        if op == "//":
            q = bd.sdiv(a, b)
            r = bd.srem(a, b)
            zero = ir.Constant(a.type, None)
            fix = bd.and_(
                bd.icmp_signed("!=", r, zero),
                bd.icmp_signed("!=", bd.icmp_signed("<", r, zero), bd.icmp_signed("<", b, zero)),
            )
            return bd.sub(q, bd.zext(fix, a.type))
        if op == "%":
            r = bd.srem(a, b)
            zero = ir.Constant(a.type, None)
            fix = bd.and_(
                bd.icmp_signed("!=", r, zero),
                bd.icmp_signed("!=", bd.icmp_signed("<", r, zero), bd.icmp_signed("<", b, zero)),
            )
            return bd.select(fix, bd.add(r, b), r)
        if op == ">>":
            return bd.ashr(a, b)
        if op == "<<":
            return bd.shl(a, b)
        if op == "&&":
            return bd.and_(a, b)
        if op == "||":
            return bd.or_(a, b)
        raise CodegenError(f"unknown binary op {op}")

    def select(self, e: Select):
        """A select whose sides load: a masked vector load where the condition varies over
        the lanes, else a branch around the loads (a condition the same for every lane, such
        as a padded row's: one compare and a well-predicted jump). As masked loads, the
        depthwise 3x3 convs of MobileNet (reading their padding through such selects) ran
        2.7-3.4x slower on a Zen 1 (AVX2, one thread)."""
        has_load = any(isinstance(x, Load) for x in walk_exprs(e.t)) or any(
            isinstance(x, Load) for x in walk_exprs(e.f)
        )
        var = None if self.lanes is None else self.lanes[0]
        if has_load and var in free_vars(e.cond) and masked_load_ok(e, var):
            return self._masked_load(e)
        cond = self.expr(e.cond)
        if not has_load or self._is_vec(cond):
            c = cond
            t, f = self._pair(self.expr(e.t), self.expr(e.f))
            if self._is_vec(t) and not self._is_vec(c):
                c = self._bcast(c, t.type.count)
            elif self._is_vec(c):
                t, f = self._bcast(t, c.type.count), self._bcast(f, c.type.count)
            return self.b.select(c, t, f)
        self._hoist_index_parts(exprs=(e.t, e.f))
        b = self.b
        then_bb = b.append_basic_block("sel.then")
        else_bb = b.append_basic_block("sel.else")
        join = b.append_basic_block("sel.join")
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        with self.st.scope():
            tv = self.expr(e.t)
        then_end = b.block
        b.position_at_end(else_bb)
        with self.st.scope():
            fv = self.expr(e.f)
        else_end = b.block
        n = next((v.type.count for v in (tv, fv) if self._is_vec(v)), None)
        b.position_at_end(then_end)
        if n is not None:
            tv = self._bcast(tv, n)
        then_end = b.block
        b.branch(join)
        b.position_at_end(else_end)
        if n is not None:
            fv = self._bcast(fv, n)
        else_end = b.block
        b.branch(join)
        b.position_at_end(join)
        phi = b.phi(tv.type)
        phi.add_incoming(tv, then_end)
        phi.add_incoming(fv, else_end)
        return phi

    def _masked_load(self, e: Select):
        var, n, _ = self.lanes
        mask = self._bcast(self.expr(e.cond), n)
        passthru = self._bcast(self.expr(e.f), n)
        return self._strided_masked_load(e.t, lane_coef(e.t.index, var), mask, passthru)

    def _strided_masked_load(self, ld: Load, stride: int, mask, passthru):
        """Lanes ``ld.buffer[base + stride * lane]`` where ``mask``, else ``passthru``: one
        masked load of ``stride * n`` contiguous elements (only the used lanes enabled, so
        nothing outside the mask is touched), then a shuffle picking every ``stride``-th."""
        var, n, _ = self.lanes
        ety = MEM_TYPE[ld.buffer.dtype]
        wide = n * stride
        vt = ir.VectorType(ety, wide)
        if stride == 1:
            wmask, wpass = mask, passthru
        else:
            false = ir.Constant(ir.VectorType(I1, n), [0] * n)
            picks = [i // stride if i % stride == 0 else n + i % n for i in range(wide)]
            wmask = self.b.shuffle_vector(mask, false, ir.Constant(ir.VectorType(I32, wide), picks))
            wpass = ir.Constant(vt, ir.Undefined)
        base = self.expr(substitute(ld.index, {var: IntImm(0)}))
        ptr = self.b.gep(self.st.bufs[ld.buffer], [base])  # may point outside: lanes masked
        vptr = self.b.bitcast(ptr, vt.as_pointer())
        sfx = f"v{wide}{'f32' if ety == F32 else f'i{ety.width}'}"
        fn = self._decl(
            f"llvm.masked.load.{sfx}.p0", vt, [vt.as_pointer(), I32, ir.VectorType(I1, wide), vt]
        )
        align = ir.Constant(I32, ELEM_BYTES[ld.buffer.dtype])
        got = self.b.call(fn, [vptr, align, wmask, wpass])
        if stride == 1:
            return got
        even = ir.Constant(ir.VectorType(I32, n), [i * stride for i in range(n)])
        picked = self.b.shuffle_vector(got, ir.Constant(vt, ir.Undefined), even)
        return self.b.select(mask, picked, passthru)

    def _column_load(self, ld: Load, stride: int, col: int):
        """Column ``col`` of the ``n`` rows of ``stride`` elements the lanes read
        (:func:`row_column`): one load of the rows, a shuffle picking the column. The loads of
        the other columns (an unrolled loop over them) load the same rows: LLVM loads them
        once and the gather becomes a transpose in registers (shuffles, no per-lane loads)."""
        var, n, _ = self.lanes
        vt = ir.VectorType(MEM_TYPE[ld.buffer.dtype], n * stride)
        start = self.expr(substitute(ld.index, {var: IntImm(0)}))
        start = self.b.sub(start, ir.Constant(start.type, col)) if col else start
        p = self._ptr(ld.buffer, start, vt)
        rows = self.b.load(p, align=ELEM_BYTES[ld.buffer.dtype])
        picks = ir.Constant(ir.VectorType(I32, n), [col + stride * i for i in range(n)])
        return self.b.shuffle_vector(rows, ir.Constant(vt, ir.Undefined), picks)

    def _row_gather_load(self, ld: Load, col0: int, columns: tuple[int, ...]):
        """The lanes' elements of one row (:func:`row_gather`): one load of the row (from lane
        0's element less ``col0``), a shuffle picking ``columns``."""
        var, n, _ = self.lanes
        row = ld.buffer.shape[-1]
        vt = ir.VectorType(MEM_TYPE[ld.buffer.dtype], row)
        start = self.expr(substitute(ld.index, {var: IntImm(0)}))
        start = self.b.sub(start, ir.Constant(start.type, col0)) if col0 else start
        p = self._ptr(ld.buffer, start, vt)
        got = self.b.load(p, align=ELEM_BYTES[ld.buffer.dtype])
        picks = ir.Constant(ir.VectorType(I32, n), list(columns))
        return self.b.shuffle_vector(got, ir.Constant(vt, ir.Undefined), picks)

    def cast(self, e: Cast):
        v = self.expr(e.value)
        src, dst = e.value.dtype, e.dtype
        n = v.type.count if self._is_vec(v) else None
        to = LLTYPE[dst] if n is None else ir.VectorType(LLTYPE[dst], n)
        bd = self.b
        if src == dst:
            return v
        if dst == "bool":
            zero = ir.Constant(v.type, None)
            return (
                bd.fcmp_ordered("!=", v, zero) if is_float(src) else bd.icmp_signed("!=", v, zero)
            )
        if src == "bool":
            return bd.uitofp(v, to) if is_float(dst) else bd.zext(v, to)
        if is_float(src) and is_float(dst):
            return v
        if is_float(src):
            return bd.fptosi(v, to)
        if is_float(dst):
            return bd.sitofp(v, to)
        sw, dw = ELEM_BYTES[src], ELEM_BYTES[dst]
        return bd.trunc(v, to) if dw < sw else bd.sext(v, to)

    def call(self, e: Call):
        if e.name == "dot_i16x2":
            return self._dot_i16x2(e)
        if e.name == "dot_u8s8x4":
            return self._dot_u8s8x4(e)
        if e.name == "dot_u7s8x4":
            return self._dot_u7s8x4(e)
        if e.name == "dot_u7s8x4_sum":
            return self._dot_u7s8x4_sum(e)
        if e.name in ("exp", "sqrt", "fabs"):
            args = [self.expr(a) for a in e.args]
            fn = self._intrinsic(f"llvm.{e.name}", args[0].type, 1)
            return self.b.call(fn, args)
        raise CodegenError(
            f"intrinsic {e.name!r} has no CPU implementation (known: exp, sqrt, fabs)"
        )
