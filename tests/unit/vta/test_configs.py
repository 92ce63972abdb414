"""The shipped hardware configs (bitstreams/configs/*.json) through the stack on the simulator:
the simulator's programs, compiled ResNet-18 layers bit-exact against the numpy reference, and a
small ResNet-18 compiled with ``compile_model(..., hw=cfg)`` bit-exact against its CPU int8 twin."""

from pathlib import Path

import numpy as np
import pytest

from pyvta import isa, sim
from pyvta.compiler.backend.vta import (
    Epilogue,
    VtaConv2d,
    pack_bias,
    pack_data,
    pack_weights,
    unpack_data,
)
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.compiler.backend.vta.workload import resnet18_workload
from pyvta.driver import SimDevice
from pyvta.sim.directed import directed_programs
from pyvta.sim.programs import matmul_program
from pyvta.sim.random_program import random_program
from pyvta.testing.naive import execute

CONFIG_DIR = Path(__file__).resolve().parents[3] / "bitstreams" / "configs"
CONFIG_NAMES = ("pynq", "small", "ultrascale")
SEED = 20261201


def load(name: str) -> isa.HwConfig:
    return isa.HwConfig.load(CONFIG_DIR / f"{name}.json")


@pytest.fixture(params=CONFIG_NAMES)
def cfg(request) -> isa.HwConfig:
    return load(request.param)


def test_shipped_configs():
    assert load("pynq") == isa.DEFAULT_CONFIG
    small, large = load("small"), load("ultrascale")
    assert (small.block_in, small.bus_width_bits) == (8, 64)
    assert (large.block_in, large.bus_width_bits) == (32, 128)
    assert sorted(p.stem for p in CONFIG_DIR.glob("*.json")) == sorted(CONFIG_NAMES)


def test_simulator_programs(cfg):
    print(f"config {cfg.tag}, seed {SEED}")
    # matmul programs against numpy (their own expected values), the rest against the naive
    # sequential executor
    for name, program in directed_programs(cfg).items():
        if name.startswith("matmul"):
            continue
        result = sim.run(program)
        assert result.leftover_tokens == {}, name
        assert np.array_equal(result.dram, execute(program.insns(), program.dram, cfg)), name
    rng = np.random.default_rng(SEED)
    a = rng.integers(-128, 128, (40, 6 * cfg.block_in), dtype=np.int8)
    b = rng.integers(-128, 128, (8 * cfg.block_in, 3 * cfg.block_out), dtype=np.int8)
    ex = matmul_program(a, b, cfg, x_pad_blocks=(1, 1), tile_rows=16)
    assert np.array_equal(ex.readback(sim.run(ex.program).dram), ex.expected)
    for seed in range(SEED, SEED + 8):
        program = random_program(np.random.default_rng(seed), cfg, n_insns=(4, 25))
        assert np.array_equal(sim.run(program).dram, execute(program.insns(), program.dram, cfg))


@pytest.mark.parametrize("layer", ["C5", "C9", "C12"])
@pytest.mark.parametrize("name", ["small", "ultrascale"])  # pynq: every layer in test_conv2d
def test_compiled_resnet18_layers(name, layer):
    cfg = load(name)
    rng = np.random.default_rng(SEED)
    print(f"config {cfg.tag}, layer {layer}, seed {SEED}")
    wl, ep = resnet18_workload(layer, cfg.block_in), Epilogue.requant(shift=9, relu=True)
    x = rng.integers(-128, 128, (1, wl.in_channels, wl.height, wl.width), dtype=np.int8)
    w = rng.integers(-128, 128, (wl.out_channels, wl.in_channels, 3, 3), dtype=np.int8)
    w = w[:, :, : wl.kernel_h, : wl.kernel_w]
    b = rng.integers(-20000, 20000, wl.out_channels).astype(np.int32)
    block = cfg.block_in
    op = VtaConv2d(wl, ep, pack_weights(w, block), pack_bias(b, block), SimDevice(config=cfg))
    run = op(pack_data(x, block))
    expected = reference_conv(x, w, b, ep, wl, None)
    assert np.array_equal(unpack_data(run.output, wl.out_channels), expected)
    print(f"{layer} on {cfg.tag}: {run.cycles} cycles ({op.config.to_dict()})")


def test_small_resnet18_bit_exact_with_the_config_block(cfg, tmp_path):
    import onnx

    from pyvta.compiler.graph import zoo
    from pyvta.compiler.graph.compile import compile_model, lower_kernels
    from pyvta.runtime.compiled_model import run_model

    path = tmp_path / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=32, classes=10, seed=3), path)
    cal = [{"input": x} for x in zoo.sample_inputs(4, 32, seed=5)]
    on_cpu = compile_model(path, "cpu-int8", cal)
    on_vta = compile_model(path, "vta", cal, hw=cfg, vta_partition="legacy")
    packs = [n for n in on_vta.graph.nodes if n.op == "pack_nchw"]
    assert packs and all(n.attrs["block"] == cfg.block_in for n in packs)
    # compiled without lowering, the model keeps its config: a later lower_kernels() uses it
    late = compile_model(path, "vta", cal, hw=cfg, lower=False, vta_partition="legacy")
    late = lower_kernels(late)
    assert late.hw == cfg and late.kernels.keys() == on_vta.kernels.keys()
    x = zoo.sample_inputs(1, 32, seed=11)[0]
    (want,), _ = run_model(on_cpu, x)
    (got,), table = run_model(on_vta, x, device=SimDevice(config=cfg))
    np.testing.assert_array_equal(got, want)
    cycles = sum(r.cycles or 0 for r in table.rows)
    print(f"ResNet-18 (32x32, width 32) on {cfg.tag}: {cycles} accelerator cycles")
    # the whole network (stem, pools, classifier too) on this config: the golden model's bits
    whole = compile_model(path, "vta", cal, hw=cfg)
    assert {n.op for n in whole.graph.nodes if n.target == "vta"} >= {
        "vta_global_avg_pool",
        "vta_dense",
    }
    (got,), _ = run_model(whole, x, device=SimDevice(config=cfg))
    (want,), _ = run_model(whole, x)
    np.testing.assert_array_equal(got, want)
