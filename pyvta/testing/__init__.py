"""Helpers that tests and benchmarks share, importable wherever pyvta is installed (as
``numpy.testing`` is): nothing at run time needs them.

- ``pyvta.testing.naive``: a naive VTA executor written from the ISA text, independently of
  ``pyvta.sim``, to check the simulator against.
- ``pyvta.testing.compare``: an accelerator run (the RTL, later a board) against ``sim.run``.
- ``pyvta.testing.compiled``: a layer the compiler writes for a config, as a program bundle.
- ``pyvta.testing.remote``: a raw client of the device server, to send it what a client should not.
- ``pyvta.testing.checkout``: the files of a source checkout, as git lists them.
- ``pyvta.testing.netgen``: seeded random ONNX networks of the kinds users bring (odd channels,
  groups, dilation, asymmetric pads, residuals, concats, pools), with a one-line ``describe``.

The directed programs that check an accelerator are ``pyvta.sim.directed``; the float reference
(onnxruntime) a compiled network is judged against is ``pyvta.compiler.graph.reference``.
"""
