"""The native engine is bit-exact with the numpy reference: DRAM, counters, order, tokens."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import HwConfig, Module
from pyvta.sim import functional, native
from pyvta.sim.directed import directed_programs
from pyvta.sim.random_program import random_program
from pyvta.sim.state import SramState

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the native engine needs llvmlite (not installed here)"
)

OTHER_CONFIGS = [
    HwConfig(LOG_BATCH=1, LOG_BLOCK=3, LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
    HwConfig(LOG_BATCH=2, LOG_BLOCK=4),
    HwConfig(LOG_BLOCK=5),
]


def assert_same(program: sim.Program, **kw) -> sim.SimResult:
    ref = sim.run(program, engine="numpy", **kw)
    got = sim.run(program, engine="native", **kw)
    assert np.array_equal(got.dram, ref.dram)
    assert got.counters.to_dict() == ref.counters.to_dict()
    assert (got.order, got.finish_index, got.leftover_tokens) == (
        ref.order,
        ref.finish_index,
        ref.leftover_tokens,
    )
    return got


@pytest.mark.parametrize("seed", range(120))
def test_random_programs_bit_exact(seed):
    print(f"seed {seed}")
    assert_same(random_program(np.random.default_rng(seed), n_insns=(4, 40)))


@pytest.mark.parametrize("cfg", OTHER_CONFIGS, ids=lambda c: c.tag)
@pytest.mark.parametrize("seed", range(15))
def test_random_programs_bit_exact_other_configs(cfg, seed):
    print(f"seed {seed}")
    assert_same(random_program(np.random.default_rng(1000 + seed), cfg, n_insns=(4, 30)))


@pytest.mark.parametrize("name, program", list(directed_programs().items()))
def test_directed_programs_bit_exact(name, program):
    assert_same(program)


def test_compiled_conv_layer_bit_exact():
    from pyvta.compiler.backend.vta import (
        ConvWorkload,
        Epilogue,
        VtaConv2d,
        pack_bias,
        pack_data,
        pack_weights,
    )
    from pyvta.driver import SimDevice

    rng = np.random.default_rng(5)
    print("seed 5")
    wl = ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1)
    w = rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)
    b = rng.integers(-20000, 20000, 64).astype(np.int32)
    x = rng.integers(-128, 128, (1, 64, 14, 14), dtype=np.int8)
    dev = SimDevice(dram_bytes=1 << 24, cycles=False)
    op = VtaConv2d(wl, Epilogue.requant(shift=9, relu=True), pack_weights(w), pack_bias(b), dev)
    dev.write(op.in_addr, pack_data(x))
    bundle = dev.snapshot(op.insn_addr, op.insn_count)
    assert bundle.dram.size == dev.dram.used_bytes < 1 << 24  # sized to what the layer uses
    assert assert_same(bundle).counters.macs >= wl.macs


def test_module_orders_and_interleavings_bit_exact():
    program = random_program(np.random.default_rng(3))
    insns = program.insns()
    for order in [tuple(Module), tuple(reversed(Module))]:
        for one in (False, True):
            ref = sim.run_insns(
                insns,
                program.dram.copy(),
                program.config,
                engine="numpy",
                module_order=order,
                one_per_turn=one,
            )
            got = sim.run_insns(
                insns,
                program.dram.copy(),
                program.config,
                engine="native",
                module_order=order,
                one_per_turn=one,
            )
            assert np.array_equal(got.dram, ref.dram) and got.order == ref.order


def test_state_carried_between_runs():
    """A second program reads the SRAM a first one left (weights included)."""
    cfg = HwConfig()
    first = random_program(np.random.default_rng(11))
    second = random_program(np.random.default_rng(12))
    results = {}
    for engine in ("numpy", "native"):
        st = SramState(cfg)
        a = sim.run_insns(first.insns(), first.dram.copy(), cfg, state=st, engine=engine)
        b = sim.run_insns(second.insns(), second.dram.copy(), cfg, state=st, engine=engine)
        results[engine] = (a.dram, b.dram, st.acc.copy(), st.wgt.copy())
    for ref, got in zip(results["numpy"], results["native"], strict=True):
        assert np.array_equal(ref, got)


def test_in_place_runs_on_the_bundle_itself():
    program = random_program(np.random.default_rng(4))
    before = program.dram.copy()
    copied = sim.run(program, engine="native")
    assert np.array_equal(program.dram, before) and copied.dram is not program.dram
    in_place = sim.run(program, engine="native", in_place=True)
    assert in_place.dram is program.dram
    assert np.array_equal(program.dram, copied.dram)


def test_without_llvmlite_auto_falls_back_to_numpy(monkeypatch):
    program = random_program(np.random.default_rng(6))
    expected = sim.run(program, engine="numpy").dram
    monkeypatch.setattr(native, "available", lambda: False)
    monkeypatch.setattr(native, "execute", lambda *a: pytest.fail("native engine used"))
    assert np.array_equal(sim.run(program).dram, expected)
    with pytest.raises(sim.SimError, match="engine='native' needs llvmlite"):
        sim.run(program, engine="native")


def _work(program: sim.Program) -> int:
    """The program's numpy work as engine="auto" counts it (functional.numpy_work)."""
    c = sim.run(program, engine="numpy").counters
    iters = c.gemm_uop_iters + c.gemm_reset_iters + c.alu_uop_iters
    return iters + functional.NUMPY_INSN_WORK * program.insn_count


