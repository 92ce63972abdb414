"""The code generator the runtime asks where a graph's compiled nodes have no code for this
machine: the host's JIT (``compiler.targets.jit``), found through the ``pyvta`` / ``jit`` entry
point that the installation declares (pyproject.toml), so that no runtime module imports the
compiler. An artifact that carries its code (``runtime.cpu_code``, ``pyvta compile
--cpu-target``/``--board``) and an accelerator artifact run without it; a board has no llvmlite,
and the runtime does not ask there (its numpy kernels run the nodes they can).

What the JIT module answers:

- ``host_backend(graph)``: the executor's ``"cpu"`` backend with the graph's kernels built here;
- ``gemm_kernel(m, n, k)``: ``(kernel called as Module is, N padded)`` of a float32 product,
  and ``gemm_n_pad(n)``: its N padded (``runtime.cpu_llvm.gemm``);
- ``gpu_backend(graph, device, kernels, race_check)``: the ``"gpu"`` backend on ``device``.
- ``gpu_device(name)``: what the GPU device called ``name`` is (``on_gpu``: a real GPU).
"""

from __future__ import annotations

import functools

from pyvta.runtime.ir import GraphError

GROUP, NAME = "pyvta", "jit"


@functools.cache
def jit():
    """The JIT module (loaded on the first call); ``GraphError`` when none is installed."""
    from importlib.metadata import entry_points

    found = list(entry_points(group=GROUP, name=NAME))
    if not found:
        raise GraphError(
            f"no code generator is installed (entry point {GROUP}/{NAME}): run artifacts that"
            " carry their code (pyvta compile --cpu-target/--board) or install pyvta[host]"
        )
    return found[0].load()
