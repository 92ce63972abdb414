"""Golden text of lowered IR for a few small cases (the printer's text is a contract)."""

from pyvta import compiler
from pyvta.compiler import te


def _matmul():
    a = te.placeholder((4, 3), "float32", "A")
    b = te.placeholder((3, 5), "float32", "B")
    k = te.reduce_axis(3, "k")
    c = te.compute((4, 5), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return a, b, c


def test_golden_default_matmul():
    a, b, c = _matmul()
    text = str(compiler.lower(compiler.create_schedule(c), [a, b, c]))
    assert text == (
        "func main(A: float32[4, 3], B: float32[3, 5], C: float32[4, 5]):\n"
        "  for i in range(0, 4) serial:\n"
        "    for j in range(0, 5) serial:\n"
        "      C[((i * 5) + j)] = 0.0f\n"
        "      for k in range(0, 3) serial:\n"
        "        C[((i * 5) + j)] = (C[((i * 5) + j)] + (A[((i * 3) + k)] * B[((k * 5) + j)]))"
    )


def test_golden_split_with_tail_guard():
    a, b, c = _matmul()
    s = compiler.create_schedule(c)
    _, ji = s[c].split("j", 2)
    s[c].vectorize(ji)
    s[c].parallel("i")
    text = str(compiler.lower(s, [a, b, c]))
    assert text == (
        "func main(A: float32[4, 3], B: float32[3, 5], C: float32[4, 5]):\n"
        "  for i in range(0, 4) parallel:\n"
        "    for j.outer in range(0, 3) serial:\n"
        "      for j.inner in range(0, 2) vectorized:\n"
        "        if (((j.outer * 2) + j.inner) < 5):\n"
        "          C[(((i * 5) + (j.outer * 2)) + j.inner)] = 0.0f\n"
        "        for k in range(0, 3) serial:\n"
        "          if (((j.outer * 2) + j.inner) < 5):\n"
        "            C[(((i * 5) + (j.outer * 2)) + j.inner)] = (C[(((i * 5) + (j.outer * 2)) + "
        "j.inner)] + (A[((i * 3) + k)] * B[(((k * 5) + (j.outer * 2)) + j.inner)]))"
    )


def test_golden_inline_pad_cast_shift():
    x = te.placeholder((6,), "int8", "X")
    p = te.compute(
        (8,),
        lambda i: te.select(te.logical_and(i >= 1, i < 7), x[i - 1], te.const(0, "int8")),
        name="P",
    )
    y = te.compute((8,), lambda i: (p[i].astype("int32") * 3) >> 1, name="Y")
    s = compiler.create_schedule(y)
    s[p].compute_inline()
    text = str(compiler.lower(s, [x, y]))
    assert text == (
        "func main(X: int8[6], Y: int32[8]):\n"
        "  for i in range(0, 8) serial:\n"
        "    Y[i] = ((int32(select(((i >= 1) && (i < 7)), X[(i - 1)], int8(0))) * 3) >> 1)"
    )


def test_golden_cache_write_compute_at():
    a, b, c = _matmul()
    s = compiler.create_schedule(c)
    cc = s.cache_write(c, "local")
    io, jo, ii, ji = s[c].tile("i", "j", 2, 5)
    s[cc].compute_at(s[c], jo)
    s[cc].unroll("i.c")
    text = str(compiler.lower(s, [a, b, c]))
    assert text == (
        "func main(A: float32[4, 3], B: float32[3, 5], C: float32[4, 5]):\n"
        "  for i.outer in range(0, 2) serial:\n"
        "    allocate C.local: float32[2, 5] in 'local'\n"
        "    for i.c in range(0, 2) unrolled:\n"
        "      for j.c in range(0, 5) serial:\n"
        "        C.local[((i.c * 5) + j.c)] = 0.0f\n"
        "        for k in range(0, 3) serial:\n"
        "          C.local[((i.c * 5) + j.c)] = (C.local[((i.c * 5) + j.c)] + "
        "(A[(((i.outer * 6) + (i.c * 3)) + k)] * B[((k * 5) + j.c)]))\n"
        "    for i.inner in range(0, 2) serial:\n"
        "      for j.inner in range(0, 5) serial:\n"
        "        C[(((i.outer * 10) + (i.inner * 5)) + j.inner)] = "
        "C.local[((i.inner * 5) + j.inner)]"
    )
