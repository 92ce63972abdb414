"""Hide x86 features from this process's CPUID, so that a baseline library picks the kernels it
would pick on a host without them.

``PYVTA_CPU_FEATURES=avx2`` limits our own code generation to AVX2 on an AVX-512 host, but a
baseline such as onnxruntime reads CPUID itself and keeps its AVX-512 VNNI (or AMX) kernels: an
"AVX2 host" comparison is then against a faster library than such a host runs.
:func:`mask_cpuid` makes the CPUID instruction fault in this thread and the threads it starts
afterwards (Linux's ``arch_prctl(ARCH_SET_CPUID, 0)``, on CPUs with CPUID faulting) and answers
it from a signal handler with the features of ``FeatureLevel.masks`` (``pyvta.host_cpu``'s
``X86_LEVELS``) cleared. Call it before the library is imported (its CPU detection runs at load)
and only in a process of its own for that purpose: a benchmark's (the handler owns SIGSEGV).

The handler is a few lines of C built once with the system's C compiler into the cache root
(``pyvta.cache``); a host without one, without CPUID faulting or not x86-64 Linux raises
:class:`CpuidMaskError` saying which.
"""

from __future__ import annotations

import ctypes
import hashlib
import platform
import shutil
import subprocess
import sys

from pyvta.host_cpu import X86_LEVELS, CpuFeatureError
from pyvta.isa.errors import PyvtaError

# LLVM's feature name -> (CPUID leaf, subleaf, register, bit): the features after AVX2 a level
# may hide (those ``FeatureLevel.masks`` names start with)
CPUID_BITS = {
    "avx512f": (7, 0, "ebx", 16),
    "avx512dq": (7, 0, "ebx", 17),
    "avx512ifma": (7, 0, "ebx", 21),
    "avx512pf": (7, 0, "ebx", 26),
    "avx512er": (7, 0, "ebx", 27),
    "avx512cd": (7, 0, "ebx", 28),
    "avx512bw": (7, 0, "ebx", 30),
    "avx512vl": (7, 0, "ebx", 31),
    "avx512vbmi": (7, 0, "ecx", 1),
    "avx512vbmi2": (7, 0, "ecx", 6),
    "avx512vnni": (7, 0, "ecx", 11),
    "avx512bitalg": (7, 0, "ecx", 12),
    "avx512vpopcntdq": (7, 0, "ecx", 14),
    "avx512vp2intersect": (7, 0, "edx", 8),
    "amx-bf16": (7, 0, "edx", 22),
    "avx512fp16": (7, 0, "edx", 23),
    "amx-tile": (7, 0, "edx", 24),
    "amx-int8": (7, 0, "edx", 25),
    "avxvnni": (7, 1, "eax", 4),
    "avx512bf16": (7, 1, "eax", 5),
    "amx-fp16": (7, 1, "eax", 21),
    "avxifma": (7, 1, "eax", 23),
    "avxvnniint8": (7, 1, "edx", 4),
    "avxneconvert": (7, 1, "edx", 5),
    "avx10.1-256": (7, 1, "edx", 19),
}
# the registers the handler masks, in its arguments' order
MASKED_REGISTERS = ((7, 0, "ebx"), (7, 0, "ecx"), (7, 0, "edx"), (7, 1, "eax"), (7, 1, "edx"))

