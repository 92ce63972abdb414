"""The FMA peak's loop (``compiler.backend.llvm.peak``, ``benchmarks/cpu_peak.py``) keeps its
accumulators in registers on every register file: with 16 of AVX2's 16 vector registers it spilled to the stack and measured half the
peak (Zen 1: 17 GFLOP/s a thread against 38)."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import pytest

from pyvta.compiler.backend.llvm import peak
from pyvta.compiler.backend.llvm.jit import optimize
from pyvta.compiler.backend.llvm.target import CpuTarget


def _stack_refs(target: CpuTarget, n_acc: int) -> tuple[int, int]:
    """(stack operands, FMA instructions) in the loop's assembly for ``target``."""
    text = optimize(peak.fma_loop_ir(target.vector_lanes("float32"), n_acc), target)
    asm = target.target_machine().emit_assembly(llvm.parse_assembly(text))
    return len(re.findall(r"\(%rsp\)", asm)), len(re.findall(r"\bvfmadd", asm))


@pytest.mark.parametrize("cpu,level,registers", [("znver1", "avx2", 16), ("znver4", "avx512", 32)])
def test_the_peak_loop_stays_in_registers(cpu, level, registers):
    target = CpuTarget.of_cpu(cpu, level)
    assert target.vector_registers == registers
    n_acc = peak.accumulators(target)
    assert 8 <= n_acc <= registers - peak.SPARE_REGISTERS
    spills, fmas = _stack_refs(target, n_acc)
    assert spills == 0 and fmas >= n_acc
    if registers == 16:  # the count it had: spills, so this check can tell
        assert _stack_refs(target, 16)[0] > 0


def test_the_peak_is_measured_on_this_host():
    (gflops,) = peak.peak_gflops(1, seconds=0.05, repeats=1)
    assert gflops > 0.5
