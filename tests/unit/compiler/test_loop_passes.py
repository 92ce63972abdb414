"""The ordered pass pipelines and the individual loop-IR passes."""

import pytest

from pyvta.compiler.backend.llvm.passes import LLVM_PASSES
from pyvta.compiler.ir import Buffer, For, IntImm, Load, PrimFunc, Seq, Store, Var, func_str
from pyvta.compiler.passes import PASSES, run_passes
from pyvta.compiler.passes.lower_vthread import lower_vthread
from pyvta.compiler.passes.partition_loops import partition_loops
from pyvta.compiler.passes.simplify_stmt import simplify_stmt
from pyvta.compiler.passes.unroll_loops import unroll_loops


def _copy(kind: str, extent: int = 3):
    a, b = Buffer("A", "float32", (6,)), Buffer("B", "float32", (6,))
    i = Var("i")
    return PrimFunc("f", [a, b], For(i, 0, extent, kind, Store(b, i * 2, Load(a, i * 2 + 1))))


def test_pipelines_are_explicit_ordered_named_lists():
    assert [n for n, _ in PASSES] == ["simplify_stmt"]
    assert [n for n, _ in LLVM_PASSES] == [
        "lift_workspace",
        "lower_vthread",
        "partition_loops",
        "unroll_loops",
        "simplify_stmt",
    ]
    assert all(callable(fn) for _, fn in PASSES + LLVM_PASSES)


def test_unroll_loops_expands_with_constant_indices():
    out = unroll_loops(_copy("unrolled"))
    assert isinstance(out.body, Seq) and len(out.body.stmts) == 3
    assert func_str(simplify_stmt(out)).splitlines()[1:] == [
        "  B[0] = A[1]",
        "  B[2] = A[3]",
        "  B[4] = A[5]",
    ]


def test_unroll_loops_starts_at_the_loop_min():
    a, b = Buffer("A", "float32", (6,)), Buffer("B", "float32", (6,))
    i = Var("i")
    f = PrimFunc("f", [a, b], For(i, 2, 2, "unrolled", Store(b, i, Load(a, i))))
    assert func_str(simplify_stmt(unroll_loops(f))).splitlines()[1:] == [
        "  B[2] = A[2]",
        "  B[3] = A[3]",
    ]


def _guarded_tiles(kind: str = "serial"):
    """for io in 0..4: for ii in 0..3: if io * 3 + ii < 10: B[io * 3 + ii] = A[...]"""
    from pyvta.compiler.ir import IfThenElse
    from pyvta.compiler.ir.expr import compare

    a, b = Buffer("A", "float32", (12,)), Buffer("B", "float32", (12,))
    io, ii = Var("io"), Var("ii")
    row = io * 3 + ii
    guarded = IfThenElse(compare("<", row, IntImm(10)), Store(b, row, Load(a, row)))
    return PrimFunc("f", [a, b], For(io, 0, 4, kind, For(ii, 0, 3, "unrolled", guarded)))


def test_partition_loops_splits_off_the_guarded_tail():
    out = func_str(simplify_stmt(partition_loops(_guarded_tiles()))).splitlines()[1:]
    # main part: 3 full tiles without a guard; tail: io = 3, where only row 9 is valid
    assert out == [
        "  for io in range(0, 3) serial:",
        "    for ii in range(0, 3) unrolled:",
        "      B[((io * 3) + ii)] = A[((io * 3) + ii)]",
        "  B[9] = A[9]",
    ]


def test_partition_loops_splits_on_one_conjunct_and_keeps_the_other():
    from pyvta.compiler.ir import IfThenElse
    from pyvta.compiler.ir.expr import all_, compare

    a, b = Buffer("A", "float32", (12,)), Buffer("B", "float32", (12,))
    io, ii, n = Var("io"), Var("ii"), Var("n")
    row = io * 3 + ii
    cond = all_(compare("<", n, IntImm(7)), compare("<", row, IntImm(10)))
    body = For(ii, 0, 3, "unrolled", IfThenElse(cond, Store(b, row, Load(a, row))))
    out = func_str(
        simplify_stmt(partition_loops(PrimFunc("f", [a, b], For(io, 0, 4, "serial", body))))
    )
    assert out.splitlines()[1:] == [
        "  for io in range(0, 3) serial:",
        "    for ii in range(0, 3) unrolled:",
        "      if (n < 7):",
        "        B[((io * 3) + ii)] = A[((io * 3) + ii)]",
        "  if (n < 7):",
        "    B[9] = A[9]",
    ]


