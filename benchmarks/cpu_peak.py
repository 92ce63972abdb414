"""The float32 FMA peak of this CPU, measured: the ceiling any GEMM kernel (ours, MetaSchedule's,
OpenBLAS's) can approach, per core and on all cores.

    .venv/bin/python benchmarks/cpu_peak.py [--seconds 1] [--threads 2]

A JIT-compiled loop (llvmlite, host target) keeps ``ACCUMULATORS`` independent vector
accumulators busy with fused multiply-adds (``acc = acc * a + b``), enough to cover the FMA
latency on current x86 cores. One call runs ``n`` iterations; FLOP/s = 2 x lanes x accumulators
x n / seconds. With several threads, each calls the loop from its own Python thread (ctypes
releases the GIL) and the total is reported (all threads' iterations over the slowest one's
time).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import threading
import time

from llvmlite import ir

from pyvta.compiler.backend.llvm.jit import JitFunction, optimize
from pyvta.compiler.backend.llvm.target import CpuTarget

ACCUMULATORS = 16


def fma_loop_ir(lanes: int) -> str:
    """``float peak(i64 n)``: ``n`` rounds of one FMA on each of ``ACCUMULATORS`` vectors."""
    vec = ir.VectorType(ir.FloatType(), lanes)
    mod = ir.Module(name="peak")
    fma = ir.Function(mod, ir.FunctionType(vec, [vec, vec, vec]), name=f"llvm.fma.v{lanes}f32")
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.IntType(64)]), name="peak")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    loop, done = fn.append_basic_block("loop"), fn.append_basic_block("done")
    entry = b.block
    a = ir.Constant(vec, [ir.Constant(ir.FloatType(), 0.999999)] * lanes)
    c = ir.Constant(vec, [ir.Constant(ir.FloatType(), 1e-7)] * lanes)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(ir.IntType(64))
    accs = [b.phi(vec) for _ in range(ACCUMULATORS)]
    nxt = [b.call(fma, [acc, a, c]) for acc in accs]
    i2 = b.add(i, ir.Constant(ir.IntType(64), 1))
    i.add_incoming(ir.Constant(ir.IntType(64), 0), entry)
    i.add_incoming(i2, loop)
    for k, (acc, n2) in enumerate(zip(accs, nxt, strict=True)):
        acc.add_incoming(ir.Constant(vec, [ir.Constant(ir.FloatType(), float(k))] * lanes), entry)
        acc.add_incoming(n2, loop)
    b.cbranch(b.icmp_signed("<", i2, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = nxt[0]
    for v in nxt[1:]:
        total = b.fadd(total, v)
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))
    return str(mod)


def peak_gflops(threads: int, seconds: float = 1.0, repeats: int = 5) -> list[float]:
    """``repeats`` measurements of the FMA peak on ``threads`` threads, GFLOP/s each."""
    target = CpuTarget.host()
    lanes = target.vector_lanes("float32")
    jit = _jit(lanes, target)
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(jit.address)
    t0 = time.perf_counter()
    fn(1_000_000)
    n = max(1_000_000, int(1_000_000 * seconds / max(time.perf_counter() - t0, 1e-6)))
    flop = n * 2 * lanes * ACCUMULATORS

    def once() -> float:
        spans = [0.0] * threads

        def work(k):
            t = time.perf_counter()
            fn(n)
            spans[k] = time.perf_counter() - t

        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return threads * flop / max(spans) / 1e9

    return [once() for _ in range(repeats)]


_JITS: dict = {}


def _jit(lanes: int, target) -> JitFunction:
    if lanes not in _JITS:
        _JITS[lanes] = JitFunction(optimize(fma_loop_ir(lanes), target), "peak", target)
    return _JITS[lanes]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    p.add_argument("--threads", type=int, default=None, help="default: the host's cores")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    target = CpuTarget.host()
    threads = a.threads or target.num_threads
    lanes = target.vector_lanes("float32")
    print(f"host: {target.cpu}, {lanes} float32 lanes, {ACCUMULATORS} accumulators")
    for nt in sorted({1, threads}):
        vals = peak_gflops(nt, a.seconds, a.repeats)
        print(
            f"FMA peak, {nt} thread{'s' if nt > 1 else ''}: {statistics.median(vals):.1f} GFLOP/s "
            f"(median of {a.repeats}; min {min(vals):.1f}, max {max(vals):.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
