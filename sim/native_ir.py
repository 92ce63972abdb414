"""LLVM IR of the native engine's kernels, specialised to one HwConfig (sizes are constants).

One module holds one entry point, ``pyvta_sim_exec(recs, n_recs, bufs) -> i64``: it runs ``n_recs``
plan records (``sim/plan.py`` writes them: REC_WORDS int64 each) against the buffers whose
addresses ``bufs`` holds (``BUF_*`` order) and returns -1, or the position of the first record
whose instruction breaks a rule (ACC hazard, SRAM bounds of a micro-op loop); nothing of that
record has run then. Records:

- COPY_IN: a 2-D strided DRAM read into consecutive SRAM rows with zero padding (every LOAD but
  ACC_8BIT, whose SRAM row is the DRAM element);
- LOAD_ACC8: the same with int8 DRAM elements sign-extended into int32 ACC lanes;
- STORE: OUT rows to strided DRAM rows, in row order;
- WGT_PAIRS: refresh rows of the weight copy the GEMM kernel reads (int16, input lanes in pairs:
  ``(wgt_depth, block_in/2, block_out, 2)``), after a WGT load;
- GEMM: the micro-op loop as int16 pair dot products (``pmaddwd`` on x86: exact, int8 x int8
  products of two lanes summed in int32), or a reset;
- ALU: the micro-op loop over int32 lanes, one vector loop per opcode.
"""

from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from pyvta.isa import AluOp, HwConfig, uop_layout
from pyvta.sim.plan import (
    BUF_ACC,
    BUF_DRAM,
    BUF_INP,
    BUF_OUT,
    BUF_SCRATCH,
    BUF_UOP,
    BUF_WGT,
    BUF_WPAIRS,
    N_BUFS,
    OP_ALU,
    OP_COPY_IN,
    OP_GEMM,
    OP_LOAD_ACC8,
    OP_STORE,
    OP_WGT_PAIRS,
    REC_WORDS,
)

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
ENTRY = "pyvta_sim_exec"


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


@contextmanager
def counted(b: ir.IRBuilder, stop, start=None):
    """``for i in range(start, stop)`` (i64); the body is the with-block."""
    with b.goto_entry_block():
        var = b.alloca(I64)
    b.store(start if start is not None else c64(0), var)
    fn = b.function
    head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.load(var)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    yield i
    b.store(b.add(i, c64(1)), var)
    b.branch(head)
    b.position_at_end(done)


def _factors(f) -> dict:
    """(out, in) factors of each operand in a GEMM/ALU record: words 6..11.

    Micro-op loop records: word 1 reset (GEMM) or opcode (ALU), 2 uop_bgn, 3 uop_end,
    4 iter_out, 5 iter_in, 6..11 the factors; ALU: 12 use_imm, 13 imm."""
    return {"dst": (f[6], f[7]), "src": (f[8], f[9]), "wgt": (f[10], f[11])}


def _mask(lanes) -> ir.Constant:
    """A shufflevector mask."""
    lanes = list(lanes)
    return ir.Constant(ir.VectorType(I32, len(lanes)), lanes)


def _ptr(b: ir.IRBuilder, base, index, ty):
    """Pointer to element ``index`` of type ``ty`` from an i8* ``base`` (byte address math)."""
    return b.bitcast(b.gep(b.bitcast(base, ty.as_pointer()), [index]), ty.as_pointer())


def _vload(b, base_elem_ptr, vty):
    v = b.load(b.bitcast(base_elem_ptr, vty.as_pointer()))
    v.align = 1
    return v


def _vstore(b, value, base_elem_ptr):
    s = b.store(value, b.bitcast(base_elem_ptr, value.type.as_pointer()))
    s.align = 1