def test_partition_loops_keeps_unprovable_guards_and_runs_a_parallel_tail_serially():
    out = func_str(simplify_stmt(partition_loops(_guarded_tiles("parallel"))))
    assert "for io in range(0, 3) parallel:" in out and out.endswith("B[9] = A[9]")
    from pyvta.compiler.ir import IfThenElse
    from pyvta.compiler.ir.expr import compare

    a, b = Buffer("A", "float32", (4,)), Buffer("B", "float32", (4,))
    i, n = Var("i"), Var("n")
    f = PrimFunc(
        "f", [a, b], For(i, 0, 4, "serial", IfThenElse(compare("<", i, n), Store(b, i, Load(a, i))))
    )
    assert func_str(partition_loops(f)) == func_str(f)


def test_simplify_drops_unit_loops_and_lower_vthread_makes_serial():
    assert "for" not in func_str(simplify_stmt(_copy("serial", 1)))
    assert " serial:" in func_str(lower_vthread(_copy("vthread")))


def test_simplify_substitutes_nested_unit_loops_whose_bounds_use_outer_ones():
    """Extent-1 loops inside each other, an inner one starting at an outer one's variable: every
    dropped variable becomes its value in every expression below (carried down, not walked
    once per loop), as the loops would have run."""
    a, b = Buffer("A", "float32", (64,)), Buffer("B", "float32", (64,))
    i, j, k = Var("i"), Var("j"), Var("k")
    body = Store(b, i * 16 + j * 4 + k, Load(a, k * 8 + j + i))
    f = PrimFunc(
        "f",
        [a, b],
        For(i, 2, 1, "serial", For(j, i + 1, 1, "serial", For(k, 0, 4, "serial", body))),
    )
    text = func_str(simplify_stmt(f))
    assert text.count("for") == 1, text  # i = 2, j = 3 dropped; k kept
    assert "B[(k + 44)] = A[((k * 8) + 5)]" in text, text


