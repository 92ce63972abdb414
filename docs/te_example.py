"""Tensor-expression example: declare, schedule, build for the CPU, run, check against numpy.

Run: .venv/bin/python docs/te_example.py
"""

import numpy as np

from pyvta import compiler
from pyvta.compiler import te

# 1. Declare C = relu(A @ B) for A [M, K], B [K, N] (what to compute, not how).
M, N, K = 128, 96, 64
A = te.placeholder((M, K), "float32", name="A")
B = te.placeholder((K, N), "float32", name="B")
k = te.reduce_axis(K, name="k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
D = te.compute((M, N), lambda i, j: te.maximum(C[i, j], 0.0), name="D")

# 2. Schedule: 8x32 register tiles accumulated in a "local" buffer, rows across cores.
s = compiler.create_schedule(D)
CL = s.cache_write(C, "local")
io, jo, ii, ji = s[D].tile("i", "j", 8, 32)
s[C].compute_inline()  # C is now a copy of C.local: fold it into D
s[CL].compute_at(s[D], jo)
s[CL].reorder("k", "i.c", "j.c")
s[CL].unroll("i.c")
s[CL].vectorize("j.c")
s[D].vectorize(ji)
s[D].parallel(io)
for step in s.steps:  # every decision is a plain, replayable record
    print(step.to_json())

# 3. Lower to loop IR and print it.
print(compiler.lower(s, [A, B, D]))

# 4. Build for the host CPU and run on numpy arrays.
mod = compiler.build(s, [A, B, D], cache_dir=None)
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K), dtype=np.float32)
b = rng.standard_normal((K, N), dtype=np.float32)
d = np.empty((M, N), dtype=np.float32)
mod(a, b, d)

# 5. Check against numpy.
np.testing.assert_allclose(d, np.maximum(a @ b, 0.0), rtol=1e-5, atol=1e-5)
print(f"ok: max abs error {np.abs(d - np.maximum(a @ b, 0.0)).max():.2e}")
