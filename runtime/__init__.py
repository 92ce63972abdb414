"""What a board runs: the graph IR, the artifact loader, the executor, the numpy CPU layers, the
runners of an artifact's code (the accelerator's kernels on a ``driver.Device``:
``accelerator``; the host CPU's kernels: ``cpu_kernels``, ``int8_kernels``, the shared object
of ``cpu_code``).

Installed as ``pyvta.runtime``; a board imports this package and the driver, never the compiler
(``tests/unit/test_layering.py``; running artifacts: ``tests/unit/graph/test_runtime_loads.py``).
Compiled CPU nodes without code in their artifact are built by the host's JIT, which the runtime
finds through an entry point (``runtime.jit``), not by importing it."""