class KernelModule:
    """Builds the IR text of the kernels for ``cfg`` (generic IR: LLVM picks the host's SIMD)."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        self.mod = ir.Module("pyvta_sim")
        p8 = I8.as_pointer()
        self.memcpy = self.mod.declare_intrinsic("llvm.memcpy", [p8, p8, I64])
        self.memset = self.mod.declare_intrinsic("llvm.memset", [p8, I64])
        self.uop_fields = {f.name: (f.lsb, f.mask) for f in uop_layout(cfg)}
        sig = ir.FunctionType(I64, [I64.as_pointer(), I64.as_pointer()])
        self.fns = {
            OP_COPY_IN: self._copy_in(sig),
            OP_LOAD_ACC8: self._load_acc8(sig),
            OP_STORE: self._store(sig),
            OP_WGT_PAIRS: self._wgt_pairs(sig),
            OP_GEMM: self._gemm(sig),
            OP_ALU: self._alu(sig),
        }
        self._entry()

    def text(self) -> str:
        return str(self.mod)

    # ---- helpers ------------------------------------------------------------------------------

    def _begin(self, sig, name):
        fn = ir.Function(self.mod, sig, name)
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        rec, bufs = fn.args
        fields = [b.load(b.gep(rec, [c64(k)])) for k in range(REC_WORDS)]
        buf = [b.inttoptr(b.load(b.gep(bufs, [c64(k)])), I8.as_pointer()) for k in range(N_BUFS)]
        return fn, b, fields, buf

    def _zero(self, b, ptr, nbytes):
        b.call(self.memset, [ptr, ir.Constant(I8, 0), nbytes, ir.Constant(I1, 0)])

    def _copy(self, b, dst, src, nbytes):
        b.call(self.memcpy, [dst, src, nbytes, ir.Constant(I1, 0)])

    # ---- loads and stores ---------------------------------------------------------------------

    def _padded_rows(self, b, f, dram, sram, row_bytes, copy_row):
        """Rows of a padded 2-D load: y0 zero rows, y rows of (x0 zeros, data, x1 zeros), y1.

        Record words 2..10: SRAM byte offset, DRAM byte start, y, x, DRAM row stride in bytes,
        y0, y1, x0, x1. ``copy_row(b, sram_ptr, dram_ptr, x)`` moves one row of data."""
        dst0, start, y, x, stride = f[2], f[3], f[4], f[5], f[6]
        y0, y1, x0, x1 = f[7], f[8], f[9], f[10]
        line = b.mul(b.add(b.add(x0, x), x1), row_bytes)
        with counted(b, b.add(b.add(y0, y), y1)) as r:
            out = b.gep(sram, [b.add(dst0, b.mul(r, line))])
            inside = b.and_(b.icmp_signed(">=", r, y0), b.icmp_signed("<", r, b.add(y0, y)))
            with b.if_else(inside) as (then, other):
                with then:
                    self._zero(b, out, b.mul(x0, row_bytes))
                    src = b.gep(dram, [b.add(start, b.mul(b.sub(r, y0), stride))])
                    copy_row(b, b.gep(out, [b.mul(x0, row_bytes)]), src, x)
                    tail = b.gep(out, [b.mul(b.add(x0, x), row_bytes)])
                    self._zero(b, tail, b.mul(x1, row_bytes))
                with other:
                    self._zero(b, out, line)

    def _copy_in(self, sig):
        """Record word 1: the BUF_* id of the SRAM; word 11: its row bytes (= DRAM element)."""
        fn, b, f, buf = self._begin(sig, "copy_in")
        sram = b.inttoptr(b.load(b.gep(fn.args[1], [f[1]])), I8.as_pointer())
        row_bytes = f[11]

        def copy(b, dst, src, x):
            self._copy(b, dst, src, b.mul(x, row_bytes))

        self._padded_rows(b, f, buf[BUF_DRAM], sram, row_bytes, copy)
        b.ret(c64(0))
        return fn

    def _load_acc8(self, sig):
        fn, b, f, buf = self._begin(sig, "load_acc8")
        lanes = self.cfg.batch * self.cfg.block_out

        def widen(b, dst, src, x):
            with counted(b, b.mul(x, c64(lanes))) as e:
                v = b.sext(b.load(b.gep(src, [e])), I32)
                b.store(v, _ptr(b, dst, e, I32))

        self._padded_rows(b, f, buf[BUF_DRAM], buf[BUF_ACC], c64(lanes * 4), widen)
        b.ret(c64(0))
        return fn

    def _store(self, sig):
        fn, b, f, buf = self._begin(sig, "store")
        src0, start, y, x, stride, row_bytes = f[2], f[3], f[4], f[5], f[6], f[11]
        line = b.mul(x, row_bytes)
        with counted(b, y) as r:
            dst = b.gep(buf[BUF_DRAM], [b.add(start, b.mul(r, stride))])
            src = b.gep(buf[BUF_OUT], [b.add(src0, b.mul(r, line))])
            self._copy(b, dst, src, line)
        b.ret(c64(0))
        return fn

    def _wgt_pairs(self, sig):
        fn, b, f, buf = self._begin(sig, "wgt_pairs")
        bi, bo = self.cfg.block_in, self.cfg.block_out
        rows, outs, ins = counted(b, f[3], f[2]), counted(b, c64(bo)), counted(b, c64(bi))
        with rows as row, outs as o, ins as i:
            src = b.add(b.mul(row, c64(bo * bi)), b.add(b.mul(o, c64(bi)), i))
            v = b.sext(b.load(b.gep(buf[BUF_WGT], [src])), I16)
            half, odd = b.lshr(i, c64(1)), b.and_(i, c64(1))
            dst = b.add(
                b.mul(row, c64(bo * bi)),
                b.add(b.mul(half, c64(2 * bo)), b.add(b.mul(o, c64(2)), odd)),
            )
            b.store(v, _ptr(b, buf[BUF_WPAIRS], dst, I16))
        b.ret(c64(0))
        return fn

    # ---- micro-op loops -----------------------------------------------------------------------

    def _loop_prologue(self, b, f, buf, names, depths, check_hazard):
        """Decode micro-ops [bgn, end) into scratch rows (one i64 per field of ``names``), then
        return 1 from the kernel if an operand leaves its SRAM (``depths``) or, where
        ``check_hazard`` is non-zero, two consecutive iterations write one ACC row."""
        bgn, end, io, ii = f[2], f[3], f[4], f[5]
        factors = _factors(f)
        nu = b.sub(end, bgn)
        uop = b.bitcast(buf[BUF_UOP], I32.as_pointer())
        scratch = b.bitcast(buf[BUF_SCRATCH], I64.as_pointer())
        fn = b.function
        with b.goto_entry_block():
            tops = {n: b.alloca(I64) for n in names}
        for n in names:
            b.store(c64(0), tops[n])
        with counted(b, nu) as k:
            word = b.zext(b.load(b.gep(uop, [b.add(bgn, k)])), I64)
            for slot, n in enumerate(names):
                lsb, mask = self.uop_fields[n]
                v = b.and_(b.lshr(word, c64(lsb)), c64(mask))
                b.store(v, b.gep(scratch, [b.add(b.mul(k, c64(len(names))), c64(slot))]))
                old = b.load(tops[n])
                b.store(b.select(b.icmp_signed(">", v, old), v, old), tops[n])
        fail = fn.append_basic_block("fail")
        for n, depth in zip(names, depths, strict=True):
            fo, fi = factors[n]
            top = b.add(
                b.load(tops[n]), b.add(b.mul(b.sub(io, c64(1)), fo), b.mul(b.sub(ii, c64(1)), fi))
            )
            ok = fn.append_basic_block("in_bounds")
            b.cbranch(b.icmp_signed(">=", top, c64(depth)), fail, ok)
            b.position_at_end(ok)
        with b.goto_block(fail):
            b.ret(c64(1))
        if check_hazard is not None:
            with b.if_then(b.icmp_signed("!=", check_hazard, c64(0))):
                self._hazard(b, f, scratch, len(names), fail)

    def _hazard(self, b, f, scratch, n_fields, fail):
        """Branch to ``fail`` when two consecutive iterations write one ACC row. Decided on the
        micro-ops alone: neighbours inside the micro-op list, then the two loop seams
        (j-1 -> j: dst[last] == dst[0] + f_in; i-1 -> i: dst[last] + (iter_in-1) f_in ==
        dst[0] + f_out); dst is field 0 of the scratch rows."""
        nu, io, ii, dfo, dfi = b.sub(f[3], f[2]), f[4], f[5], f[6], f[7]

        def dst(k):
            return b.load(b.gep(scratch, [b.mul(k, c64(n_fields))]))

        def fail_if(cond):
            ok = b.function.append_basic_block("no_hazard")
            b.cbranch(cond, fail, ok)
            b.position_at_end(ok)

        with counted(b, nu, c64(1)) as k:
            fail_if(b.icmp_signed("==", dst(k), dst(b.sub(k, c64(1)))))
        first, last = dst(c64(0)), dst(b.sub(nu, c64(1)))
        seam_j = b.icmp_signed("==", last, b.add(first, dfi))
        fail_if(b.and_(b.icmp_signed(">", ii, c64(1)), seam_j))
        last_row = b.add(last, b.mul(b.sub(ii, c64(1)), dfi))
        seam_i = b.icmp_signed("==", last_row, b.add(first, dfo))
        fail_if(b.and_(b.icmp_signed(">", io, c64(1)), seam_i))

    def _nest(self, b, f, names, body):
        """The loop nest i < iter_out, j < iter_in, k < n_uops; ``body(b, {name: row})``."""
        nu, io, ii = b.sub(f[3], f[2]), f[4], f[5]
        factors = _factors(f)
        scratch = b.bitcast(
            b.inttoptr(b.load(b.gep(b.function.args[1], [c64(BUF_SCRATCH)])), I8.as_pointer()),
            I64.as_pointer(),
        )
        with counted(b, io) as i, counted(b, ii) as j:
            offs = {n: b.add(b.mul(i, factors[n][0]), b.mul(j, factors[n][1])) for n in names}
            with counted(b, nu) as k:
                idx = {}
                for slot, n in enumerate(names):
                    at = b.add(b.mul(k, c64(len(names))), c64(slot))
                    idx[n] = b.add(b.load(b.gep(scratch, [at])), offs[n])
                body(b, idx)

    def _gemm(self, sig):
        fn, b, f, buf = self._begin(sig, "gemm")
        cfg = self.cfg
        names = ("dst", "src", "wgt")
        depths = (cfg.acc_depth, cfg.inp_depth, cfg.wgt_depth)
        reset = f[1]
        self._loop_prologue(b, f, buf, names, depths, b.sub(c64(1), reset))
        is_reset = b.icmp_signed("!=", reset, c64(0))
        acc_row = cfg.batch * cfg.block_out
        with b.if_else(is_reset) as (then, other):
            with then:

                def clear(b, idx):
                    d = idx["dst"]
                    self._zero(
                        b, b.gep(buf[BUF_ACC], [b.mul(d, c64(acc_row * 4))]), c64(acc_row * 4)
                    )
                    self._zero(b, b.gep(buf[BUF_OUT], [b.mul(d, c64(acc_row))]), c64(acc_row))

                self._nest(b, f, names, clear)
            with other:
                self._nest(b, f, names, lambda b, idx: self._dot(b, buf, idx))
        b.ret(c64(0))
        return fn

    def _pair_products(self, b, xb, wv):
        """Sum of adjacent-lane products: <2n x i16> x <2n x i16> -> <n x i32>.

        The x86 backend selects ``vpmaddwd`` for this pattern (exact: int8 products in int32)."""
        n2 = xb.type.count
        wide = ir.VectorType(I32, n2)
        prod = b.mul(b.sext(xb, wide), b.sext(wv, wide))
        even = _mask(range(0, n2, 2))
        odd = _mask(range(1, n2, 2))
        return b.add(b.shuffle_vector(prod, prod, even), b.shuffle_vector(prod, prod, odd))

    def _dot(self, b, buf, idx):
        """ACC[dst] += INP[src] . WGT[wgt]^T for every batch row; OUT[dst] = int8(ACC[dst])."""
        cfg = self.cfg
        bi, bo, batch = cfg.block_in, cfg.block_out, cfg.batch
        d, s, w = idx["dst"], idx["src"], idx["wgt"]
        accv_t = ir.VectorType(I32, bo)
        pairs_t = ir.VectorType(I16, 2 * bo)
        wbase = b.mul(w, c64(bi * bo))
        for bt in range(batch):
            row = b.add(b.mul(d, c64(batch)), c64(bt))
            acc_p = _ptr(b, buf[BUF_ACC], b.mul(row, c64(bo)), I32)
            xbase = b.add(b.mul(s, c64(batch * bi)), c64(bt * bi))
            xrow = _vload(b, b.gep(buf[BUF_INP], [xbase]), ir.VectorType(I8, bi))
            # the input row as int16 lane pairs, one i32 per pair
            xpairs = b.bitcast(b.sext(xrow, ir.VectorType(I16, bi)), ir.VectorType(I32, bi // 2))
            terms = []
            for p in range(bi // 2):
                xb = b.shuffle_vector(xpairs, xpairs, _mask([p] * bo))
                xb = b.bitcast(xb, pairs_t)
                wp = _ptr(b, buf[BUF_WPAIRS], b.add(wbase, c64(p * 2 * bo)), I16)
                terms.append(self._pair_products(b, xb, _vload(b, wp, pairs_t)))
            while len(terms) > 1:
                terms = [b.add(a, c) for a, c in zip(terms[::2], terms[1::2], strict=True)]
            total = b.add(_vload(b, acc_p, accv_t), terms[0])
            _vstore(b, total, acc_p)
            out_p = b.gep(buf[BUF_OUT], [b.mul(row, c64(bo))])
            _vstore(b, b.trunc(total, ir.VectorType(I8, bo)), out_p)

    def _alu(self, sig):
        fn, b, f, buf = self._begin(sig, "alu")
        cfg = self.cfg
        names = ("dst", "src")
        self._loop_prologue(b, f, buf, names, (cfg.acc_depth, cfg.acc_depth), c64(1))
        op, use_imm, imm = f[1], f[12], b.trunc(f[13], I32)
        lanes = cfg.batch * cfg.block_out
        width = min(lanes, 16)
        vt = ir.VectorType(I32, width)
        splat = b.insert_element(ir.Constant(vt, None), imm, ir.Constant(I32, 0))
        splat = b.shuffle_vector(splat, splat, _mask([0] * width))
        imm_on = b.icmp_signed("!=", use_imm, c64(0))
        done = fn.append_basic_block("alu_done")
        sw = b.switch(op, done)
        for alu_op in AluOp:
            blk = fn.append_basic_block(f"alu_{alu_op.name.lower()}")
            sw.add_case(c64(int(alu_op)), blk)
            b.position_at_end(blk)

            def step(b, idx, alu_op=alu_op):
                with counted(b, c64(lanes // width)) as c:
                    a_at = b.add(b.mul(idx["dst"], c64(lanes)), b.mul(c, c64(width)))
                    s_at = b.add(b.mul(idx["src"], c64(lanes)), b.mul(c, c64(width)))
                    a_p = _ptr(b, buf[BUF_ACC], a_at, I32)
                    a = _vload(b, a_p, vt)
                    other = _vload(b, _ptr(b, buf[BUF_ACC], s_at, I32), vt)
                    r = _alu_apply(b, alu_op, a, b.select(imm_on, splat, other))
                    _vstore(b, r, a_p)
                    _vstore(b, b.trunc(r, ir.VectorType(I8, width)), b.gep(buf[BUF_OUT], [a_at]))

            self._nest(b, f, names, step)
            b.branch(done)
        b.position_at_end(done)
        b.ret(c64(0))
        return fn

    # ---- entry --------------------------------------------------------------------------------

    def _entry(self):
        sig = ir.FunctionType(I64, [I64.as_pointer(), I64, I64.as_pointer()])
        fn = ir.Function(self.mod, sig, ENTRY)
        recs, n, bufs = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        with counted(b, n) as r:
            rec = b.gep(recs, [b.mul(r, c64(REC_WORDS))])
            op = b.load(rec)
            nxt = fn.append_basic_block("next")
            bad = fn.append_basic_block("bad")
            sw = b.switch(op, nxt)
            for code, kfn in self.fns.items():
                blk = fn.append_basic_block(f"op{code}")
                sw.add_case(c64(code), blk)
                b.position_at_end(blk)
                status = b.call(kfn, [rec, bufs])
                b.cbranch(b.icmp_signed("!=", status, c64(0)), bad, nxt)
            b.position_at_end(bad)
            b.ret(r)
            b.position_at_end(nxt)
        b.ret(c64(-1))


def _alu_apply(b: ir.IRBuilder, op: AluOp, a, x):
    """One ALU operation on int32 vectors with the exact semantics of ``sim.alu.apply``."""
    vt = a.type
    if op is AluOp.MIN:
        return b.select(b.icmp_signed("<", a, x), a, x)
    if op is AluOp.MAX:
        return b.select(b.icmp_signed(">", a, x), a, x)
    if op is AluOp.ADD:
        return b.add(a, x)
    if op is AluOp.MUL:
        return b.mul(a, x)
    if op is AluOp.CLIP:  # the signed bytes 7..0 (lo) and 15..8 (hi) of x: isa CLIP_DOC
        c24, c16 = (ir.Constant(vt, [n] * vt.count) for n in (24, 16))
        lo = b.ashr(b.shl(x, c24), c24)
        hi = b.ashr(b.shl(x, c16), c24)
        above_lo = b.select(b.icmp_signed(">", a, lo), a, lo)
        return b.select(b.icmp_signed("<", above_lo, hi), above_lo, hi)
    if op is AluOp.SHR:
        zero = ir.Constant(vt, [0] * vt.count)
        top = ir.Constant(vt, [31] * vt.count)
        right_n = b.select(b.icmp_signed("<", x, zero), zero, x)
        right_n = b.select(b.icmp_signed(">", right_n, top), top, right_n)
        neg = b.sub(zero, x)  # as unsigned: |x| for x < 0, 2^31 for INT_MIN
        left_n = b.select(b.icmp_unsigned(">", neg, top), top, neg)
        return b.select(b.icmp_signed(">=", x, zero), b.ashr(a, right_n), b.shl(a, left_n))
    raise ValueError(f"unknown ALU opcode {op!r} (allowed: {', '.join(o.name for o in AluOp)})")
