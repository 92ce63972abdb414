"""The host CPU that code is generated for: its LLVM name and features, limited to an x86 feature
level where asked (``X86_LEVELS``), for every package that generates machine code (the
compiler's CPU backend, ``compiler.backend.llvm.target``, and the simulator's native engine,
``sim.native``).

``PYVTA_CPU_FEATURES=LEVEL`` limits every such package of a process to ``LEVEL`` (e.g. ``avx2``
on an AVX-512 host compiles as an AVX2-only host would: one machine tests both kinds of host);
unset or ``host``, the host's own features. Nothing is read at import.

This module imports nothing of ours but ``isa.errors`` (``tests/unit/test_layering.py`` lists it
as a leaf every package may use).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from pyvta.isa.errors import PyvtaError

FEATURES_ENV = "PYVTA_CPU_FEATURES"


class CpuFeatureError(PyvtaError, ValueError):
    """A feature level this host cannot run, or a name that is no feature level."""


@dataclass(frozen=True)
class FeatureLevel:
    """An x86 feature level: the LLVM features it ``needs``, the host features it turns off
    (every feature whose name starts with one of ``masks``) and its widest vectors."""

    name: str
    needs: tuple[str, ...]
    masks: tuple[str, ...]
    vector_bits: int


_AFTER_AVX2 = ("avx512", "avx10", "avxifma", "avxneconvert", "avxvnniint", "amx", "evex512")
# best first: a CPU's level is the first whose needs its features meet
X86_LEVELS = {
    lv.name: lv
    for lv in (
        FeatureLevel("avx512vnni", ("avx512f", "avx512bw", "avx512vl", "avx512vnni"), (), 512),
        FeatureLevel("avx512", ("avx512f", "avx512bw", "avx512vl"), ("avx512vnni", "avxvnni"), 512),
        FeatureLevel("avxvnni", ("avx2", "fma", "avxvnni"), _AFTER_AVX2, 256),
        FeatureLevel("avx2", ("avx2", "fma"), (*_AFTER_AVX2, "avxvnni"), 256),
        FeatureLevel("sse", ("sse4.2",), ("avx", "fma", "f16c", "xop", "vaes", "vpclmul"), 128),
    )
}


def feature_level(name: str) -> FeatureLevel:
    """The ``X86_LEVELS`` entry called ``name``."""
    if name not in X86_LEVELS:
        raise CpuFeatureError(
            f"unknown CPU feature level {name!r} (allowed: {', '.join(X86_LEVELS)}, or host)"
        )
    return X86_LEVELS[name]


def levels_met(features: dict[str, bool]) -> list[str]:
    """The ``X86_LEVELS`` names whose needs ``features`` meet, best first."""
    return [n for n, lv in X86_LEVELS.items() if all(features.get(f) for f in lv.needs)]


def limit(features: dict[str, bool], level: FeatureLevel) -> dict[str, bool]:
    """``features`` with ``level``'s masks turned off; a need they lack is an error."""
    lacking = [f for f in level.needs if not features.get(f)]
    if lacking:
        raise CpuFeatureError(
            f"this CPU cannot run feature level {level.name!r}: it lacks {', '.join(lacking)} "
            f"(levels it runs: {', '.join(levels_met(features)) or 'none'})"
        )
    return {f: on and not f.startswith(level.masks) for f, on in features.items()}


def host(level: str | None = None) -> tuple[str, str, dict[str, bool]]:
    """``(triple, cpu, features)`` of this machine, its features limited to ``level`` (an
    ``X86_LEVELS`` name or ``"host"``; default ``$PYVTA_CPU_FEATURES``, else the host's)."""
    triple, cpu, host_features = _llvm_host()
    features = dict(host_features)
    name = level if level is not None else os.environ.get(FEATURES_ENV, "host")
    if name not in ("host", ""):
        lv = feature_level(name)
        if not triple.startswith(("x86_64", "i686", "i386")):
            raise CpuFeatureError(
                f"feature level {name!r} is an x86 level; this host is {triple} "
                f"({FEATURES_ENV} applies to x86 hosts only)"
            )
        features = limit(features, lv)
    return triple, cpu, features


@functools.cache
def _llvm_host() -> tuple[str, str, dict[str, bool]]:
    """LLVM's triple, CPU name and features of this machine (asked once per process)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), dict(llvm.get_host_cpu_features())


def flat(features: dict[str, bool]) -> str:
    """LLVM's feature string: ``+name`` or ``-name`` of each, sorted."""
    return ",".join(f"{'+' if on else '-'}{f}" for f, on in sorted(features.items()))
