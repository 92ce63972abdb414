"""The shipped small config (bitstreams/configs/small.json: BLOCK 8, 64-bit bus) on the RTL:
directed and random programs under AXI back-pressure, compared with the simulator bit for bit.
(The 1x32 UltraScale+ config is not verilated here: 1024 multipliers build for too long.)"""

import time
from pathlib import Path

import numpy as np
import pytest

from pyvta import isa
from pyvta.hw import runner
from pyvta.sim.directed import directed_programs
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatches

pytestmark = [pytest.mark.hw, pytest.mark.slow]

CONFIG_DIR = Path(__file__).resolve().parents[2] / "bitstreams" / "configs"
SEED = 4000


def test_small_config_matches_sim(tmp_path_factory, tmp_path):
    cfg = isa.HwConfig.load(CONFIG_DIR / "small.json")
    t0 = time.monotonic()
    built = runner.build(cfg, "verilator", build_dir=tmp_path_factory.mktemp("rtl_small"))
    print(f"\n[hw] built {cfg.tag} in {time.monotonic() - t0:.1f} s; seeds {SEED}..{SEED + 29}")
    progs = list(directed_programs(cfg).items())
    progs += [
        (f"seed {s}", random_program(np.random.default_rng(s), cfg)) for s in range(SEED, SEED + 30)
    ]
    results = runner.run_programs(
        [p for _, p in progs], built=built, work_dir=tmp_path, backpressure=True, seed=13
    )
    bad = accelerator_mismatches(progs, results)
    assert not bad, "\n".join(bad)
