"""One vocabulary for every command: ``--target`` (a ``compiler.targets`` name) and ``--device``
(a ``driver.open`` name, or the GPU's); old spellings map with one notice line naming the new."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.cli import main
from pyvta.commands.common import CommandError
from pyvta.commands.vocabulary import OLD_TARGETS, resolve
from pyvta.compiler.targets import Target, TargetError, get_target, target_names

SEED = 5


def test_every_target_is_found_by_its_name_and_others_are_refused():
    assert target_names() == ("cpu", "cpu-int8", "gpu", "vta")
    for name in target_names():
        t = get_target(name)
        assert isinstance(t, Target) and t.name == name and get_target(t) is t
    for bad in ("tpu", "vta-sim", "cpu_int8", "", 5, "cpu/../vta", "llvm"):
        with pytest.raises(TargetError, match="allowed: cpu, cpu-int8, gpu, vta"):
            get_target(bad)


def test_targets_answer_what_the_layers_asked_by_name():
    cpu, int8, gpu, vta = (get_target(n) for n in ("cpu", "cpu-int8", "gpu", "vta"))
    assert [t.quantized for t in (cpu, int8, gpu, vta)] == [False, True, False, True]
    assert [t.placement for t in (cpu, int8, gpu, vta)] == ["cpu", "cpu", "gpu", "vta"]
    assert [t.accelerator for t in (cpu, int8, gpu, vta)] == [False, False, False, True]
    assert vta.pipeline_options([{"x": np.zeros(1)}]).use_vta
    assert not int8.pipeline_options([{"x": np.zeros(1)}]).use_vta
    assert cpu.pipeline_options().cpu_kernels and gpu.pipeline_options().gpu
    with pytest.raises(TargetError, match="needs calibration samples"):
        vta.pipeline_options(None)
    from pyvta.runtime.ir import Node

    dw = Node("qconv2d", "c", ["x"], ["y"], {"group": 4, "dilations": [1, 1]})
    assert vta.supports(dw) is None  # (block-diagonal GEMMs; legacy keeps today's split)
    assert "grouped conv" in vta.supports(dw, None, "legacy")
    assert vta.supports(Node("qdense", "d", ["x"], ["y"])) is None
    assert "softmax: no accelerator" in vta.supports(Node("softmax", "s", ["x"], ["y"]))


@pytest.mark.parametrize("old", [*OLD_TARGETS, "vta-rtl:icarus", "vta-tcp://h:1"])
def test_an_old_spelling_maps_with_one_notice_naming_the_new(old):
    said = []
    spec, device = resolve(old, None, say=said.append)
    new = f"--target {spec.name}" + (f" --device {device}" if device else "")
    print(old, "->", new)
    assert len(said) == 1 and f"--target {old} is the old spelling of {new}" in said[0]
    assert resolve(spec.name, device, say=said.append) == (spec, device) and len(said) == 1


def test_the_new_spelling_and_its_default_devices():
    said = []
    assert resolve(None, None, say=said.append) == (get_target("vta"), "sim")
    assert resolve("gpu", None, say=said.append) == (get_target("gpu"), "cuda")
    assert resolve("cpu", None, say=said.append) == (get_target("cpu"), None)
    assert resolve("vta", "tcp://h:1", say=said.append) == (get_target("vta"), "tcp://h:1")
    assert resolve("vta-sim", None, say=said.append, run=False) == (get_target("vta"), None)
    assert said == [
        "--target vta-sim is the old spelling of --target vta (accepted for one release)"
    ]


@pytest.mark.parametrize(
    "target, device, named",
    [
        ("tpu", None, "unknown target 'tpu' (allowed: cpu, cpu-int8, gpu, vta; old spellings"),
        ("vta-nowhere", None, "device 'nowhere' does not run the vta target"),
        ("cpu", "sim", "the cpu target runs on the host CPU"),
        ("gpu", "sim", "device 'sim' does not run the gpu target (allowed: cuda, cuda-emulated)"),
        ("vta", "cuda", "device 'cuda' does not run the vta target"),
        ("vta-sim", "rtl", "give --target vta --device rtl"),
    ],
)
def test_a_target_and_device_that_do_not_go_together_are_refused(target, device, named):
    with pytest.raises(CommandError, match=named.replace("(", r"\(").replace(")", r"\)")):
        resolve(target, device, say=lambda _: None)
    if device is None:  # compiling checks an old spelling's device too, though it runs nothing
        with pytest.raises(CommandError, match=named.replace("(", r"\(").replace(")", r"\)")):
            resolve(target, device, say=lambda _: None, run=False)


def test_run_with_the_old_spelling_gives_the_same_output_and_one_notice(tmp_path, capsys):
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.zoo import save_model

    print(f"seed {SEED}")
    save_model("resnet18", str(tmp_path / "r.onnx"), size=32, classes=10, width=16, seed=SEED)
    art = compile_model(tmp_path / "r.onnx", "vta").save(tmp_path / "r.npz")
    outs = []
    for spelling in (["--target", "vta-sim"], ["--target", "vta", "--device", "sim"], []):
        y = tmp_path / f"{len(outs)}.npy"
        assert main(["run", str(art), *spelling, "--save-output", str(y)]) == 0
        err = [line for line in capsys.readouterr().err.splitlines() if line]
        assert err == (
            ["notice: --target vta-sim is the old spelling of --target vta --device sim"
             " (accepted for one release)"] if "vta-sim" in spelling else []
        )  # fmt: skip
        outs.append(np.load(y))
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    assert main(["run", str(art), "--target", "cpu", "--device", "sim"]) == 2
    assert "the cpu target runs on the host CPU" in capsys.readouterr().err
    # a device flag the device's driver.open does not take (driver.device_options)
    bit = ["--bitstream", str(tmp_path)]
    assert main(["run", str(art), "--target", "vta", "--device", "sim", *bit]) == 2
    assert "--bitstream applies to --device pynq, not --target vta --device sim" in (
        capsys.readouterr().err
    )
    assert main(["serve", "--device", "tcp://127.0.0.1:9"]) == 2
    assert "serve a local device (sim, rtl, pynq), not another server" in capsys.readouterr().err


def test_tune_old_spellings_give_a_notice(capsys):
    argv = ["tune", "gemm:8,8,8", "--trials", "2", "--batch", "2", "--no-progress"]
    assert main([*argv, "--target", "llvm", "--final-check", "0"]) == 0
    err = capsys.readouterr().err
    assert "--target llvm is the old spelling of --target cpu" in err
    assert main([*argv, "--target", "gpu", "--device", "rtl"]) == 2
    assert "device 'rtl' does not run the gpu target" in capsys.readouterr().err
    assert main([*argv, "--target", "cpu-int8"]) == 2
    assert "--target cpu-int8 has no operators to tune" in capsys.readouterr().err


def test_sim_runs_a_bundle_on_a_device_like_the_simulator(tmp_path, capsys):
    from pyvta.sim.directed import directed_programs

    program = directed_programs()["alu_chain"]  # it stores: its final image differs
    assert not np.array_equal(sim.run(program).dram, program.dram)
    bundle, a, b = tmp_path / "p.npz", tmp_path / "a.npz", tmp_path / "b.npz"
    program.save(bundle)
    assert main(["sim", str(bundle), "--out", str(a)]) == 0
    assert main(["sim", str(bundle), "--device", "sim", "--out", str(b)]) == 0
    assert "sim: " in capsys.readouterr().out
    assert np.array_equal(sim.Program.load(a).dram, sim.Program.load(b).dram)
    assert np.array_equal(sim.Program.load(b).dram, sim.run(program).dram)
    assert main(["sim", str(bundle), "--device", "sim", "--cycles"]) == 2
    assert "--cycles apply to the simulator run" in capsys.readouterr().err
    assert main(["sim", str(bundle), "--device", "nowhere"]) == 2
    assert "unknown device 'nowhere'" in capsys.readouterr().err


def test_every_network_command_defaults_to_one_target():
    """``pyvta compile``, ``pyvta run`` and ``pyvta tune MODEL`` without ``--target`` compile
    for the one default, ``compiler.targets.NETWORK_DEFAULT``; an operator workload keeps
    its own (``gemm:...`` the CPU)."""
    import argparse

    from pyvta.commands import compile_model
    from pyvta.compiler.targets import NETWORK_DEFAULT
    from pyvta.tuner.cli_support import resolve_target

    p = argparse.ArgumentParser()
    compile_model.add_arguments(p)
    assert p.parse_args(["m.onnx", "-o", "m.npz"]).target == NETWORK_DEFAULT
    assert resolve(None, None, say=lambda _: None)[0] is get_target(NETWORK_DEFAULT)
    tune = argparse.Namespace(target=None, device=None, workload="m.onnx")
    assert resolve_target(tune, network=True)[0] is get_target(NETWORK_DEFAULT)
    tune = argparse.Namespace(target=None, device=None, workload="gemm:64,64,64")
    assert resolve_target(tune, network=False)[0] is get_target("cpu")
