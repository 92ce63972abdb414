"""Every schedule primitive on small cases: the lowered IR has the expected structure and the
compiled kernel still matches numpy; bad arguments raise clear errors; steps replay."""

import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler import te
from pyvta.compiler.ir import Evaluate, For, IntImm, Store, stmt_str
from pyvta.compiler.ir.expr import Call
from pyvta.compiler.schedule import Step, TensorIntrin, replay, steps_from_json, steps_to_json


def matmul(m=7, n=10, k=5, dtype="float32"):
    a = te.placeholder((m, k), dtype, "A")
    b = te.placeholder((k, n), dtype, "B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return a, b, c


def run_matmul(build, s, args, rng):
    a_np = rng.standard_normal(args[0].shape).astype("float32")
    b_np = rng.standard_normal(args[1].shape).astype("float32")
    c_np = np.zeros(args[2].shape, "float32")
    build(s, args)(a_np, b_np, c_np)
    np.testing.assert_allclose(c_np, a_np @ b_np, rtol=1e-5, atol=1e-5)


def loops(func):
    out = []

    def walk(s):
        if isinstance(s, For):
            out.append(
                (s.var.name, s.extent.value if isinstance(s.extent, IntImm) else None, s.kind)
            )
        for c in getattr(s, "stmts", ()) or [getattr(s, "body", None), getattr(s, "then", None)]:
            if c is not None:
                walk(c)

    walk(func.body)
    return out


def test_split_factor_and_nparts(build, rng):
    a, b, c = matmul()
    s = compiler.create_schedule(c)
    s[c].split("i", 3)
    s[c].split("j", nparts=4)
    names = [(n, e) for n, e, _ in loops(compiler.lower(s, [a, b, c]))]
    assert ("i.outer", 3) in names and ("i.inner", 3) in names
    assert ("j.outer", 4) in names and ("j.inner", 3) in names
    run_matmul(build, s, [a, b, c], rng)


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "4"])
def test_split_rejects_bad_factor(bad):
    a, b, c = matmul()
    s = compiler.create_schedule(c)
    with pytest.raises(ValueError, match="positive int"):
        s[c].split("i", bad)


def test_axis_of_another_stage_is_rejected():
    a, b, c = matmul()
    d = te.compute(c.shape, lambda i, j: c[i, j] + 1.0, name="D")
    s = compiler.create_schedule(d)
    with pytest.raises(ValueError, match="does not belong to stage D"):
        s[d].split(s[c].leaf[0], 2)
    with pytest.raises(ValueError, match="does not belong"):
        s[d].split("k", 2)
    s[d].split("i", 2)
    with pytest.raises(ValueError, match="already split"):
        s[d].split("i", 2)


def test_tile_and_reorder(build, rng):
    a, b, c = matmul(8, 12, 4)
    s = compiler.create_schedule(c)
    io, jo, ii, ji = s[c].tile("i", "j", 4, 3)
    s[c].reorder(jo, io, "k", ii, ji)
    got = [n for n, _, _ in loops(compiler.lower(s, [a, b, c]))]
    assert got[:2] == ["j.outer", "i.outer"]
    assert "i.inner" in got[got.index("k") :]  # the main nest runs i.inner inside k
    assert s.steps[0].to_dict() == {
        "kind": "tile",
        "stage": "C",
        "x_axis": "i",
        "y_axis": "j",
        "x_factor": 4,
        "y_factor": 3,
    }
    run_matmul(build, s, [a, b, c], rng)
    with pytest.raises(ValueError, match="repeated"):
        s[c].reorder(io, io)


def test_fuse(build, rng):
    a, b, c = matmul(6, 5, 3)
    s = compiler.create_schedule(c)
    f = s[c].fuse("i", "j")
    assert f.name == "i.j.fused"
    assert loops(compiler.lower(s, [a, b, c]))[0][:2] == ("i.j.fused", 30)
    run_matmul(build, s, [a, b, c], rng)
    s2 = compiler.create_schedule(c)
    with pytest.raises(ValueError, match="adjacent"):
        s2[c].fuse("j", "i")
    with pytest.raises(ValueError, match="cannot fuse"):
        s2[c].fuse("j", "k")


