"""The shipped non-default configs on the RTL, each Verilated once per module: small
(bitstreams/configs/small.json: BLOCK 8, 64-bit bus) and ultrascale (BLOCK 32, 128-bit bus, a
512 KiB weight buffer, 1024 multipliers). Directed and random programs under AXI back-pressure,
and conv / dense layers the compiler writes for the config, compared with the simulator bit for
bit. The cycle model's error against the RTL on the compiled layers and directed programs is
printed, not asserted: the model is calibrated on the default config (test_rtl_compiled.py holds
it to 5% there).

Cost on 2 shared cores: small builds in about 1.5 minutes and runs in 25 s; ultrascale builds in
about 5.5 minutes (20 MB of C++, 0.8 GB peak: the Verilog export's) and runs in 105 s."""

from pathlib import Path

import numpy as np
import pytest

from pyvta import isa, sim
from pyvta.compiler.backend.vta import ConvWorkload, Epilogue
from pyvta.hw import runner
from pyvta.sim.directed import directed_programs
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatches
from pyvta.testing.compiled import conv_bundle

pytestmark = [pytest.mark.hw, pytest.mark.slow]

CONFIG_DIR = Path(__file__).resolve().parents[2] / "bitstreams" / "configs"
CONFIG_NAMES = ("small", "ultrascale")
SEED = 4000
RANDOM_PROGRAMS = 30
LAYER_SEED = 77


@pytest.fixture(scope="module", params=CONFIG_NAMES)
def config_build(request, hw_builder) -> runner.Build:
    """The config's accelerator, Verilated (``--hw-cache``: reused from ~/.cache/pyvta/hw)."""
    return hw_builder(isa.HwConfig.load(CONFIG_DIR / f"{request.param}.json"), "verilator")


def _layers(cfg: isa.HwConfig) -> dict[str, sim.Program]:
    """Compiled layers sized in blocks of ``cfg.block_in`` channels, the compiler's default
    schedules for the config (two virtual threads, a stride-2 residual, a 1x1 conv, a GEMM tile)."""
    b = cfg.block_in
    rng = np.random.default_rng(LAYER_SEED)
    layers = {
        f"conv 8x8 {2 * b}->{2 * b} k3": (
            ConvWorkload(8, 8, 2 * b, 2 * b, 3, 3, 1, 1, b),
            Epilogue.requant(9, relu=True),
        ),
        f"conv 9x9 {b + b // 4}->{3 * b} k3 s2 residual": (
            ConvWorkload(9, 9, b + b // 4, 3 * b, 3, 3, 2, 1, b),
            Epilogue(bias=True, shift=8, lo=0, hi=127, residual=True, residual_shift=8),
        ),
        f"conv 14x14 {2 * b}->{2 * b} k1": (
            ConvWorkload(14, 14, 2 * b, 2 * b, 1, 1, 1, 0, b),
            Epilogue.requant(7),
        ),
        f"dense {4 * b}->{3 * b}": (ConvWorkload.dense(4 * b, 3 * b, b), Epilogue.requant(7)),
    }
    return {name: conv_bundle(wl, ep, rng, cfg) for name, (wl, ep) in layers.items()}


def test_directed_and_random_programs_match_sim(config_build, tmp_path):
    cfg = config_build.cfg
    print(f"\n{cfg.tag}: seeds {SEED}..{SEED + RANDOM_PROGRAMS - 1}, back-pressure seed 13")
    progs = list(directed_programs(cfg).items())
    seeds = range(SEED, SEED + RANDOM_PROGRAMS)
    progs += [(f"seed {s}", random_program(np.random.default_rng(s), cfg)) for s in seeds]
    results = runner.run_programs(
        [p for _, p in progs], built=config_build, work_dir=tmp_path, backpressure=True, seed=13
    )
    bad = accelerator_mismatches(progs, results)
    assert not bad, "\n".join(bad)


def test_compiled_layers_match_sim(config_build, tmp_path):
    cfg = config_build.cfg
    print(f"\n{cfg.tag}: layer seed {LAYER_SEED}")
    progs = list(_layers(cfg).items()) + list(directed_programs(cfg).items())
    results = runner.run_programs([p for _, p in progs], built=config_build, work_dir=tmp_path)
    bad = accelerator_mismatches(progs, results)
    assert not bad, "\n".join(bad)
    timing = sim.Timing.rtl_testbench()
    for (name, program), result in zip(progs, results, strict=True):
        model = sim.run_cycles(program, timing).total_cycles
        err = (model - result.cycles) / result.cycles
        print(f"{name}: RTL {result.cycles} cycles, model {model} ({100 * err:+.1f}%)")
