"""The fast RTL device (``driver.open("rtl")``): the Verilated accelerator in-process behind the
launch routine of ``isa.launch``, compared with ``sim.run`` bit for bit, with the cocotb testbench
(the same routine, asynchronously), and on the ways a launch can fail: a deadlock, the deadline,
a bad instruction."""

import time

import numpy as np
import pytest

from pyvta import driver, sim
from pyvta.driver import launch as host
from pyvta.driver.ops_rtl import RtlDevice
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, regmap
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.directed import directed_programs
from pyvta.sim.faults import faulting_programs
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatches, device_runs, fault_mismatches

pytestmark = pytest.mark.hw
COCOTB_SEED = 4


def _stuck_program():
    pb = ProgramBuilder()
    pb.emit(GemmInsn(pop_prev_dep=True))  # waits for an l2c token nobody pushes
    pb.emit(FinishInsn())
    return pb.build()


def test_directed_programs(rtl_device):
    progs = list(directed_programs().items())
    bad = accelerator_mismatches(progs, device_runs(rtl_device, [p for _, p in progs]))
    assert not bad, "\n".join(bad)


def test_random_programs(rtl_device, hw_fuzz):
    """The differential fuzz of test_rtl_vs_sim.py, on the fast device (one device, reused)."""
    count, first = hw_fuzz
    seeds = list(range(first, first + count))
    print(f"\n[hw] seeds {first}..{first + count - 1}")
    programs = [random_program(np.random.default_rng(s)) for s in seeds]
    t0 = time.monotonic()
    runs = device_runs(rtl_device, programs)
    cycles = sum(r.cycles or 0 for r in runs)
    print(f"[hw] {count} random programs, {cycles} cycles, {time.monotonic() - t0:.1f} s")
    named = [(f"seed {s}", p) for s, p in zip(seeds, programs, strict=True)]
    bad = accelerator_mismatches(named, runs)
    assert not bad, "\n".join(bad[:10])


def test_random_programs_with_overlap_bits(rtl_device):
    """Random programs with the overlap bit set where legal (isa.layout.OVERLAP_DOC): results
    are those of program order, as sim.run computes them."""
    seeds = range(5000, 5100)
    named = [(f"seed {s}", random_program(np.random.default_rng(s), overlap=True)) for s in seeds]
    flagged = sum(i.overlap for _, p in named for i in p.insns() if hasattr(i, "overlap"))
    print(f"\n[hw] seeds 5000..5099 with {flagged} overlap bits")
    assert flagged > 20
    bad = accelerator_mismatches(named, device_runs(rtl_device, [p for _, p in named]))
    assert not bad, "\n".join(bad[:10])


@pytest.mark.parametrize("name", ["matmul_tiled_xpad", "gemm_loops", "alu_ops", "dep_only"])
def test_stats_mean_what_the_simulators_mean(rtl_device, name):
    """Stats.from_registers (RTL) and Stats.from_cycle_report (simulator) count the same work."""
    program = directed_programs()[name]
    _, rtl = rtl_device.run_program(program)
    timing = sim.Timing.rtl_testbench()
    dev = driver.SimDevice(program.config, dram_bytes=program.dram.size, timing=timing)
    _, model = dev.run_program(program)
    a, b = rtl.stats, model.stats
    assert (a.insns_fetched, a.gemm_uops, a.alu_uops) == (b.insns_fetched, b.gemm_uops, b.alu_uops)
    assert a.insns_fetched == program.insn_count
    assert abs(a.cycles - b.cycles) <= 0.15 * a.cycles + 8, (a.cycles, b.cycles)
    assert set(a.busy_cycles) == set(b.busy_cycles) == {"load", "compute", "store"}


def test_same_launch_routine_on_cocotb_and_fast_device(rtl_device, vta_build):
    """``rtl:cocotb`` steps isa.launch through cocotbext-axi's AxiLiteMaster (async), the fast
    device through its C++ harness (sync): same DRAM, same counters of work, cycles within 1%."""
    progs = [directed_programs()[n] for n in ("matmul_small", "alu_ops", "dram_bursts")]
    progs += [random_program(np.random.default_rng(s)) for s in (7, 8)]
    with driver.open("rtl:cocotb", built=vta_build, dram_bytes=1 << 20) as cocotb_dev:
        for p in progs:
            fast_dram, fast = rtl_device.run_program(p)
            slow_dram, slow = cocotb_dev.run_program(p)
            assert np.array_equal(fast_dram, slow_dram)
            assert np.array_equal(fast_dram, sim.run(p).dram)
            f, s = fast.stats, slow.stats
            assert (f.insns_fetched, f.gemm_uops, f.alu_uops) == (
                s.insns_fetched,
                s.gemm_uops,
                s.alu_uops,
            )
            assert abs(f.cycles - s.cycles) <= 0.01 * s.cycles + 2, (f.cycles, s.cycles)