def test_compute_at_and_errors(build, rng):
    a = te.placeholder((9, 6), "float32", "A")
    b = te.compute((9, 6), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((9, 6), lambda i, j: b[i, j] + 1.0, name="C")
    s = compiler.create_schedule(c)
    io, ii = s[c].split("i", 4)
    s[b].compute_at(s[c], io)
    text = str(compiler.lower(s, [a, c]))
    assert "allocate B: float32[4, 6]" in text
    a_np = rng.standard_normal((9, 6)).astype("float32")
    c_np = np.zeros((9, 6), "float32")
    build(s, [a, c])(a_np, c_np)
    np.testing.assert_allclose(c_np, a_np * 2 + 1, rtol=1e-6)
    with pytest.raises(ValueError, match="does not consume"):
        s[c].compute_at(s[b], "i")
    with pytest.raises(TypeError, match="must be a Stage"):
        s[b].compute_at(c, "i")


def test_compute_inline(build, rng):
    a = te.placeholder((5, 7), "float32", "A")
    b = te.compute((5, 7), lambda i, j: a[i, j] * 3.0, name="B")
    c = te.compute((5, 7), lambda i, j: b[i, j] - a[i, j], name="C")
    s = compiler.create_schedule(c)
    s[b].compute_inline()
    text = str(compiler.lower(s, [a, c]))
    assert "B" not in text.replace("func", "")  # no buffer for B
    a_np = rng.standard_normal((5, 7)).astype("float32")
    c_np = np.zeros((5, 7), "float32")
    build(s, [a, c])(a_np, c_np)
    np.testing.assert_allclose(c_np, a_np * 2, rtol=1e-6)
    with pytest.raises(ValueError, match="is an output"):
        s[c].compute_inline()
    a2, b2, c2 = matmul()
    d2 = te.compute(c2.shape, lambda i, j: c2[i, j] * 2.0, name="D")
    s2 = compiler.create_schedule(d2)
    with pytest.raises(ValueError, match="reduction"):
        s2[c2].compute_inline()


def test_cache_read_and_cache_write(build, rng):
    a, b, c = matmul(8, 16, 6)
    s = compiler.create_schedule(c)
    al = s.cache_read(a, "local", [s[c]])
    cl = s.cache_write(c, "local")
    io, jo, ii, ji = s[c].tile("i", "j", 4, 8)
    s[cl].compute_at(s[c], jo)
    s[cl].reorder("k", "i.c", "j.c")
    s[al].compute_at(s[cl], "k")
    text = str(compiler.lower(s, [a, b, c]))
    assert "allocate C.local: float32[4, 8] in 'local'" in text
    assert "allocate A.local: float32[4, 1] in 'local'" in text
    run_matmul(build, s, [a, b, c], rng)
    with pytest.raises(ValueError, match="does not read"):
        s.cache_read(b, "local", [s[al]])


def test_cache_write_must_come_first():
    a, b, c = matmul()
    s = compiler.create_schedule(c)
    s[c].split("i", 2)
    with pytest.raises(ValueError, match="before its other steps"):
        s.cache_write(c, "local")


def test_vectorize_unroll_parallel_vthread(build, rng):
    a, b, c = matmul(16, 32, 8)
    s = compiler.create_schedule(c)
    io, jo, ii, ji = s[c].tile("i", "j", 4, 16)
    s[c].reorder(io, jo, "k", ii, ji)
    s[c].vectorize(ji)
    s[c].unroll(ii)
    s[c].parallel(io)
    vt, _ = s[c].split(jo, nparts=2)
    s[c].vthread(vt)
    kinds = {n: k for n, _, k in loops(compiler.lower(s, [a, b, c]))}
    assert kinds["i.outer"] == "parallel" and kinds["j.inner"] == "vectorized"
    assert kinds["i.inner"] == "unrolled" and kinds["j.outer.outer"] == "vthread"
    mod = build(s, [a, b, c])
    assert "<16 x float>" in mod.llvm_ir  # explicit SIMD
    assert "pyvta_parallel_launch" in mod.llvm_ir or mod.target.num_threads == 1
    run_matmul(build, s, [a, b, c], rng)
    with pytest.raises(ValueError, match="reduce axis"):
        s[c].parallel("k")


def test_tensorize_with_declared_intrinsic(build, rng):
    # intrinsic: a 4x4x4 GEMM tile, emitted on the CPU as a call-free loop nest via emit()
    ia = te.placeholder((4, 4), "float32", "ia")
    ib = te.placeholder((4, 4), "float32", "ib")
    rk = te.reduce_axis(4, "rk")
    ic = te.compute((4, 4), lambda x, y: te.sum(ia[x, rk] * ib[rk, y], rk), name="ic")
    seen = []

    def emit(ins, outs):
        from pyvta.compiler.ir import Load, Var

        seen.append((ins, outs))
        (ra, rb), (rc,) = ins, outs
        x, y, z = Var("tx"), Var("ty"), Var("tz")

        def at(r, *idx):
            off = r.offset
            for i, s_ in zip(idx, r.strides_elems, strict=True):
                off = off + i * s_
            return off

        body = Store(
            rc.buffer,
            at(rc, x, y, 0),
            Load(rc.buffer, at(rc, x, y, 0))
            + Load(ra.buffer, at(ra, x, 0, z)) * Load(rb.buffer, at(rb, 0, y, z)),
        )
        return For(x, 0, 4, "serial", For(y, 0, 4, "serial", For(z, 0, 4, "serial", body)))

    gemm4 = TensorIntrin("gemm4", ic, (ia, ib), emit)
    a, b, c = matmul(8, 8, 8)
    s = compiler.create_schedule(c)
    io, jo, ii, ji = s[c].tile("i", "j", 4, 4)
    ko, ki = s[c].split("k", 4)
    s[c].reorder(io, jo, ko, ii, ji, ki)
    s[c].tensorize(ii, gemm4)
    run_matmul(build, s, [a, b, c], rng)
    assert seen and seen[0][0][0].strides_elems == (8, 0, 1)  # A: row stride 8, k stride 1
    # a VTA-style intrinsic would emit an Evaluate(Call(...)); the loop IR carries it as is
    mark = TensorIntrin(
        "mark", ic, (ia, ib), lambda ins, outs: Evaluate(Call("vta.gemm", [], "int32"))
    )
    s2 = compiler.create_schedule(c)
    io, jo, ii, ji = s2[c].tile("i", "j", 4, 4)
    ko, ki = s2[c].split("k", 4)
    s2[c].reorder(io, jo, ko, ii, ji, ki)
    s2[c].tensorize(ii, mark)
    assert "vta.gemm()" in stmt_str(compiler.lower(s2, [a, b, c]).body)
    s3 = compiler.create_schedule(c)
    io, jo, ii, ji = s3[c].tile("i", "j", 2, 4)
    s3[c].tensorize(ii, gemm4)
    with pytest.raises(ValueError, match="do not match"):
        compiler.lower(s3, [a, b, c])


def test_steps_are_plain_records_that_replay():
    a, b, c = matmul(8, 16, 6)
    s = compiler.create_schedule(c)
    cl = s.cache_write(c, "local")
    io, jo, ii, ji = s[c].tile("i", "j", 4, 8)
    s[cl].compute_at(s[c], jo)
    s[cl].vectorize("j.c")
    s[c].parallel(io)
    text = steps_to_json(s.steps)
    steps = steps_from_json(text)
    assert steps[0] == Step("cache_write", "C", {"scope": "local"})
    assert Step.from_json(steps[1].to_json()) == steps[1]
    s2 = replay([c], steps)
    assert str(compiler.lower(s2, [a, b, c])) == str(compiler.lower(s, [a, b, c]))
    with pytest.raises(ValueError, match="unknown step kind"):
        Step("explode", "C")
    with pytest.raises(ValueError, match="lacks"):
        Step.from_dict({"kind": "split"})


def test_open_ended_scopes_are_checked_by_the_backend(build):
    a, b, c = matmul(4, 4, 4)
    s = compiler.create_schedule(c)
    cl = s.cache_write(c, "local.acc_buffer")  # a VTA-style scope: the schedule accepts it
    s[cl].compute_at(s[c], "i")
    assert "local.acc_buffer" in str(compiler.lower(s, [a, b, c]))
    with pytest.raises(ValueError, match="not supported by this backend"):
        build(s, [a, b, c])


def test_every_step_kind_replays_to_identical_ir(build, rng):
    a = te.placeholder((16, 8), "float32", "A")
    b = te.placeholder((8, 32), "float32", "B")
    r = te.reduce_axis(8, "k")
    c = te.compute((16, 32), lambda i, j: te.sum(a[i, r] * b[r, j], r), name="C")
    d = te.compute((16, 32), lambda i, j: c[i, j] * 2.0, name="D")
    e = te.compute((16, 32), lambda i, j: te.maximum(d[i, j], 0.0), name="E")
    s = compiler.create_schedule(e)
    bl = s.cache_read(b, "local", [s[c]])
    cl = s.cache_write(c, "local")
    s[d].compute_inline()
    s[c].compute_root()
    io, jo, ii, ji = s[e].tile("i", "j", 4, 16)
    f = s[e].fuse(io, jo)
    s[e].parallel(f)
    s[e].vectorize(ji)
    s[c].set_scope("global")
    s[cl].compute_at(s[c], "i")
    ko, ki = s[cl].split("k", nparts=2)
    s[cl].reorder(ko, ki, "i.c", "j.c")
    s[cl].unroll(ki)
    s[cl].vectorize("j.c")
    vo, _ = s[c].split("j", 8)
    s[c].vthread(vo)
    s[bl].compute_at(s[cl], ki)
    kinds = {st.kind for st in s.steps}
    from pyvta.compiler.schedule.step import STEP_KINDS

    # tensorize and bind (GPU) have their own replay tests
    assert kinds == set(STEP_KINDS) - {"tensorize", "bind"}
    steps = steps_from_json(steps_to_json(s.steps))
    assert str(compiler.lower(replay([e], steps), [a, b, e])) == str(compiler.lower(s, [a, b, e]))
    x, y = (
        rng.standard_normal((16, 8), dtype=np.float32),
        rng.standard_normal((8, 32), dtype=np.float32),
    )
    out = np.zeros((16, 32), np.float32)
    build(s, [a, b, e])(x, y, out)
    np.testing.assert_allclose(out, np.maximum(2 * (x @ y), 0), rtol=1e-5, atol=1e-5)


def test_tensorize_step_replays_with_an_intrinsic_table():
    ia = te.placeholder((2, 2), "float32", "ia")
    ib = te.placeholder((2, 2), "float32", "ib")
    rk = te.reduce_axis(2, "rk")
    ic = te.compute((2, 2), lambda x, y: te.sum(ia[x, rk] * ib[rk, y], rk), name="ic")
    mark = TensorIntrin("mark2", ic, (ia, ib), lambda ins, outs: Evaluate(Call("m", [], "int32")))
    a, b, c = matmul(4, 4, 2)
    s = compiler.create_schedule(c)
    io, jo, ii, ji = s[c].tile("i", "j", 2, 2)
    s[c].tensorize(ii, mark)
    again = replay([c], s.steps, {"mark2": mark})
    assert str(compiler.lower(again, [a, b, c])) == str(compiler.lower(s, [a, b, c]))
    with pytest.raises(KeyError, match="mark2"):
        replay([c], s.steps)


def test_reduction_where_skips_points_and_tests_each_term_in_its_loop(build, rng):
    """``te.sum(..., where=...)``: a 1-D window sum over a row with a band of it left out; each
    ``&&`` term is tested inside the innermost loop it reads (the row term around the window
    loop, the window term inside it), never around the init, and the points it leaves out are
    not added."""
    n, k = 9, 4
    a = te.placeholder((n + k - 1,), "float32", "A")
    r = te.reduce_axis(k, "r")
    c = te.compute(
        (n,),
        lambda i: te.sum(a[i + r], axis=r, where=te.logical_and(i >= 2, i + r < 8)),
        name="C",
    )
    s = compiler.create_schedule(c)
    func = compiler.lower(s, [a, c])
    text = stmt_str(func.body)
    assert text.index("for r") < text.index("< 8)"), text  # the window term inside its loop
    assert text.index("if (i >= 2)") < text.index("for r"), text
    a_np = rng.standard_normal(a.shape).astype("float32")
    c_np = np.full(c.shape, np.nan, "float32")
    build(s, [a, c])(a_np, c_np)
    want = [sum(a_np[i + j] for j in range(k) if i >= 2 and i + j < 8) for i in range(n)]
    np.testing.assert_allclose(c_np, np.array(want, "float32"), rtol=1e-6)