def test_a_kept_linear_form_is_the_one_computed_again():
    """``from_linear`` keeps ``lin`` on the node it builds; recomputing it from the node's
    children gives the same terms (order too) and constant, for sums of variables, of
    non-affine atoms and of negative coefficients."""
    from pyvta.compiler.ir.expr import BinOp
    from pyvta.compiler.ir.simplify import from_linear, linear_form, simplify

    x, y, z = Var("x"), Var("y"), Var("z")
    exprs = [x * 3 + y - 7, (x // 4) * 2 - y * 5 + z + 1, x - x + y, (x * y) * 3 + 2, z * -1]
    for e in exprs:
        lin = linear_form(simplify(e))
        node = from_linear(lin)
        if not isinstance(node, BinOp):
            continue
        fresh = BinOp(node.op, node.a, node.b)  # same children, nothing kept
        assert fresh.lin is None
        got = linear_form(fresh)
        assert [(k, c) for k, (_, c) in got[0].items()] == [
            (k, c) for k, (_, c) in node.lin[0].items()
        ], e
        assert got[1] == node.lin[1], e


def test_run_passes_verifies_after_each_pass_and_names_the_pass():
    def breaks_ir(func):
        buf = Buffer("Nowhere", "float32", (1,))
        return PrimFunc(func.name, func.params, Store(buf, IntImm(0), Load(buf, IntImm(0))))

    with pytest.raises(ValueError, match="neither a parameter") as info:
        run_passes(_copy("serial"), [("simplify_stmt", simplify_stmt), ("breaks_ir", breaks_ir)])
    assert "in pass breaks_ir" in "".join(getattr(info.value, "__notes__", []))


def test_lift_workspace_turns_root_allocations_into_reused_scratch(build, rng):
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from pyvta import compiler
    from pyvta.compiler import te
    from pyvta.compiler.passes.lift_workspace import lift_workspace

    a = te.placeholder((64,), "float32", "A")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((64,), lambda i: b[63 - i] + 1.0, name="C")
    s = compiler.create_schedule(c)
    func = compiler.lower(s, [a, c])
    assert "allocate B" in str(func)
    lifted = lift_workspace(func)
    assert [w.name for w in lifted.workspace] == ["B"]
    assert "allocate" not in str(lifted) and "; workspace B: float32[64]" in str(lifted)
    mod = build(s, [a, c])
    x = rng.standard_normal(64).astype(np.float32)

    def job(k):
        out = np.zeros(64, np.float32)
        for _ in range(20):
            mod(x * k, out)
        return k, out

    with ThreadPoolExecutor(3) as pool:
        for k, out in pool.map(job, range(1, 7)):
            np.testing.assert_allclose(out, (x * k)[::-1] * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize(
    "template, parallel_images",
    [
        ("direct", False),
        ("winograd", False),
        ("winograd-whole", False),
        ("pointwise", True),
        ("pointwise", False),
    ],
)
def test_batch_images_runs_a_one_image_kernel_on_a_batch_in_one_call(
    build, rng, monkeypatch, template, parallel_images
):
    """A conv lowered for one image, batched over 3 (``batch_images``): its output is the
    one-image kernel's on each image, bit for bit; the top-level parallel loops run the batch's
    iterations in one loop (3 x as many), per-image buffers get the batch as their first axis,
    shared ones (weights, bias) keep their shape; the winograd template's scratch buffers hold
    3 images, or with more scratch than ``FUSED_SCRATCH_MAX_BYTES`` (here: any), the images
    run one after another through the whole function in one serial loop."""
    import numpy as np

    from pyvta import compiler
    from pyvta.compiler.ir.stmt import Allocate
    from pyvta.compiler.passes import batch_images as batching
    from pyvta.compiler.passes.batch_images import batch_images
    from pyvta.compiler.targets.cpu.kernels import (
        ConvWorkload,
        conv_schedule,
        default_conv_schedule,
    )

    kernel, pads = ((1, 1), (0,) * 4) if template == "pointwise" else ((3, 3), (1,) * 4)
    wl = ConvWorkload(32, 10, 10, 32, kernel, (1, 1), pads, 16, 16)
    schedule = default_conv_schedule(wl)
    if template.startswith("winograd"):
        schedule = {"template": "winograd", "knobs": {"p_block": 5, "k_block": 16}}
    if template == "winograd-whole":
        monkeypatch.setattr(batching, "FUSED_SCRATCH_MAX_BYTES", 0)
    schedule["knobs"]["parallel"] = template != "pointwise"
    sch, args = conv_schedule(wl, schedule, clip=(0.0, 6.0))
    one = compiler.lower(sch, args)
    n = 3
    func = batch_images(one, n, [True, False, False, True], parallel_images)
    assert [p.shape for p in func.params] == [
        (n, *p.shape[1:]) if i in (0, 3) else p.shape for i, p in enumerate(one.params)
    ]
    loops, todo = [], [func.body]
    while todo:  # the top level: through sequences and scratch allocations
        s = todo.pop(0)
        if isinstance(s, Allocate):
            assert s.buffer.shape[0] == n  # scratch of every image
            todo.insert(0, s.body)
        elif isinstance(s, Seq):
            todo[:0] = s.stmts
        else:
            loops.append(s)
    if template == "winograd-whole":
        assert [(lp.kind, lp.extent.value) for lp in loops] == [("serial", n)]
    elif template == "pointwise":
        assert [(lp.kind, lp.extent.value) for lp in loops] == [
            ("parallel" if parallel_images else "serial", n)
        ]
    else:
        assert all(lp.kind == "parallel" for lp in loops) and len(loops) >= 2
    m1 = build(one, None)
    mb = build(func, None)
    shapes = [p.shape for p in func.params]
    x = rng.standard_normal(shapes[0]).astype(np.float32)
    w = rng.standard_normal(shapes[1]).astype(np.float32)
    b = rng.standard_normal(shapes[2]).astype(np.float32)
    want = np.zeros(shapes[3], np.float32)
    for i in range(n):
        m1(x[i : i + 1].copy(), w, b, want[i : i + 1])
    got = np.full(shapes[3], np.nan, np.float32)
    mb(x, w, b, got)
    np.testing.assert_array_equal(got, want)
    assert np.abs(want).max() > 0
    with pytest.raises(ValueError, match="per_image has 3 flags for 4 params"):
        batch_images(one, n, [True, False, False])
