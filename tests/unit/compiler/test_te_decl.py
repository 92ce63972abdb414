"""Tensor-expression declarations and their argument checks."""

import pytest

from pyvta.compiler import te


def test_compute_shapes_names_and_inputs():
    a = te.placeholder((3, 4), "float32", "A")
    b = te.compute((3, 4), lambda i, j: a[i, j] * 2.0, name="B")
    assert b.shape == (3, 4) and b.dtype == "float32"
    assert [ax.name for ax in b.op.axis] == ["i", "j"]
    assert b.op.inputs == (a,)
    c = te.compute((3, 4), lambda *i: b(*i) + a(*i), name="C")
    assert [ax.name for ax in c.op.axis] == ["i0", "i1"]
    assert set(c.op.inputs) == {a, b}


def test_reductions_and_casts():
    a = te.placeholder((3, 4), "int8", "A")
    k = te.reduce_axis(4, "k")
    s = te.compute((3,), lambda i: te.sum(a[i, k].astype("int32"), axis=k), name="S")
    assert s.dtype == "int32" and s.op.reduce_axis[0].name == "k"
    m = te.compute((3,), lambda i: te.max(a[i, k], axis=k), name="M")
    assert m.dtype == "int8"


def test_bad_declarations_raise():
    a = te.placeholder((3, 4), "float32", "A")
    with pytest.raises(ValueError, match="positive ints"):
        te.placeholder((3, 0), "float32", "Z")
    with pytest.raises(ValueError, match="not supported"):
        te.placeholder((3,), "float16", "H")
    with pytest.raises(IndexError, match="2 dims"):
        te.compute((3,), lambda i: a[i], name="X")
    with pytest.raises(ValueError, match="takes 1 indices"):
        te.compute((3, 4), lambda i: a[i, 0], name="X")
    k = te.reduce_axis(4, "k")
    with pytest.raises(ValueError, match="only be the whole body"):
        te.compute((3,), lambda i: te.sum(a[i, k], axis=k) + 1.0, name="X")
    with pytest.raises(TypeError, match="reduce_axis"):
        te.sum(a[0, 0], axis=a.op.output)
    with pytest.raises(TypeError, match="astype"):
        te.compute((3, 4), lambda i, j: a[i, j] + te.placeholder((1,), "int32", "I")[0], name="X")
    with pytest.raises(TypeError, match="truth value"):
        bool(a[0, 0] > 1.0)
