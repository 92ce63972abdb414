"""The host CPU as a code-generation target: triple, CPU name, features, SIMD width, threads."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm

from pyvta.compiler.schedule.scope import ScopeInfo, ScopeTable

_ELEM_BITS = {"int8": 8, "int32": 32, "int64": 64, "float32": 32, "bool": 8}


@cache
def _init_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class CpuTarget:
    """``vector_bits``: widest SIMD register (512 with AVX-512, 256 with AVX2, else 128);
    ``num_threads``: threads a ``parallel`` loop is split across."""

    triple: str
    cpu: str
    features: str
    vector_bits: int
    num_threads: int

    @staticmethod
    def host(num_threads: int | None = None) -> CpuTarget:
        _init_llvm()
        feats = llvm.get_host_cpu_features()
        if feats.get("avx512f"):
            bits = 512
        elif feats.get("avx2"):
            bits = 256
        else:
            bits = 128
        n = num_threads if num_threads is not None else (os.cpu_count() or 1)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"num_threads must be a positive int, got {n!r}")
        return CpuTarget(
            llvm.get_process_triple(), llvm.get_host_cpu_name(), feats.flatten(), bits, n
        )

    @property
    def vector_registers(self) -> int:
        """SIMD registers in the register file (32 with AVX-512, else 16)."""
        return 32 if self.vector_bits >= 512 else 16

    def vector_lanes(self, dtype: str) -> int:
        """SIMD lanes of ``dtype`` in one register (16 float32 lanes with AVX-512)."""
        return self.vector_bits // _ELEM_BITS[dtype]

    @property
    def key(self) -> str:
        return f"{self.triple}|{self.cpu}|{self.features}|{self.vector_bits}|{self.num_threads}"

    def target_machine(self):
        _init_llvm()
        t = llvm.Target.from_triple(self.triple)
        return t.create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, codemodel="jitdefault"
        )


def cpu_scopes() -> ScopeTable:
    """Memory scopes of the CPU backend: ``global`` on the heap, ``local`` in the stack frame
    (promoted to registers by LLVM when small and indexed by constants)."""
    return ScopeTable([ScopeInfo("global"), ScopeInfo("local", max_bytes=1 << 20, on_stack=True)])