_SOURCE = r"""
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static unsigned clear[5]; /* MASKED_REGISTERS' bits to clear */

static void on_segv(int sig, siginfo_t *info, void *context) {
    greg_t *g = ((ucontext_t *)context)->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    unsigned a, b, c, d, leaf = (unsigned)g[REG_RAX], sub = (unsigned)g[REG_RCX];
    (void)sig; (void)info;
    if (ip[0] != 0x0f || ip[1] != 0xa2) { /* not CPUID: the fault again, unhandled */
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, a, b, c, d);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
    if (leaf == 7 && sub == 0) { b &= ~clear[0]; c &= ~clear[1]; d &= ~clear[2]; }
    if (leaf == 7 && sub == 1) { a &= ~clear[3]; d &= ~clear[4]; }
    g[REG_RAX] = a; g[REG_RBX] = b; g[REG_RCX] = c; g[REG_RDX] = d;
    g[REG_RIP] += 2;
}

int pyvta_mask_cpuid(unsigned b70, unsigned c70, unsigned d70, unsigned a71, unsigned d71) {
    struct sigaction sa;
    clear[0] = b70; clear[1] = c70; clear[2] = d70; clear[3] = a71; clear[4] = d71;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    if (sigaction(SIGSEGV, &sa, 0)) return -1;
    return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

unsigned pyvta_cpuid7(int reg) { /* leaf 7 subleaf 0 as this thread reads it */
    unsigned r[4];
    __cpuid_count(7, 0, r[0], r[1], r[2], r[3]);
    return r[reg & 3];
}
"""

_masked: str | None = None


class CpuidMaskError(PyvtaError, RuntimeError):
    """CPUID cannot be masked here (not x86-64 Linux, no CPUID faulting, no C compiler), or too
    late (the library already loaded)."""


def level_masks(level: str) -> tuple[int, ...]:
    """The bits to clear in each of ``MASKED_REGISTERS`` to hide what ``level`` hides."""
    if level not in X86_LEVELS:
        raise CpuFeatureError(f"no x86 feature level {level!r} (allowed: {', '.join(X86_LEVELS)})")
    hidden = [f for f in CPUID_BITS if f.startswith(X86_LEVELS[level].masks)]
    masks = dict.fromkeys(MASKED_REGISTERS, 0)
    for f in hidden:
        leaf, sub, reg, bit = CPUID_BITS[f]
        masks[(leaf, sub, reg)] |= 1 << bit
    return tuple(masks.values())


def _library() -> ctypes.CDLL:
    from pyvta import cache

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise CpuidMaskError("masking CPUID needs a C compiler (cc, gcc or clang) on PATH")
    key = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    lib = cache.folder("cpuid-mask") / f"mask-{key}.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        src = lib.with_suffix(".c")
        src.write_text(_SOURCE)
        tmp = lib.with_name(lib.name + ".tmp")
        done = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise CpuidMaskError(f"{cc} could not build the CPUID handler: {done.stderr[-400:]}")
        tmp.replace(lib)
    return ctypes.CDLL(str(lib))


def mask_cpuid(level: str, before: tuple[str, ...] = ("onnxruntime",)) -> None:
    """From now on this thread (and the threads it starts) reads CPUID without the features
    ``level`` (an ``X86_LEVELS`` name) hides. ``before``: modules that must not be loaded yet
    (their CPU detection would have run already)."""
    global _masked
    masks = level_masks(level)
    if _masked is not None:
        if _masked != level:
            raise CpuidMaskError(f"CPUID is already masked to {_masked!r}, not {level!r}")
        return
    loaded = [m for m in before if m in sys.modules]
    if loaded:
        raise CpuidMaskError(f"mask CPUID before importing {', '.join(loaded)}")
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise CpuidMaskError(
            f"masking CPUID needs x86-64 Linux, not {sys.platform} {platform.machine()}"
        )
    if _library().pyvta_mask_cpuid(*(ctypes.c_uint(m) for m in masks)) != 0:
        raise CpuidMaskError(
            "this CPU or kernel has no CPUID faulting (arch_prctl ARCH_SET_CPUID failed;"
            " /proc/cpuinfo flag cpuid_fault)"
        )
    _masked = level


def cpuid_leaf7() -> tuple[int, int, int, int]:
    """CPUID leaf 7 subleaf 0 as this thread now reads it: ``(eax, ebx, ecx, edx)`` (through
    the handler when masked)."""
    lib = _library()
    lib.pyvta_cpuid7.restype = ctypes.c_uint
    return tuple(lib.pyvta_cpuid7(i) for i in range(4))  # type: ignore[return-value]