def test_id_registers_identify_the_hardware(rtl_device):
    assert rtl_device.port.read32(regmap.offset("ID")) == regmap.id_value()
    assert rtl_device.port.read32(regmap.offset("CONFIG_HASH")) == HwConfig().config_hash


def test_mismatched_config_is_refused(rtl_library):
    other = HwConfig(LOG_ACC_BUFF_SIZE=16)
    with pytest.raises(host.WrongHardware, match="another HwConfig"):
        RtlDevice(library=rtl_library, dram_bytes=1 << 16, expect_config=other)
    with pytest.raises(driver.DeviceError, match="-byte bus"):
        RtlDevice(HwConfig(LOG_BUS_WIDTH=7), library=rtl_library, dram_bytes=1 << 16)


def test_deadlock_gives_the_stuck_report_within_its_deadline(rtl_library):
    dev = RtlDevice(
        library=rtl_library, dram_bytes=1 << 20, watchdog_cycles=2000, max_cycles=50_000
    )
    stuck = _stuck_program()
    t0 = time.monotonic()
    with pytest.raises(host.DeviceStuck) as err:
        dev.run_program(stuck)
    outcome = err.value.outcome
    assert outcome.status == "deadlock" and outcome.waited_cycles <= 50_000
    # both queues compute pops are empty, so the report names both (the RTL says a unit is
    # stalled, not on which of its queues)
    assert outcome.stuck.waits() == {"compute": ("l2c", "s2c")}
    assert outcome.stuck.stalled == ("compute",) and outcome.stuck.tokens["l2c"] == 0
    assert "compute waits for a token on l2c (pushed by load) or s2c" in str(err.value)
    print(
        f"\n[hw] deadlock reported after {outcome.waited_cycles} cycles, {time.monotonic() - t0:.2f} s"
    )
    ok = directed_programs()["dep_only"]  # the device recovers for the next launch
    assert accelerator_mismatches([("after deadlock", ok)], device_runs(dev, [ok])) == []
    dev.close()


def test_bad_instructions_are_flagged_where_the_simulator_refuses_them(rtl_library):
    """An undecodable word, a flag without a queue, a padded STORE and LOAD / STORE rows past
    their buffer: fetch stops there, DONE comes with STATUS.ERROR (long before the watchdog)
    and the host raises the simulator's kind of error naming the same instruction; after the
    reset that follows, a good program runs."""
    dev = RtlDevice(library=rtl_library, dram_bytes=1 << 20, watchdog_cycles=20_000)
    programs = faulting_programs()
    runs = device_runs(dev, programs.values())
    bad = fault_mismatches(programs.items(), runs)
    assert not bad, "\n".join(bad)
    waited = [r.error.outcome.waited_cycles for r in runs]
    print(f"\n[hw] {len(runs)} faults flagged after {min(waited)}..{max(waited)} cycles")
    assert max(waited) < dev.watchdog_cycles
    ok = directed_programs()["matmul_small"]
    assert accelerator_mismatches([("after the faults", ok)], device_runs(dev, [ok])) == []
    dev.close()


def test_start_after_a_fault_or_deadlock_needs_no_reset(rtl_library):
    """What a board does (it cannot pulse reset): the launch routine alone, START after a fault
    or a deadlock. START returns the units and command queues to reset, so the work dispatched
    before the fault (units waiting for tokens that never come) does not leak into the next run."""
    dev = RtlDevice(library=rtl_library, dram_bytes=1 << 20, watchdog_cycles=2000)
    good = directed_programs()["matmul_small"]
    stopped = list(faulting_programs().values()) + [_stuck_program()]
    bad = []
    for i, program in enumerate(stopped):
        dev.write(0, program.dram)
        with pytest.raises((host.DeviceFault, host.DeviceStuck)):
            host.launch(dev.port, program.insn_addr, program.insn_count, watchdog_cycles=2000)
        bad += accelerator_mismatches([(f"after {i}", good)], device_runs(dev, [good]))
    assert not bad, "\n".join(bad)
    dev.close()


def test_cocotb_bench_flags_a_bad_instruction(vta_build):
    """The testbench (cocotbext-axi, the async launch routine, random AXI stalls) reads the
    same faults."""
    wanted = ("matmul_small@3:bad_opcode", "matmul_small@13:sram_past_end")
    programs = {n: p for n, p in faulting_programs().items() if n in wanted}
    with driver.open(
        "rtl:cocotb", built=vta_build, dram_bytes=1 << 20, backpressure=True, seed=COCOTB_SEED
    ) as dev:
        runs = device_runs(dev, programs.values())
    bad = fault_mismatches(programs.items(), runs)
    assert len(runs) == 2 and not bad, "\n".join(bad)


