"""A compiled GPU function: its PTX text and launch plan, runnable when a GPU is present."""

from __future__ import annotations

from pyvta.runtime.arrays import check_arrays


class CudaModule:
    """``.ptx``: PTX text (one ``.entry`` per kernel); ``.kernels``: the ``Kernel`` records;
    ``.plan``: the JSON-able launch plan (``launch.py``); ``.ir``: the loop IR after the GPU
    passes. ``module(*arrays)`` uploads the arrays, runs every kernel on GPU 0 and downloads
    them in place (``launch.GpuUnavailable`` when there is no GPU)."""

    def __init__(self, func, kernels, ptx: str, arch: str):
        self.func, self.kernels, self.ptx, self.arch = func, kernels, ptx, arch
        buffers = func.params + func.workspace
        self.plan = {
            "buffers": [
                {"name": b.name, "shape": list(b.shape), "dtype": b.dtype} for b in buffers
            ],
            "n_params": len(func.params),
            "kernels": [k.launch(buffers) for k in kernels],
        }
        self._loaded = None

    @property
    def ir(self):
        return self.func

    def resources(self):
        """ptxas' per-kernel report (``ptxas.KernelResources``) for this module's arch."""
        from pyvta.compiler.backend.cuda.ptxas import assemble

        return assemble(self.ptx, self.arch)

    def _plan_on_gpu(self):
        if self._loaded is None:
            from pyvta.compiler.backend.cuda.launch import Gpu

            self._loaded = Gpu().load(self.ptx, self.plan)
        return self._loaded

    def __call__(self, *arrays) -> None:
        self._plan_on_gpu().run(check_arrays(self.func, arrays))

    def time_ms(self, *arrays, number: int = 10, repeat: int = 3) -> float:
        loaded = self._plan_on_gpu()
        loaded.upload(check_arrays(self.func, arrays))
        return loaded.time_ms(number, repeat)
