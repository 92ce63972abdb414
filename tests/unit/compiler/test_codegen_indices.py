"""Index arithmetic emitted once (``backend.llvm.indices``), and the IR walks it leans on
(``substitute`` and ``simplify`` with a memo, type-dispatched ``children``): the same results,
less IR, and no value used where it does not dominate its use."""

import re

import numpy as np

from pyvta.compiler.backend.llvm import CpuTarget
from pyvta.compiler.backend.llvm.codegen import CodeGen
from pyvta.compiler.backend.llvm.target import cpu_scopes
from pyvta.compiler.ir import Buffer, For, IfThenElse, IntImm, Let, Load, PrimFunc, Store, Var
from pyvta.compiler.ir.expr import BinOp, children, rebuild, substitute
from pyvta.compiler.ir.printer import expr_str
from pyvta.compiler.ir.simplify import simplify
from pyvta.compiler.ir.stmt import Seq


def _emitted(func: PrimFunc) -> str:
    """The LLVM IR the code generator emits for ``func``, before LLVM optimises it."""
    return str(CodeGen(func, CpuTarget.host(1), cpu_scopes()).generate())


def _unrolled_tile(copies: int = 8):
    """``Out[i*64 + j*8 + k] = A[i*64 + j*8 + k] * 2`` for k = 0..copies-1 written out, as an
    unrolled tile's copies are: each index the same variable part plus a constant."""
    a, out = Buffer("A", "float32", (256,)), Buffer("Out", "float32", (256,))
    i, j = Var("i"), Var("j")

    def at(k):
        return i * 64 + j * 8 + IntImm(k)

    body = Seq([Store(out, at(k), Load(a, at(k)) * 2.0) for k in range(copies)])
    return PrimFunc("tile", [a, out], For(i, 0, 4, "serial", For(j, 0, 8, "serial", body)))


def test_an_unrolled_tile_emits_each_index_part_once(build):
    func = _unrolled_tile()
    text = _emitted(func)
    muls = re.findall(r"= mul i32", text)
    # i*64 and j*8 once each: not once per copy and access (32 before)
    assert len(muls) == 2, muls
    # each address once for the load and the store of a copy
    assert len(re.findall(r"getelementptr", text)) == 2 * 8
    mod = build(func, None)
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    mod(x, out)
    np.testing.assert_array_equal(out, x * 2)


def test_index_parts_of_a_loop_body_or_a_branch_are_not_used_after_it(build):
    """Values emitted inside a loop's body or an ``if`` arm do not dominate what follows: the
    code after them emits its own (LLVM's verifier refuses the module otherwise), and a
    variable a ``let`` binds again gets its new value."""
    out = Buffer("Out", "int32", (64,))
    out2 = Buffer("Out2", "int32", (128,))
    i, j, t = Var("i"), Var("j"), Var("t")
    body = Seq(
        [
            # j*4 + i*8 first inside the j loop, then after it, where j's value is its last
            For(j, 0, 2, "serial", Store(out, j * 4 + i * 8, i + j)),
            IfThenElse(
                i < 4,
                Let(t, i + 1, Store(out2, t * 4 + i * 1, t)),  # t's part emitted in the arm
                None,
            ),
            Let(t, i + 2, Store(out2, t * 4 + i * 1 + 32, t)),  # t again, another value
        ]
    )
    func = PrimFunc("scopes", [out, out2], For(i, 0, 6, "serial", body))
    mod = build(func, None)
    res, res2 = np.zeros(64, np.int32), np.zeros(128, np.int32)
    mod(res, res2)
    ref, ref2 = np.zeros(64, np.int32), np.zeros(128, np.int32)
    for iv in range(6):
        for jv in range(2):
            ref[jv * 4 + iv * 8] = iv + jv
        if iv < 4:
            ref2[(iv + 1) * 4 + iv] = iv + 1
        ref2[(iv + 2) * 4 + iv + 32] = iv + 2
    np.testing.assert_array_equal(res, ref)
    np.testing.assert_array_equal(res2, ref2)


def _shared_dag(depth: int = 6):
    """An expression whose sub-expressions are shared (a DAG), over variables x and y."""
    x, y = Var("x"), Var("y")
    e = x * 3 + y
    for k in range(depth):
        e = BinOp("+", e * (k + 2), e) if k % 2 else BinOp("*", e, x + k)
    return e, x, y


def test_substitute_with_a_memo_matches_a_fresh_walk_and_keeps_untouched_nodes():
    e, x, y = _shared_dag()
    fresh = substitute(e, {x: IntImm(5)})
    memo: dict = {}
    again = substitute(e, {x: IntImm(5)}, memo)
    assert expr_str(again) == expr_str(fresh)
    assert memo  # the shared nodes were kept
    # a sub-expression without x is the very same node afterwards
    no_x = y * 7 + 1
    assert substitute(BinOp("+", no_x, x), {x: IntImm(2)}).a is no_x


def test_simplify_with_a_memo_matches_a_fresh_walk():
    e, x, y = _shared_dag()
    ranges = {x: (0, 3), y: (0, 9)}
    fresh = simplify(e, ranges)
    memo: dict = {}
    assert expr_str(simplify(e, ranges, memo)) == expr_str(fresh)
    assert expr_str(simplify(e, ranges, memo)) == expr_str(fresh)  # from the memo this time
    folded = simplify((x * 4 + 2) // 4, ranges, {})
    assert expr_str(folded) == expr_str(x)


def test_children_and_rebuild_of_every_node_type():
    from pyvta.compiler.ir.expr import Cast, Compare, Not, Select

    a = Buffer("A", "float32", (8,))
    x = Var("x")
    nodes = [
        x + 1,
        Compare("<", x, IntImm(3)),
        Not(Compare("<", x, IntImm(3))),
        Select(Compare("<", x, IntImm(3)), x, IntImm(0)),
        Cast("float32", x),
        Load(a, x),
    ]
    for n in nodes:
        kids = children(n)
        assert kids, type(n).__name__
        assert rebuild(n, kids) is n  # the same children: the node itself
        swapped = rebuild(n, tuple(substitute(k, {x: IntImm(1)}) for k in kids))
        assert swapped is not n and type(swapped) is type(n)
    assert children(x) == () and rebuild(x, ()) is x
