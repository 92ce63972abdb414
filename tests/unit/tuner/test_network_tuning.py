"""Tuning a whole network: the layers found without running the accelerator are the layers that
run; tuned configs are applied per layer and keep the result bit exact."""

import numpy as np
import pytest

from pyvta.compiler.backend.vta.config import ConvConfig
from pyvta.compiler.backend.vta.graph_backend import accelerator_for, kernel_workload
from pyvta.compiler.backend.vta.operator import kernel_epilogue
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver import SimDevice
from pyvta.runtime.compiled_model import run_model
from pyvta.tuner.log import read_records
from pyvta.tuner.network import best_cycles, network_configs, network_layers, tune_network

SEED = 7


@pytest.fixture(scope="module")
def small_net(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("net") / "r18.onnx")
    save_model("resnet18", path, size=32, classes=10, width=16, seed=SEED)
    return compile_model(path, "vta", lower=False)


def _input(cm):
    print(f"seed {SEED}")
    shape = cm.graph.values[cm.input_names[0]].shape
    return np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)


def test_collected_layers_are_the_layers_that_run(small_net):
    layers = network_layers(small_net)
    acc = accelerator_for(small_net.graph, SimDevice())
    run_model(small_net, _input(small_net), backends={"vta": acc})
    ran = {}
    for op in acc._ops.values():  # the conv/dense kernels (pools and the fused stem + pool
        layer_ep = kernel_epilogue(op.kernel, layer=True)  # have fixed ALU schedules: None)
        if layer_ep is not None:
            key = (kernel_workload(op.kernel), layer_ep)
            ran[key] = ran.get(key, 0) + 1
    assert {(la.workload, la.epilogue): la.count for la in layers} == ran
    assert sum(la.count for la in layers) == sum(1 for r in acc.runs if r.config)
    assert any(la.epilogue.residual for la in layers)


def test_tuned_configs_are_applied_and_exact(small_net, tmp_path):
    layers = network_layers(small_net)
    log = str(tmp_path / "net.jsonl")
    summary = tune_network(layers, 14, log=log, first=4, batch_size=8, progress=False, seed=SEED)
    assert len(summary.layers) == len(layers)
    assert summary.cycles("tuned") <= summary.cycles("default")  # the default is a trial
    assert len(read_records(log)) == 14 * len(layers)
    configs = network_configs(log, layers)
    assert len(configs) == len(layers)
    assert best_cycles(log, layers) == pytest.approx(summary.cycles("tuned"))

    x = _input(small_net)
    tuned = accelerator_for(small_net.graph, SimDevice(), configs=configs)
    (out,), _ = run_model(small_net, x, backends={"vta": tuned})
    (ref,), _ = run_model(small_net, x)  # the golden integer model on the CPU
    assert np.array_equal(out, ref)
    for op in tuned._ops.values():
        layer_ep = kernel_epilogue(op.kernel, layer=True)
        if layer_ep is not None:  # (the pools' fixed schedules are no tuned layers)
            config = ConvConfig.from_dict(op.kernel.info["config"])
            assert config == configs[(kernel_workload(op.kernel), layer_ep)]
    # the device runs cost what the tuner measured (same stream, other DRAM addresses)
    tuned_runs = sum(r.cycles for r in tuned.runs if r.config)
    assert tuned_runs == pytest.approx(summary.cycles("tuned"), rel=0.02)

    # resuming a finished run measures nothing new
    again = tune_network(layers, 14, log=log, resume=True, first=4, batch_size=8, progress=False)
    assert len(read_records(log)) == 14 * len(layers)
    assert again.cycles("tuned") == summary.cycles("tuned")
