"""``target="cuda-emulated"``: the GPU backend's kernels run on the CPU with GPU semantics.

The lowered function goes through the same ``CUDA_PASSES`` and kernel split as for
``target="cuda"``; ``cuda.emulate`` turns the kernels into CPU loop IR (block loops, phases
between barriers, per-thread registers, per-block shared memory), which the llvmlite CPU
backend compiles twice: threads in forward and in reverse order within each phase. A call runs
both and raises ``RaceError`` when they disagree (a missing barrier or another race between
threads); with ``race_check=False`` only the forward order runs.
"""

from __future__ import annotations

import numpy as np

from pyvta.compiler.backend.cuda.limits import DEFAULT_ARCH
from pyvta.compiler.backend.cuda.passes import CUDA_PASSES
from pyvta.isa.errors import PyvtaError


class RaceError(PyvtaError, RuntimeError):
    """Forward and reverse thread orders produced different results."""


class EmulatedModule:
    """``module(*arrays)`` like a CPU module; ``.ir`` is the GPU loop IR (after the GPU passes),
    ``.kernels`` its kernels, ``.forward`` / ``.reverse`` the two CPU modules."""

    def __init__(self, func, kernels, forward, reverse, race_check: bool):
        self.func, self.kernels = func, kernels
        self.forward, self.reverse, self.race_check = forward, reverse, race_check

    @property
    def ir(self):
        return self.func

    def __call__(self, *arrays) -> None:
        if not self.race_check:
            self.forward(*arrays)
            return
        copies = [a.copy() for a in arrays]
        self.reverse(*copies)
        self.forward(*arrays)
        for buf, a, c in zip(self.func.params, arrays, copies, strict=True):
            if not np.array_equal(a, c, equal_nan=a.dtype.kind == "f"):
                same = a == c
                if a.dtype.kind == "f":
                    same |= np.isnan(a) & np.isnan(c)
                bad = np.argwhere(~same)
                first = tuple(int(i) for i in bad[0])
                raise RaceError(
                    f"{self.func.name}: {buf.name} differs in {len(bad)} elements between "
                    f"forward and reverse thread order (first at {first}): threads race "
                    "on shared memory (a missing barrier?)"
                )

    def time_ms(self, *arrays, number: int = 1, repeat: int = 1) -> float:
        return self.forward.time_ms(*arrays, number=number, repeat=repeat)


class CudaEmulatedBackend:
    name = "cuda-emulated"
    passes = CUDA_PASSES

    def build(
        self,
        func,
        arch: str = DEFAULT_ARCH,
        passes=None,
        race_check: bool = True,
        cache_dir=None,
        num_threads=None,
    ):
        """``passes``: the GPU pass list to use (default ``CUDA_PASSES``; tests drop
        ``insert_barriers`` to show the race check); ``cache_dir`` / ``num_threads`` go to the
        CPU backend (default: memory-only cache)."""
        from pyvta.compiler.backend import get_backend
        from pyvta.compiler.backend.cuda import prepare
        from pyvta.compiler.backend.cuda.emulate import emulate

        func, kernels = prepare(func, arch, passes)
        cpu = get_backend("llvm")
        fwd = cpu.build(emulate(func, kernels), cache_dir=cache_dir, num_threads=num_threads)
        rev = None
        if race_check:
            rev = cpu.build(
                emulate(func, kernels, reverse=True), cache_dir=cache_dir, num_threads=num_threads
            )
        return EmulatedModule(func, kernels, fwd, rev, race_check)


BACKEND = CudaEmulatedBackend()
