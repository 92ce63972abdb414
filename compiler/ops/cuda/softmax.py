"""Row softmax for the GPU: ``out[i, j] = exp(x[i, j] - max_j x) / sum_j exp(x[i, j] - max_j x)``.

Three kernels: the row maxima and the row sums of exponentials (one row per thread, the
reduction serial in the thread; ``rows_per_block`` threads per block), then the normalisation
(one element per thread). ``exp`` is libdevice's ``__nv_expf`` on the GPU.
"""

from __future__ import annotations

from pyvta.compiler.ops.cuda.fetch import bind_flat
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import exp
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import max as te_max
from pyvta.compiler.te.tensor import sum as te_sum


def softmax_gpu(m: int, n: int, rows_per_block: int = 64, threads: int = 256):
    """``(sch, [x, out])`` for ``x`` ``[m, n]`` float32."""
    x = placeholder((m, n), "float32", "x")
    k1, k2 = reduce_axis(n, "k1"), reduce_axis(n, "k2")
    mx = compute((m,), lambda i: te_max(x[i, k1], k1), name="rowmax")
    ex = compute((m, n), lambda i, j: exp(x[i, j] - mx[i]), name="exp")
    sm = compute((m,), lambda i: te_sum(ex[i, k2], k2), name="rowsum")
    out = compute((m, n), lambda i, j: ex[i, j] / sm[i], name="out")
    s = create_schedule(out)
    s[ex].compute_inline()
    for st in (mx, sm):
        bind_flat(s, st, rows_per_block)
    bind_flat(s, out, threads)
    return s, [x, out]
