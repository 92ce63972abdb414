"""Every operator compiled for the CPU and checked against numpy (float32 to a tight tolerance,
int8 / int32 exactly) over shapes with odd sizes, padding and strides."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from pyvta import compiler
from pyvta.compiler import ops, te

NP = {"float32": np.float32, "int8": np.int8, "int32": np.int32}


def rand(rng, shape, dtype):
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    lo, hi = (-128, 128) if dtype == "int8" else (-(2**20), 2**20)
    return rng.integers(lo, hi, size=shape).astype(NP[dtype])


def run(build, out, inputs, arrays, schedule=None):
    """Build ``out`` (default schedule, producers inlined where possible) and run it."""
    s = compiler.create_schedule(out)
    for st in s.stages:
        if st.tensor is not out and not any(a.kind == "reduce" for a in st.root):
            st.compute_inline()
    if schedule is not None:
        schedule(s)
    res = np.zeros(out.shape, NP[out.dtype])
    build(s, [*inputs, out])(*arrays, res)
    return res


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 5), (16, 33, 17), (31, 8, 64)])
def test_matmul_float32(build, rng, m, n, k):
    a, b = te.placeholder((m, k), "float32", "A"), te.placeholder((k, n), "float32", "B")
    x, y = rand(rng, (m, k), "float32"), rand(rng, (k, n), "float32")
    got = run(build, ops.matmul(a, b), [a, b], [x, y])
    np.testing.assert_allclose(got, x @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,n,k", [(3, 5, 7), (16, 16, 16)])
def test_matmul_and_dense_int8_exact(build, rng, m, n, k):
    a, b = te.placeholder((m, k), "int8", "A"), te.placeholder((k, n), "int8", "B")
    x, y = rand(rng, (m, k), "int8"), rand(rng, (k, n), "int8")
    got = run(build, ops.matmul(a, b), [a, b], [x, y])
    np.testing.assert_array_equal(got, x.astype(np.int32) @ y.astype(np.int32))
    w = te.placeholder((n, k), "int8", "W")
    wt = np.ascontiguousarray(y.T)
    got = run(build, ops.dense(a, w), [a, w], [x, wt])
    np.testing.assert_array_equal(got, x.astype(np.int32) @ y.astype(np.int32))


def test_dense_float32(build, rng):
    x, w = te.placeholder((3, 10), "float32", "X"), te.placeholder((7, 10), "float32", "W")
    xn, wn = rand(rng, (3, 10), "float32"), rand(rng, (7, 10), "float32")
    np.testing.assert_allclose(
        run(build, ops.dense(x, w), [x, w], [xn, wn]), xn @ wn.T, rtol=1e-5, atol=1e-5
    )


CONV_CASES = [  # n, c, h, w, o, k, stride, pad
    (1, 3, 7, 9, 4, 3, 1, 1),
    (1, 5, 11, 6, 3, 3, 2, 1),
    (2, 4, 8, 8, 6, 1, 1, 0),
    (1, 2, 13, 13, 5, 5, 3, 2),
    (1, 3, 9, 9, 2, 7, 2, 3),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_nchw_float32(build, rng, conv_reference, case):
    n, c, h, w, o, k, s, p = case
    d, kw = (
        te.placeholder((n, c, h, w), "float32", "D"),
        te.placeholder((o, c, k, k), "float32", "K"),
    )
    x, wt = rand(rng, d.shape, "float32"), rand(rng, kw.shape, "float32")
    got = run(build, ops.conv2d_nchw(d, kw, s, p), [d, kw], [x, wt])
    np.testing.assert_allclose(got, conv_reference(x, wt, s, p), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CONV_CASES[:3])
def test_conv2d_nchw_int8_exact(build, rng, conv_reference, case):
    n, c, h, w, o, k, s, p = case
    d, kw = te.placeholder((n, c, h, w), "int8", "D"), te.placeholder((o, c, k, k), "int8", "K")
    x, wt = rand(rng, d.shape, "int8"), rand(rng, kw.shape, "int8")
    got = run(build, ops.conv2d_nchw(d, kw, s, p), [d, kw], [x, wt])
    np.testing.assert_array_equal(got, conv_reference(x, wt, s, p, np.int64).astype(np.int32))


@pytest.mark.parametrize("inner", ["oi", "io"])
@pytest.mark.parametrize("stride,pad", [(1, 1), (2, 0)])
def test_conv2d_nchwc_blocked_layouts(build, rng, conv_reference, inner, stride, pad):
    c, o, h, w, k, bi, bo = 8, 12, 9, 7, 3, 4, 6
    d = te.placeholder((1, c, h, w), "float32", "D")
    kw = te.placeholder((o, c, k, k), "float32", "K")
    dpk = ops.pack_nchwc(d, bi, name="Dp")
    kpk = ops.pack_oihw(kw, bo, bi, inner, name="Kp")
    out = ops.unpack_nchwc(
        ops.conv2d_nchwc(dpk, kpk, stride, pad, kernel_inner=inner, name="cv"), name="O"
    )
    x, wt = rand(rng, d.shape, "float32"), rand(rng, kw.shape, "float32")

    def sched(s):  # packed operands computed once at the root, not inlined into the conv
        for st in s.stages:
            if st.name in ("Dp", "Kp", "cv.pad"):
                st.compute_root()

    got = run(build, out, [d, kw], [x, wt], sched)
    np.testing.assert_allclose(got, conv_reference(x, wt, stride, pad), rtol=1e-4, atol=1e-4)


def test_layout_pack_unpack_roundtrip(build, rng):
    d = te.placeholder((1, 8, 3, 5), "int32", "D")
    x = rand(rng, d.shape, "int32")
    packed = run(build, ops.pack_nchwc(d, 4), [d], [x])
    np.testing.assert_array_equal(packed, x.reshape(1, 2, 4, 3, 5).transpose(0, 1, 3, 4, 2))
    p = te.placeholder(packed.shape, "int32", "P")
    np.testing.assert_array_equal(run(build, ops.unpack_nchwc(p), [p], [packed]), x)
    with pytest.raises(ValueError, match="dividing 8"):
        ops.pack_nchwc(d, 3)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_pad(build, rng, dtype):
    d = te.placeholder((2, 3, 5), dtype, "D")
    x = rand(rng, d.shape, dtype)
    got = run(build, ops.pad(d, (0, 1, 2), (1, 0, 3), value=7), [d], [x])
    np.testing.assert_array_equal(got, np.pad(x, ((0, 1), (1, 0), (2, 3)), constant_values=7))


def test_bias_add_relu_add(build, rng):
    d = te.placeholder((1, 5, 3, 7), "float32", "D")
    b = te.placeholder((5,), "float32", "B")
    e = te.placeholder((1, 5, 3, 7), "float32", "E")
    out = ops.add(ops.relu(ops.bias_add(d, b)), e)
    x, bn, en = (
        rand(rng, d.shape, "float32"),
        rand(rng, (5,), "float32"),
        rand(rng, e.shape, "float32"),
    )
    got = run(build, out, [d, b, e], [x, bn, en])
    np.testing.assert_allclose(got, np.maximum(x + bn[None, :, None, None], 0) + en, rtol=1e-6)


def test_bias_add_blocked_and_int32(build, rng):
    d = te.placeholder((1, 2, 3, 3, 4), "int32", "D")
    b = te.placeholder((8,), "int32", "B")
    x, bn = rand(rng, d.shape, "int32"), rand(rng, (8,), "int32")
    got = run(build, ops.bias_add(d, b, axis=(1, 4)), [d, b], [x, bn])
    np.testing.assert_array_equal(got, x + bn.reshape(1, 2, 1, 1, 4))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d(build, rng, dtype, k, s, p):
    d = te.placeholder((1, 3, 9, 7), dtype, "D")
    x = rand(rng, d.shape, dtype)
    got = run(build, ops.max_pool2d(d, k, s, p), [d], [x])
    low = np.finfo(np.float32).min if dtype == "float32" else -128
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=low)
    ref = sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s].max(axis=(4, 5))
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_global_avg_pool2d(build, rng, dtype):
    d = te.placeholder((2, 5, 7, 3), dtype, "D")
    x = rand(rng, d.shape, dtype)
    got = run(build, ops.global_avg_pool2d(d), [d], [x])
    if dtype == "float32":
        np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    else:
        ref = x.astype(np.int64).sum(axis=(2, 3), keepdims=True) // 21
        np.testing.assert_array_equal(got, ref.astype(np.int32))


@pytest.mark.parametrize("shift", [0, 3, 8])
def test_requantize(build, rng, shift):
    d = te.placeholder((4, 33), "int32", "D")
    x = rand(rng, d.shape, "int32") // 64
    got = run(build, ops.requantize(d, shift), [d], [x])
    np.testing.assert_array_equal(got, np.clip(x >> shift, -128, 127).astype(np.int8))
    with pytest.raises(ValueError, match="0..31"):
        ops.requantize(d, 40)


def test_cast(build, rng):
    d = te.placeholder((3, 9), "float32", "D")
    x = rand(rng, d.shape, "float32") * 50
    got = run(build, ops.cast(d, "int32"), [d], [x])
    np.testing.assert_array_equal(got, x.astype(np.int32))


def test_scheduled_operator_pipeline_int8(build, rng, conv_reference):
    """conv -> requantize -> relu with a real schedule (parallel, vectorized) is exact."""
    d = te.placeholder((1, 8, 10, 10), "int8", "D")
    kw = te.placeholder((16, 8, 3, 3), "int8", "K")
    conv = ops.conv2d_nchw(d, kw, 1, 1, name="conv")
    out = ops.relu(ops.requantize(conv, 4, name="rq"), name="relu")

    def sched(s):
        s[conv].compute_root()
        s["conv.pad"].compute_root()
        s[conv].parallel("f")
        s[out].vectorize("i3")

    x, wt = rand(rng, d.shape, "int8"), rand(rng, kw.shape, "int8")
    got = run(build, out, [d, kw], [x, wt], sched)
    acc = conv_reference(x, wt, 1, 1, np.int64).astype(np.int32)
    np.testing.assert_array_equal(got, np.maximum(np.clip(acc >> 4, -128, 127), 0).astype(np.int8))