def test_hw_run_reports_a_bad_instruction_in_one_line(rtl_library, tmp_path, capsys):
    from pyvta.cli import main

    bundle = tmp_path / "bad.npz"
    faulting_programs()["matmul_small@3:bad_opcode"].save(bundle)
    assert main(["hw", "run", str(bundle), "--out", str(tmp_path / "r.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "error: instruction 3: not a valid instruction" in err, err
    assert not (tmp_path / "r.npz").exists()


def test_timeout_at_the_deadline(rtl_library):
    program = directed_programs()["matmul_tiled_xpad"]
    dev = RtlDevice(library=rtl_library, dram_bytes=1 << 20, max_cycles=300)
    with pytest.raises(host.DeviceStuck, match="timeout") as err:
        dev.run_program(program)
    assert err.value.outcome.waited_cycles == 300
    dev.max_cycles = 1_000_000
    assert accelerator_mismatches([("after timeout", program)], device_runs(dev, [program])) == []
    dev.close()


def _gemm_run_program(insns: int, uops: int):
    """``insns`` GEMM instructions of ``uops`` micro-ops each, back to back with no token between
    them (distinct rows: no hazard), then a STORE and FINISH."""
    from pyvta.isa import Load, MemType, Store, Uop

    rng = np.random.default_rng(11)
    pb = ProgramBuilder()
    cfg = pb.cfg
    inp = pb.put(rng.integers(-128, 128, (uops, cfg.batch, cfg.block_in), dtype=np.int8), "inp")
    wgt = pb.put(rng.integers(-128, 128, (1, cfg.block_out, cfg.block_in), dtype=np.int8), "wgt")
    pb.load_uops([Uop(dst=u, src=u, wgt=0) for u in range(uops)], sram_base=0)
    pb.emit(Load(MemType.INP, dram_base=inp, y_size=1, x_size=uops, x_stride=uops))
    pb.emit(Load(MemType.WGT, dram_base=wgt, y_size=1, x_size=1, x_stride=1, push_next_dep=True))
    for n in range(insns):
        pb.emit(
            GemmInsn(
                uop_bgn=0,
                uop_end=uops,
                iter_out=1,
                iter_in=1,
                dst_factor_out=uops,
                pop_prev_dep=n == 0,
                push_next_dep=n == insns - 1,
            )
        )
    out = pb.alloc(uops, "out")
    pb.emit(Store(dram_base=out, y_size=1, x_size=uops, x_stride=uops, pop_prev_dep=True))
    pb.emit(FinishInsn())
    return pb.build()


def test_gemm_instructions_follow_without_a_drain(rtl_device):
    """Each further GEMM instruction costs its micro-ops plus at most four cycles (sequencing and
    fetch): the next instruction's micro-ops enter the pipeline behind the previous one's. A drain
    per instruction would add the pipeline's depth (9 stages); the RTL before issue 19 took 12.1
    cycles per 4-micro-op instruction here."""
    uops = 4
    cycles = {}
    for insns in (8, 16):
        program = _gemm_run_program(insns, uops)
        bad = accelerator_mismatches([("gemm run", program)], device_runs(rtl_device, [program]))
        assert not bad, bad
        cycles[insns] = rtl_device.run_program(program)[1].cycles
    per_insn = (cycles[16] - cycles[8]) / 8
    assert per_insn <= uops + 4, cycles


def _generated_functions(rtl_library) -> dict[str, str]:
    """Verilator's generated C++ of the fast device's model: function name -> body."""
    import re

    bodies = {}
    for f in sorted(rtl_library.parent.glob("obj/Vvta___024root__[0-9].cpp")):
        pattern = r"^void (Vvta___024root___\w+)\(Vvta___024root\* vlSelf\) \{\n(.*?)^\}"
        bodies |= {m[1]: m[2] for m in re.finditer(pattern, f.read_text(), re.M | re.S)}
    return bodies


def test_datapath_is_not_input_combinational(rtl_library):
    """Issue 32: with START decoded combinationally from the AXI4-Lite write and ``rst`` a port,
    every register's next-state logic (the GEMM's products among them) depended on top-level
    inputs, so Verilator evaluated it in its input-combinational ("ico") region at each of the
    harness's two ``eval()`` calls a cycle (128 multiplies, 25,000 generated lines; 3x slower)."""
    bodies = _generated_functions(rtl_library)
    ico = [b for name, b in bodies.items() if "___ico_sequent" in name]
    nba = [b for name, b in bodies.items() if "___nba_sequent" in name]
    assert nba, f"no nba functions found in {rtl_library.parent / 'obj'}"
    lines = {k: sum(b.count("\n") for b in v) for k, v in (("ico", ico), ("nba", nba))}
    print(f"generated lines: {lines}")
    assert not any("VL_MULS" in b for b in ico), "a multiply is evaluated as input logic"
    assert lines["ico"] < lines["nba"] // 5, lines