def test_auto_compiles_nothing_for_a_lone_small_program(monkeypatch):
    monkeypatch.setattr(native, "kernels_ready", lambda cfg, cache_dir=None: False)
    monkeypatch.setattr(native, "execute", lambda *a: pytest.fail("native engine used"))
    monkeypatch.setattr(functional, "_numpy_work_so_far", {})
    program = random_program(np.random.default_rng(8))
    assert _work(program) < functional.NATIVE_COMPILE_WORK
    sim.run(program)
    assert functional._numpy_work_so_far == {program.config: _work(program)}


def test_cold_start_small_programs_switch_to_native(monkeypatch, tmp_path):
    """From an empty cache (nothing compiled in this process, no object code on disk), a
    sequence of small programs runs on numpy until their work adds up to NATIVE_COMPILE_WORK;
    that program compiles the kernels (into the cache root) and it and every later one run
    native, with the reference's results throughout."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_kernels", {})
    monkeypatch.setattr(functional, "_numpy_work_so_far", {})
    engines: list[str] = []
    real_numpy, real_native = functional._run_numpy, functional._run_native
    monkeypatch.setattr(
        functional, "_run_numpy", lambda *a: engines.append("numpy") or real_numpy(*a)
    )
    monkeypatch.setattr(
        functional, "_run_native", lambda *a: engines.append("native") or real_native(*a)
    )
    rng = np.random.default_rng(11)
    programs = [random_program(rng, n_insns=(20, 60)) for _ in range(8)]
    works = [_work(p) for p in programs]  # engine="numpy": not counted, not recorded
    expected = [sim.run(p, engine="numpy").dram for p in programs]
    engines.clear()
    total, switch = 0, None
    for i in range(10_000):
        total += works[i % len(programs)]
        if total >= functional.NATIVE_COMPILE_WORK:
            switch = i
            break
    assert 10 < switch < 1000, f"switch at run {switch}: pick programs of another size"
    for i in range(switch + 5):
        got = sim.run(programs[i % len(programs)])
        assert np.array_equal(got.dram, expected[i % len(programs)])
    assert engines == ["numpy"] * switch + ["native"] * 5
    assert len(list((tmp_path / "sim").glob("*.o"))) == 1


def test_bad_engine_and_races_need_numpy():
    program = random_program(np.random.default_rng(9))
    with pytest.raises(ValueError, match="unknown simulator engine 'fast'"):
        sim.run(program, engine="fast")
    with pytest.raises(ValueError, match="check_races needs the numpy engine"):
        sim.run(program, engine="native", check_races=True)
    sim.run(program, check_races=True)  # auto: numpy


def test_object_code_cached_on_disk(tmp_path):
    cfg = HwConfig(LOG_BLOCK=2, LOG_WGT_BUFF_SIZE=14, LOG_ACC_BUFF_SIZE=14, LOG_INP_BUFF_SIZE=12)
    first = native.Kernels(cfg, tmp_path)
    assert not first.from_disk and len(list(tmp_path.glob("*.o"))) == 1
    second = native.Kernels(cfg, tmp_path)
    assert second.from_disk
    program = random_program(np.random.default_rng(10), cfg)
    native._kernels[cfg] = second
    try:
        assert_same(program)
    finally:
        del native._kernels[cfg]


@pytest.mark.parametrize("level", ["avx2", "sse"])
def test_kernels_at_a_lower_feature_level(level, monkeypatch, tmp_path):
    """``PYVTA_CPU_FEATURES`` limits the native kernels too (``pyvta.host_cpu``): their cache
    key and code follow the level, and they stay bit-exact on random programs."""
    from pyvta import host_cpu

    try:
        host_cpu.host(level)
    except host_cpu.CpuFeatureError as exc:
        pytest.skip(f"needs a CPU that runs the {level} feature level: {exc}")
    cfg = HwConfig(LOG_BLOCK=2, LOG_WGT_BUFF_SIZE=14, LOG_ACC_BUFF_SIZE=14, LOG_INP_BUFF_SIZE=12)
    monkeypatch.delenv("PYVTA_CPU_FEATURES", raising=False)
    at_host = native.cache_key(cfg)
    monkeypatch.setenv("PYVTA_CPU_FEATURES", level)
    assert native.cache_key(cfg) != at_host or host_cpu.levels_met(host_cpu.host()[2])[0] == level
    assert "+avx512f" not in native._host()[2]
    monkeypatch.setitem(native._kernels, cfg, native.Kernels(cfg, tmp_path))
    for seed in range(8):
        print(f"seed {seed}")
        assert_same(random_program(np.random.default_rng(seed), cfg, n_insns=(4, 40)))


@pytest.mark.slow
def test_thousand_random_programs_bit_exact_over_configs():
    """~1 min: 1,000 random programs of up to 60 instructions over four configs."""
    configs = [HwConfig(), *OTHER_CONFIGS]
    for seed in range(1000):
        cfg = configs[seed % len(configs)]
        assert_same(random_program(np.random.default_rng(50_000 + seed), cfg, n_insns=(4, 60)))
