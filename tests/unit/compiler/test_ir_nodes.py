"""Expression nodes, simplifier and the IR checker."""

import pytest

from pyvta.compiler.ir import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    IntImm,
    IRError,
    Load,
    PrimFunc,
    Store,
    Var,
    expr_str,
    simplify,
    verify,
)
from pyvta.compiler.ir.simplify import const_bound


def test_affine_canonical_form():
    i, j = Var("i"), Var("j")
    e = (i * 4 + j) * 2 - i * 8 + 3 - 3
    assert expr_str(simplify(e)) == "(j * 2)"


def test_split_recombination_divmod():
    o, n = Var("o"), Var("n")
    r = {n: (0, 15)}
    assert expr_str(simplify((o * 16 + n) // 16, r)) == "o"
    assert expr_str(simplify((o * 16 + n) % 16, r)) == "n"
    # without the range of n nothing can be proven
    assert expr_str(simplify((o * 16 + n) // 16)) == "(((o * 16) + n) // 16)"


def test_nonaffine_atoms_are_kept_and_bounded():
    f = Var("f")
    e = (f // 8) * 16 + 0
    assert expr_str(simplify(e)) == "((f // 8) * 16)"
    assert const_bound((f // 8) - 2, {f: (0, 15)}) == (-2, -1)


def test_compare_and_minmax_fold_under_ranges():
    i = Var("i")
    r = {i: (0, 9)}
    assert expr_str(simplify(i < 10, r)) == "true"
    assert expr_str(simplify(i < 9, r)) == "(i < 9)"
    assert expr_str(simplify((i + 0) // 1, r)) == "i"
    from pyvta.compiler.ir.expr import max_, min_

    assert expr_str(simplify(min_(i, 20), r)) == "i"
    assert expr_str(simplify(max_(i, -1), r)) == "i"


def test_constant_folding_wraps_int8():
    from pyvta.compiler.ir import Cast

    assert simplify(Cast("int8", IntImm(300))).value == 44
    assert simplify(IntImm(-7) // IntImm(2)).value == -4  # floor division
    assert simplify(IntImm(-7) % IntImm(2)).value == 1


def test_dtype_mismatch_is_an_error():
    with pytest.raises(TypeError, match="astype"):
        _ = Var("x", "int32") + Var("y", "float32")
    with pytest.raises(TypeError, match="float division"):
        _ = Var("x") / Var("y")


def test_verify_catches_unbound_var_and_unallocated_buffer():
    a = Buffer("A", "float32", (4,))
    i = Var("i")
    ok = PrimFunc("f", [a], For(i, 0, 4, "serial", Store(a, i, Load(a, i))))
    verify(ok)
    with pytest.raises(IRError, match="variable i"):
        verify(PrimFunc("f", [a], Store(a, i, Load(a, IntImm(0)))))
    # the message prints the statement the problem is in (only when there is one)
    j = Var("j")
    nest = For(j, 0, 2, "serial", Store(a, IntImm(0), Load(a, i)))
    with pytest.raises(IRError) as err:
        verify(PrimFunc("f", [a], nest))
    assert str(err.value) == "variable i used outside its binding in: A[0] = A[i]"
    t = Buffer("T", "float32", (4,), "local")
    with pytest.raises(IRError, match="T is neither"):
        verify(PrimFunc("f", [a], Store(t, IntImm(0), Load(a, IntImm(0)))))
    verify(PrimFunc("f", [a], Allocate(t, Store(t, IntImm(0), Load(a, IntImm(0))))))
    with pytest.raises(IRError, match="out of bounds"):
        verify(PrimFunc("f", [a], Store(a, IntImm(4), Load(a, IntImm(0)))))
    # under an ``if`` a constant index is not checked (an unrolled tail's dead copy)
    dead = IfThenElse(IntImm(3) < IntImm(3), Store(a, IntImm(0), Load(a, IntImm(4))))
    verify(PrimFunc("f", [a], dead))
    with pytest.raises(IRError, match="constant extent"):
        n = Var("n")
        verify(
            PrimFunc(
                "f",
                [a],
                For(n, 0, 2, "serial", For(i, 0, n, "vectorized", Store(a, i, Load(a, i)))),
            )
        )
