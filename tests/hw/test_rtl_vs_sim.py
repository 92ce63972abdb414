"""Differential tests: the same programs on the RTL (cocotb) and on ``sim.run``; DRAM must match
bit for bit after FINISH. Programs of one test share one simulator run (the DUT is reset and its
buffers cleared between programs)."""

import time

import numpy as np
import pytest

from pyvta import sim
from pyvta.hw import runner
from pyvta.sim.directed import directed_programs
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatch, accelerator_mismatches

pytestmark = pytest.mark.hw


@pytest.fixture(scope="module")
def directed_results(vta_build, tmp_path_factory):
    progs = directed_programs()
    results = runner.run_programs(
        progs.values(), built=vta_build, work_dir=tmp_path_factory.mktemp("directed")
    )
    return {name: (progs[name], r) for name, r in zip(progs, results, strict=True)}


@pytest.mark.parametrize("name", list(directed_programs()))
def test_directed(directed_results, name):
    program, result = directed_results[name]
    assert accelerator_mismatch(name, program, result) is None
    assert result.cycles > 0


@pytest.mark.parametrize("name", ["matmul_tiled_xpad", "gemm_loops", "alu_ops", "dep_only"])
def test_counters_match_sim(directed_results, name):
    """The AXI4-Lite counters agree with the simulator's work counters."""
    program, result = directed_results[name]
    ref = sim.run(program).counters
    assert result.counters["FETCHED"] == program.insn_count
    assert result.counters["GEMM_UOPS"] == ref.gemm_uop_iters + ref.gemm_reset_iters
    assert result.counters["ALU_UOPS"] == ref.alu_uop_iters
    assert result.counters["CYCLES"] == result.cycles


def test_random_programs(vta_build, hw_fuzz, tmp_path):
    count, first = hw_fuzz
    seeds = list(range(first, first + count))
    programs = [random_program(np.random.default_rng(s)) for s in seeds]
    t0 = time.monotonic()
    results = runner.run_programs(programs, built=vta_build, work_dir=tmp_path)
    cycles = sum(r.cycles for r in results)
    print(f"\n[hw] {count} random programs, {cycles} cycles, {time.monotonic() - t0:.1f} s")
    named = [(f"seed {s}", p) for s, p in zip(seeds, programs, strict=True)]
    bad = accelerator_mismatches(named, results)
    assert not bad, "\n".join(bad[:10])


def test_backpressure_and_latency(vta_build, tmp_path):
    """Random pauses on every AXI channel of the DRAM model (seeded): results must not change."""
    progs = list(directed_programs().items())[:6]
    progs += [(f"seed {s}", random_program(np.random.default_rng(s))) for s in range(1000, 1040)]
    results = runner.run_programs(
        [p for _, p in progs], built=vta_build, work_dir=tmp_path, backpressure=True, seed=5
    )
    bad = accelerator_mismatches(progs, results)
    assert not bad, "\n".join(bad[:10])


def test_watchdog_reports_deadlock(vta_build, tmp_path):
    """A program whose compute pops a token nobody pushes: the watchdog names the stuck queue,
    and the next program of the same run still works (reset recovers the DUT)."""
    from pyvta.isa import FinishInsn, GemmInsn
    from pyvta.sim.builder import ProgramBuilder
    from pyvta.sim.directed import dep_only_program

    pb = ProgramBuilder()
    pb.emit(GemmInsn(pop_prev_dep=True))  # waits for l2c forever
    pb.emit(FinishInsn())
    stuck = pb.build()
    ok = dep_only_program()
    results = runner.run_programs(
        [stuck, ok], built=vta_build, work_dir=tmp_path, watchdog_cycles=2000
    )
    assert results[0].status == "deadlock"
    assert "compute" in results[0].message and "'l2c': 0" in results[0].message
    assert results[1].status == "done"
    assert accelerator_mismatch("after deadlock", ok, results[1]) is None


def test_run_program_api(vta_build, tmp_path):
    """``hw.run_program``: the entry point the CLI uses, returning (final DRAM, cycles)."""
    program = directed_programs()["matmul_small"]
    dram, cycles = runner.run_program(program, built=vta_build, work_dir=tmp_path)
    assert np.array_equal(dram, sim.run(program).dram)
    assert cycles > 0
    with pytest.raises(RuntimeError, match="deadlock"):
        from pyvta.isa import FinishInsn, GemmInsn
        from pyvta.sim.builder import ProgramBuilder

        pb = ProgramBuilder()
        pb.emit(GemmInsn(pop_next_dep=True))
        pb.emit(FinishInsn())
        runner.run_program(pb.build(), built=vta_build, work_dir=tmp_path, watchdog_cycles=1000)
