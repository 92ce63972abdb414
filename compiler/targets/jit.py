"""The host's JIT as the runtime asks for it (``runtime.jit``, through the ``pyvta`` / ``jit``
entry point of pyproject.toml): kernels built in this process, or read from the kernel cache,
for graphs whose compiled nodes have no code for this machine in their artifact."""

from __future__ import annotations

from pyvta.runtime.ir import Graph

_GEMMS: dict[tuple[int, int, int], tuple[object, int]] = {}  # (M, N, K) -> kernel, N padded


def host_backend(graph: Graph):
    """The executor's ``"cpu"`` backend of ``graph`` with its kernels built here (the ``cpu``
    target's node backend: compiled int8 kernels where it has quantized host nodes, compiled
    float kernels for its ``cpu_*`` nodes)."""
    from pyvta.compiler.targets.cpu import TARGET

    return TARGET.node_backend(graph)


def _gemm_knobs():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu import GemmKnobs

    return GemmKnobs.for_target(CpuTarget.host())


def gemm_n_pad(n: int) -> int:
    """``n`` padded to the GEMM template's column block on this host."""
    bn = _gemm_knobs().bn
    return -(-n // bn) * bn


def gemm_kernel(m: int, n: int, k: int) -> tuple[object, int]:
    """The float32 ``(M, K) @ (K, N')`` kernel of this host (``N'``: ``n`` padded), built once
    per process (the disk cache skips code generation)."""
    key = (m, n, k)
    if key not in _GEMMS:
        from pyvta import compiler
        from pyvta.compiler.ops.cpu import matmul_packed

        n_pad = gemm_n_pad(n)
        sch, args = matmul_packed(m, n_pad, k, _gemm_knobs())
        _GEMMS[key] = (compiler.build(sch, args), n_pad)
    return _GEMMS[key]


def gpu_backend(graph: Graph, device: str = "cuda", kernels: dict | None = None, race_check=False):
    """The executor's ``"gpu"`` backend (``compiler.targets.gpu.kernels.gpu_backend``)."""
    from pyvta.compiler.targets.gpu.kernels import gpu_backend as backend

    return backend(graph, device, kernels, race_check)
