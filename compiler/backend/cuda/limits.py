"""Per-architecture limits of NVIDIA GPUs that a kernel's launch and resources must respect,
and the memory scopes of the GPU backend.

Figures from the CUDA C Programming Guide's compute-capability table (8.0 = A100, 9.0 = H100 /
H200): both allow 1024 threads per block (x, y up to 1024, z up to 64), 48 KiB of static
shared memory per block (more only as dynamic shared memory, which this backend does not
emit), 255 registers per thread and 64 Ki 32-bit registers per SM (so per block).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyvta.compiler.schedule.scope import ScopeInfo, ScopeTable
from pyvta.isa.errors import PyvtaError


class LaunchError(PyvtaError, ValueError):
    """A kernel's launch shape or resources exceed what the architecture allows."""


@dataclass(frozen=True)
class GpuLimits:
    arch: str
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    max_shared_bytes_per_block: int
    max_registers_per_thread: int
    max_registers_per_block: int
    warp_size: int = 32


_GRID = (2**31 - 1, 65535, 65535)
LIMITS = {
    "sm_80": GpuLimits("sm_80", 1024, (1024, 1024, 64), _GRID, 48 * 1024, 255, 65536),
    "sm_90": GpuLimits("sm_90", 1024, (1024, 1024, 64), _GRID, 48 * 1024, 255, 65536),
}
DEFAULT_ARCH = "sm_90"


def limits(arch: str) -> GpuLimits:
    if arch not in LIMITS:
        raise LaunchError(f"GPU architecture {arch!r} is not supported (allowed: {sorted(LIMITS)})")
    return LIMITS[arch]


def gpu_scopes(arch: str = DEFAULT_ARCH) -> ScopeTable:
    """``global``: device memory; ``shared``: one copy per thread block (addrspace 3), at most
    the architecture's static shared memory; ``local``: per thread, in registers when indexed
    by constants (else local memory)."""
    lim = limits(arch)
    return ScopeTable(
        [
            ScopeInfo("global", alignment_bytes=256),
            ScopeInfo("shared", max_bytes=lim.max_shared_bytes_per_block, alignment_bytes=16),
            ScopeInfo("local", max_bytes=16 * 1024, alignment_bytes=16, on_stack=True),
        ]
    )
