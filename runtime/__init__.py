"""What a board runs: the graph IR, the executor and the numpy CPU layers of a compiled model,
and the loader of an artifact's shared object for the board's CPU (``cpu_code``).

Installed as ``pyvta.runtime``; a board imports this package and the driver, not the compiler
(``tests/unit/test_layering.py`` lists what of the compiler it still loads)."""
