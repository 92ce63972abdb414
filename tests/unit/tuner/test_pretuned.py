"""The shipped tuned configs still fit the zoo's ResNet-18 and still reach the cycle target.

If the model generator, the quantizer or the VTA template changes, the layers' keys or costs
change and this test says so: re-tune with ``pyvta tune resnet18.onnx --trials 400 --log L`` and
ship ``tuner.log.write_best(L, ...)``."""

from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d
from pyvta.compiler.graph.zoo import save_model
from pyvta.isa import HwConfig
from pyvta.sim import cycles_of
from pyvta.tuner.network import network_configs, network_layers, pretuned_log

TARGET_CYCLES = 7.4e6  # issue 7: one ResNet-18 inference, accelerator side


def test_shipped_resnet18_log_covers_every_layer_and_meets_the_target(tmp_path):
    log = pretuned_log("resnet18_224")
    assert log is not None
    path = str(tmp_path / "resnet18.onnx")
    save_model("resnet18", path, size=224)
    # the shipped log tunes the 19 conv layers of the legacy partition (the whole network's
    # stem, pools and classifier are outside it: they lower with their own schedules)
    from pyvta.compiler.graph.compile import compile_model

    layers = network_layers(compile_model(path, "vta", lower=False, vta_partition="legacy"))
    configs = network_configs(str(log), layers)
    missing = [str(la.workload) for la in layers if (la.workload, la.epilogue) not in configs]
    assert not missing, f"no shipped config for {missing}"
    hw, total = HwConfig(), 0
    for la in layers:
        c = configs[(la.workload, la.epilogue)]
        low = lower_conv2d(la.workload, la.epilogue, c, hw, DramMap.disjoint(la.workload, hw))
        total += cycles_of(low.insns, hw).total_cycles * la.count
    print(f"ResNet-18 with the shipped configs: {total / 1e6:.3f} M cycles")
    assert total <= TARGET_CYCLES


def test_a_layer_whose_shift_moved_takes_the_logged_config_of_its_neighbour_shift():
    """A recalibration moves a layer's requantizing shift (the key of its tuning task); the
    config logged for the same workload and epilogue at another non-zero shift applies (the
    shift is an ALU immediate: same schedule, same cycles). Shift 0 (no SHR pass) does not."""
    import dataclasses

    from pyvta.compiler.backend.vta.graph_backend import Layer
    from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue

    log = str(pretuned_log("resnet18_224"))
    wl = ConvWorkload(56, 56, 64, 64, 3, 3, 1, 1, 16, pad_bottom=1, pad_right=1)
    ep = Epilogue(True, 9, 0, 127, bias_via_gemm=True)  # as logged (the first 3x3 layers)
    logged = network_configs(log, [Layer(wl, ep, 1)])
    assert len(logged) == 1, "the shipped log's 56x56 64->64 layer at shift 9 is gone"
    for shift in (13, 2):  # in no record of this workload without a residual
        moved = Layer(wl, dataclasses.replace(ep, shift=shift), 1)
        got = network_configs(log, [moved])
        assert got[(moved.workload, moved.epilogue)] == logged[(wl, ep)]
    unshifted = Layer(wl, dataclasses.replace(ep, shift=0), 1)
    assert network_configs(log, [unshifted]) == {}
