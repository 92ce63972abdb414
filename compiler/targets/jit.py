"""The host's JIT as the runtime asks for it (``runtime.jit``, through the ``pyvta`` / ``jit``
entry point of pyproject.toml): kernels built in this process, or read from the kernel cache,
for graphs whose compiled nodes have no code for this machine in their artifact."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyvta.runtime.ir import Graph

if TYPE_CHECKING:
    from pyvta.compiler.targets.base import Target

_GEMMS: dict[tuple[int, int, int], tuple[object, int]] = {}  # (M, N, K) -> kernel, N padded


def host_backend(graph: Graph, target: str | Target | None = None):
    """The executor's ``"cpu"`` backend of ``graph`` with its kernels built here for the x86
    feature level of the compile ``target`` (a name or a Target; its ``features``; None: the
    host's own): compiled int8 kernels where it has quantized host nodes (an int8 model:
    ``cpu-int8``'s, or the host layers of ``vta``'s), else compiled float kernels."""
    from pyvta.compiler.targets import get_target
    from pyvta.compiler.targets.cpu.kernels import cpu_backend_for
    from pyvta.compiler.targets.cpu_int8.kernels import int8_backend_for
    from pyvta.runtime.int8_kernels import has_int8_nodes

    features = get_target(target).features if target is not None else None
    if has_int8_nodes(graph):
        return int8_backend_for(graph, features)
    return cpu_backend_for(graph, features)


def _gemm_knobs():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu import GemmKnobs

    return GemmKnobs.for_target(CpuTarget.host())


def gemm_n_pad(n: int) -> int:
    """``n`` padded to the GEMM template's column block on this host."""
    bn = _gemm_knobs().bn
    return -(-n // bn) * bn


def gemm_kernel(m: int, n: int, k: int) -> tuple[object, int]:
    """The float32 ``(M, K) @ (K, N')`` kernel of this host (``N'``: ``n`` padded) on all its
    cores, built once per process (``compiler.targets.cpu.builds``: a fresh process finds its
    lowered function and code on disk)."""
    key = (m, n, k)
    if key not in _GEMMS:
        from pyvta.compiler.targets.cpu.builds import built

        spec, n_pad = gemm_spec(m, n, k)
        _GEMMS[key] = (built(spec), n_pad)
    return _GEMMS[key]


def gemm_spec(m: int, n: int, k: int):
    """:func:`gemm_kernel`'s ``builds.KernelSpec``, and ``n`` padded."""
    import json

    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu import matmul_packed
    from pyvta.compiler.targets.cpu.builds import KernelSpec, lowered

    host = CpuTarget.host()
    knobs, n_pad = _gemm_knobs(), gemm_n_pad(n)
    what = json.dumps(["gemm", m, n_pad, k, repr(knobs), host.key])
    args = (matmul_packed, m, n_pad, k, knobs)
    return KernelSpec(what, lowered, args, host.num_threads, order=(0, m * n * k)), n_pad


def build_gemms(shapes) -> int:
    """Build the :func:`gemm_kernel` kernels of ``shapes`` (``(M, N, K)`` each) missing from
    the cache on every core (``builds.build_missing``), before they are asked for one at a
    time; the workers started (0: none)."""
    from pyvta.compiler.targets.cpu.builds import build_missing

    return build_missing([gemm_spec(*s)[0] for s in sorted(set(shapes))])


def gpu_backend(
    graph: Graph, device: str | None = None, kernels: dict | None = None, race_check=False
):
    """The executor's ``"gpu"`` backend (``compiler.targets.gpu.kernels.gpu_backend``)."""
    from pyvta.compiler.targets.gpu.kernels import gpu_backend as backend

    return backend(graph, device, kernels, race_check)


def gpu_device(name: str | None = None):
    """The GPU device called ``name`` (None: the default): ``compiler.targets.gpu.devices``."""
    from pyvta.compiler.targets.gpu.devices import gpu_device as found

    return found(name)
