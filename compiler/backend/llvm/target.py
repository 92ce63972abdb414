"""The host CPU as a code-generation target: triple, CPU name, features, SIMD width, threads.

A target can be limited to a lower x86 feature level than the host's (``pyvta.host_cpu``'s
``X86_LEVELS``): by the ``features`` argument of :meth:`CpuTarget.host`, or for a whole process
by the environment variable ``PYVTA_CPU_FEATURES`` (e.g. ``PYVTA_CPU_FEATURES=avx2`` on an
AVX-512 host compiles every kernel as an AVX2-only host would, so one machine tests both kinds
of host).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm

from pyvta import host_cpu
from pyvta.compiler.schedule.scope import ScopeInfo, ScopeTable
from pyvta.host_cpu import X86_LEVELS, CpuFeatureError, feature_level  # noqa: F401 - re-exported

_ELEM_BITS = {"int8": 8, "int32": 32, "int64": 64, "float32": 32, "bool": 8}


def _parse(features: str) -> dict[str, bool]:
    return {f[1:]: f[0] == "+" for f in features.split(",") if f}


@cache
def _init_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@cache
def _init_all_targets() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@dataclass(frozen=True)
class BoardCpu:
    """A CPU that code is cross-compiled for (a board's): LLVM's triple, CPU name and features,
    and its widest SIMD register."""

    name: str
    triple: str
    cpu: str
    features: str
    vector_bits: int
    alias: str  # ``pyvta tune --target`` names it so (``arm-a9``)


# The boards' CPUs (``hw.boards.Board.cpu`` names one): PYNQ-Z1/Z2's Cortex-A9 (ARMv7-A, NEON,
# hard float) and the Cortex-A53 (AArch64) of Ultra96 and ZCU104.
BOARD_CPUS = {
    c.name: c
    for c in (
        BoardCpu(
            "cortex-a9", "armv7a-unknown-linux-gnueabihf", "cortex-a9", "+neon,+vfp3", 128, "arm-a9"
        ),
        BoardCpu("cortex-a53", "aarch64-unknown-linux-gnu", "cortex-a53", "+neon", 128, "arm-a53"),
    )
}


def board_cpu(name: str) -> BoardCpu:
    """The ``BOARD_CPUS`` entry called ``name`` or by its ``alias``, or the first whose triple's
    architecture is that of the triple ``name`` (e.g. ``aarch64-linux-gnu``,
    ``armv7a-linux-gnueabihf``)."""
    if name in BOARD_CPUS:
        return BOARD_CPUS[name]
    for c in BOARD_CPUS.values():
        if name == c.alias:
            return c
    arch = name.split("-")[0]
    for c in BOARD_CPUS.values():
        if c.triple.split("-")[0] == arch:
            return c
    allowed = ", ".join(f"{c.name} or {c.alias} ({c.triple})" for c in BOARD_CPUS.values())
    raise CpuFeatureError(f"no cross-compilation CPU {name!r} (allowed: {allowed})")


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
    def host(num_threads: int | None = None, features: str | None = None) -> CpuTarget:
        """This machine's CPU, limited to the feature level ``features`` (an ``X86_LEVELS``
        name, or ``"host"``; default: ``$PYVTA_CPU_FEATURES``, else the host's own)."""
        n = num_threads
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"num_threads must be a positive int, got {n!r}")
        level = features if features is not None else os.environ.get(host_cpu.FEATURES_ENV, "")
        return _host_target(level or "host", n)

    @staticmethod
    def of_cpu(cpu: str, level: str, num_threads: int = 1) -> CpuTarget:
        """An x86-64 CPU named ``cpu`` (LLVM's name, e.g. ``"icelake-server"``) at feature
        level ``level``: a target to generate code for, not necessarily to run here."""
        lv = feature_level(level)
        features = ",".join(f"+{f}" for f in lv.needs)
        return CpuTarget("x86_64-unknown-linux-gnu", cpu, features, lv.vector_bits, num_threads)

    @staticmethod
    def cross(name: str) -> CpuTarget:
        """A board's CPU (``board_cpu(name)``: a ``BOARD_CPUS`` name or a triple), one thread:
        code generated for it runs on the board, not here."""
        c = board_cpu(name)
        return CpuTarget(c.triple, c.cpu, c.features, c.vector_bits, 1)

    def has(self, *features: str) -> bool:
        """Whether every one of ``features`` (LLVM names, e.g. ``"avx512vnni"``) is on."""
        have = _parse(self.features)
        return all(have.get(f, False) for f in features)

    @property
    def feature_dict(self) -> dict[str, bool]:
        return _parse(self.features)

    @property
    def level(self) -> str:
        """The best ``X86_LEVELS`` name its features meet (``"generic"`` if none, or not
        x86): what a tuning record says it was measured on."""
        return next(iter(host_cpu.levels_met(_parse(self.features))), "generic")

    @property
    def description(self) -> str:
        """``ARCH LEVEL CPU``, e.g. ``x86_64 avx512vnni icelake-server``."""
        return f"{self.triple.split('-')[0]} {self.level} {self.cpu}"

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

    def target_machine(self, shared: bool = False):
        """LLVM's target machine: for the JIT, or (``shared``) for position-independent code
        of a shared object."""
        _init_llvm()
        if not self.triple.startswith(llvm.get_process_triple().split("-")[0]):
            _init_all_targets()
        t = llvm.Target.from_triple(self.triple)
        if shared:
            return t.create_target_machine(
                cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="default"
            )
        return t.create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, codemodel="jitdefault"
        )


def cpu_scopes() -> ScopeTable:
    """Memory scopes of the CPU backend: ``global`` on the heap, ``local`` in the stack frame
    (promoted to registers by LLVM when small and indexed by constants)."""
    return ScopeTable([ScopeInfo("global"), ScopeInfo("local", max_bytes=1 << 20, on_stack=True)])


@cache
def _host_target(level: str, num_threads: int | None) -> CpuTarget:
    """:meth:`CpuTarget.host` at a feature level named (the environment read; threads: all
    cores if None): made once per level and thread count, as the tuner's validity checks ask
    for it per proposal (half a million times in one transfer run, half of its time when made
    afresh each time)."""
    _init_llvm()
    num_threads = num_threads if num_threads is not None else (os.cpu_count() or 1)
    triple, cpu, feats = host_cpu.host(level)
    if feats.get("avx512f"):
        bits = 512
    elif feats.get("avx2"):
        bits = 256
    else:
        bits = 128
    return CpuTarget(triple, cpu, host_cpu.flat(feats), bits, num_threads)
