"""Compiled CPU kernels: ``te.maximum``/``te.minimum`` propagate NaN as numpy does (scalar and
vector code), and a read-only output (read-only memmap, view of bytes) is refused instead of
written into or crashing."""

import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler import te
from pyvta.runtime.arrays import KernelArgumentError

N = 64


def _build(fn, vectorize: bool):
    a = te.placeholder((N,), "float32", name="A")
    b = te.placeholder((N,), "float32", name="B")
    c = te.compute((N,), lambda i: fn(a[i], b[i]), name="C")
    s = compiler.create_schedule(c)
    if vectorize:
        _, inner = s[c].split("i", 8)
        s[c].vectorize(inner)
    return compiler.build(s, [a, b, c], cache_dir=None)


def _inputs():
    a = np.arange(N, dtype=np.float32) - 10
    b = np.zeros(N, np.float32)
    a[3], b[5], a[9], b[9] = np.nan, np.nan, np.nan, np.nan
    return a, b


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_min_max_propagate_nan_like_numpy(name, vectorize):
    mod = _build(getattr(te, name), vectorize)
    a, b = _inputs()
    c = np.empty(N, np.float32)
    mod(a, b, c)
    np.testing.assert_array_equal(c, getattr(np, name)(a, b))  # NaN positions compare equal
    assert np.isnan(c[[3, 5, 9]]).all()


def test_read_only_outputs_are_refused(tmp_path):
    mod = _build(te.maximum, False)
    a, b = _inputs()
    ro = np.zeros(N, np.float32)
    ro.flags.writeable = False
    path = tmp_path / "m.bin"
    np.zeros(N, np.float32).tofile(path)
    memmap = np.memmap(path, np.float32, "r", shape=(N,))
    from_bytes = np.frombuffer(bytes(4 * N), np.float32)
    for out in (ro, memmap, from_bytes):
        with pytest.raises(KernelArgumentError, match="argument C is written .* read-only"):
            mod(a, b, out)
    assert not ro.any() and not np.asarray(memmap).any()
    c = np.empty(N, np.float32)
    mod(memmap, b, c)  # a read-only input is fine
    np.testing.assert_array_equal(c, np.maximum(0, b))


def test_te_declaration_errors_are_pyvta_errors():
    from pyvta.compiler.te.tensor import TeError
    from pyvta.isa.errors import PyvtaError

    assert issubclass(TeError, PyvtaError) and issubclass(TeError, ValueError)
    with pytest.raises(TeError, match="shape must be positive"):
        te.placeholder((-1, 4), "float32", name="A")
    a = te.placeholder((8,), "float32", name="A")
    with pytest.raises(TeError, match=r"index 8 of axis 0 is outside \[0, 8\)"):
        te.compute((8,), lambda i: a[8], name="C")


def test_out_of_bounds_affine_read_is_refused_guarded_read_is_not():
    from pyvta.compiler.ir.verify import IRError

    a = te.placeholder((N,), "float32", name="A")
    c = te.compute((N,), lambda i: a[i + 1], name="C")  # reads A[N] in the last iteration
    with pytest.raises(IRError, match=r"index \(i \+ 1\) of A ranges over \[1, 64\]"):
        compiler.build(compiler.create_schedule(c), [a, c], cache_dir=None)
    d = te.compute((N,), lambda i: te.select(i >= 1, a[i - 1], 0.0), name="D")  # padding read
    mod = compiler.build(compiler.create_schedule(d), [a, d], cache_dir=None)
    x, out = np.arange(N, dtype=np.float32), np.empty(N, np.float32)
    mod(x, out)
    np.testing.assert_array_equal(out, np.concatenate([[0.0], x[:-1]]))
