"""The float32 FMA peak of this CPU, measured: the ceiling any GEMM kernel (ours, MetaSchedule's,
OpenBLAS's) can approach, per core and on all cores (``benchmarks/cpu_peak.py`` prints it;
``benchmarks/cpu_headroom.py`` and ``tune_vs_metaschedule.py`` set kernels against it).

A JIT-compiled loop (llvmlite, host target) keeps independent vector accumulators busy with
fused multiply-adds (``acc = acc * a + b``), enough to cover the FMA latency on current x86
cores and few enough to stay in the register file with the two constants
(:func:`accumulators`: 16 of AVX-512's 32 registers, 12 of AVX2's 16; 16 there spilled to the
stack and measured half the peak on a Zen 1: 17 GFLOP/s a thread against 38). One call runs
``n`` iterations; FLOP/s = 2 x lanes x accumulators x n / seconds. With several threads, each
calls the loop from its own Python thread (ctypes releases the GIL) and the total is reported
(all threads' iterations over the slowest one's time).
"""

from __future__ import annotations

import ctypes
import threading
import time

from llvmlite import ir

from pyvta.compiler.backend.llvm.jit import JitFunction, optimize
from pyvta.compiler.backend.llvm.target import CpuTarget

MAX_ACCUMULATORS = 16
SPARE_REGISTERS = 4  # the two constants, and room for the loop


def accumulators(target) -> int:
    """How many vector accumulators the loop keeps on ``target`` (a ``CpuTarget``): all in
    registers, at most ``MAX_ACCUMULATORS``."""
    return min(MAX_ACCUMULATORS, target.vector_registers - SPARE_REGISTERS)


def fma_loop_ir(lanes: int, n_acc: int) -> str:
    """``float peak(i64 n)``: ``n`` rounds of one FMA on each of ``n_acc`` vectors."""
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
    accs = [b.phi(vec) for _ in range(n_acc)]
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
    n_acc = accumulators(target)
    jit = _jit(lanes, n_acc, target)
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(jit.address)
    t0 = time.perf_counter()
    fn(1_000_000)
    n = max(1_000_000, int(1_000_000 * seconds / max(time.perf_counter() - t0, 1e-6)))
    flop = n * 2 * lanes * n_acc

    return [
        threads * flop / slowest_thread_s(lambda k: fn(n), threads) / 1e9 for _ in range(repeats)
    ]


def slowest_thread_s(work, threads: int) -> float:
    """Seconds the slowest of ``threads`` Python threads, started together, takes to run
    ``work(k)`` (``k`` its number; the work releases the GIL: a ctypes call, numpy): what a
    measurement over several cores divides by."""
    spans = [0.0] * threads

    def timed(k: int) -> None:
        t = time.perf_counter()
        work(k)
        spans[k] = time.perf_counter() - t

    ts = [threading.Thread(target=timed, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return max(spans)


_JITS: dict = {}


def _jit(lanes: int, n_acc: int, target) -> JitFunction:
    if (lanes, n_acc) not in _JITS:
        ir_text = optimize(fma_loop_ir(lanes, n_acc), target)
        _JITS[lanes, n_acc] = JitFunction(ir_text, "peak", target)
    return _JITS[lanes, n_acc]
