"""GPU backend (``target="cuda"``): loop IR with bound loops -> kernels -> PTX (llvmlite's
NVPTX target), run through the CUDA driver API when a GPU is present.

``compiler.build(sch, args, target="cuda", arch="sm_90")`` returns a ``CudaModule`` whose
``.ptx`` is the PTX text. The same kernels run on the CPU with GPU semantics under
``target="cuda-emulated"`` (``backend.cuda_emulated``).
"""

from __future__ import annotations

from pyvta.compiler.backend.cuda.limits import DEFAULT_ARCH, LIMITS, LaunchError, limits
from pyvta.compiler.backend.cuda.passes import CUDA_PASSES

__all__ = ["BACKEND", "CUDA_PASSES", "DEFAULT_ARCH", "LIMITS", "LaunchError", "limits"]


def prepare(func, arch: str = DEFAULT_ARCH, passes=None, then=()):
    """``func`` after the GPU pass list (``passes``, default ``CUDA_PASSES``; then the passes
    ``then``) and its kernels, each checked against ``arch``'s launch limits."""
    from pyvta.compiler.backend.cuda.kernels import check_launch, split_kernels
    from pyvta.compiler.passes.pipeline import run_passes

    limits(arch)
    func = run_passes(func, [*(CUDA_PASSES if passes is None else passes), *then])
    kernels = split_kernels(func)
    for k in kernels:
        check_launch(k, arch)
    return func, kernels


class CudaBackend:
    name = "cuda"
    passes = CUDA_PASSES

    def build(self, func, arch: str = DEFAULT_ARCH, passes=None):
        """A ``CudaModule`` for ``arch`` (``sm_80`` or ``sm_90``)."""
        from pyvta.compiler.backend.cuda.codegen import compile_ptx
        from pyvta.compiler.backend.cuda.module import CudaModule
        from pyvta.compiler.backend.cuda.passes import PTX_PASSES

        func, kernels = prepare(func, arch, passes, PTX_PASSES)
        return CudaModule(func, kernels, compile_ptx(func, kernels, arch), arch)


BACKEND = CudaBackend()
