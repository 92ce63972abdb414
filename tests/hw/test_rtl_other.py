"""The RTL on a second simulator (Icarus) and with a second config (block 8, 128-bit AXI: narrow
INP/OUT/ACC_8BIT transfers with write strobes; its bad instructions flagged where the simulator
refuses them). Each builds one more design (~40-50 s): marked slow."""

import time

import numpy as np
import pytest

from pyvta import driver, isa
from pyvta.hw import runner
from pyvta.sim.directed import directed_programs
from pyvta.sim.faults import faulting_programs
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatches, device_runs, fault_mismatches

pytestmark = [pytest.mark.hw, pytest.mark.slow]

WIDE_BUS = isa.HwConfig(
    LOG_BLOCK=3,
    LOG_BUS_WIDTH=7,
    LOG_UOP_BUFF_SIZE=12,
    LOG_INP_BUFF_SIZE=12,
    LOG_WGT_BUFF_SIZE=14,
    LOG_ACC_BUFF_SIZE=13,
)


def _build(cfg, simulator, tmp_path_factory):
    t0 = time.monotonic()
    built = runner.build(cfg, simulator, build_dir=tmp_path_factory.mktemp(f"rtl_{simulator}"))
    print(f"\n[hw] built {simulator} {cfg.tag} in {time.monotonic() - t0:.1f} s")
    return built


@pytest.mark.slow
def test_icarus_matches_sim(tmp_path_factory, tmp_path):
    built = _build(isa.DEFAULT_CONFIG, "icarus", tmp_path_factory)
    directed = directed_programs()
    progs = [
        (n, directed[n]) for n in ("matmul_small", "gemm_loops", "alu_ops", "pad_acc8_2_1_1_3")
    ]
    progs += [(f"seed {s}", random_program(np.random.default_rng(s))) for s in range(2000, 2010)]
    results = runner.run_programs([p for _, p in progs], built=built, work_dir=tmp_path)
    bad = accelerator_mismatches(progs, results)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_wide_bus_config_matches_sim(tmp_path_factory, tmp_path):
    built = _build(WIDE_BUS, "verilator", tmp_path_factory)
    progs = [
        (f"seed {s}", random_program(np.random.default_rng(s), WIDE_BUS)) for s in range(3000, 3040)
    ]
    results = runner.run_programs(
        [p for _, p in progs], built=built, work_dir=tmp_path, backpressure=True, seed=11
    )
    bad = accelerator_mismatches(progs, results)
    assert not bad, "\n".join(bad)
    faulting = faulting_programs(WIDE_BUS)  # the checker with this config's buffer depths
    with driver.open(
        "rtl:cocotb", config=WIDE_BUS, built=built, dram_bytes=1 << 20, backpressure=True, seed=12
    ) as dev:
        runs = device_runs(dev, faulting.values())
    bad = fault_mismatches(faulting.items(), runs)
    assert not bad, "\n".join(bad)
