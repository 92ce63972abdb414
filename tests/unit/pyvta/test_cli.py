import numpy as np

from pyvta import sim
from pyvta.cli import main
from pyvta.sim.random_program import random_program


def test_demo_gemm_runs_and_checks(capsys):
    assert main(["demo", "gemm", "--m", "64", "--k", "32", "--n", "32"]) == 0
    out = capsys.readouterr().out
    assert "EXACT MATCH" in out
    assert "GEMM utilisation" in out


def test_sim_round_trip_and_disasm(tmp_path, capsys):
    program = random_program(np.random.default_rng(3))
    bundle, result, trace = tmp_path / "p.npz", tmp_path / "r.npz", tmp_path / "t.json"
    program.save(bundle)
    assert main(["sim", str(bundle), "--out", str(result), "--cycles", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "total cycles" in out and trace.exists()
    written = sim.Program.load(result)
    assert np.array_equal(written.dram, sim.run(program).dram)
    with np.load(result) as z:
        assert "counters" in z.files and "cycles" in z.files
    for engine in ("numpy", "native"):
        assert main(["sim", str(bundle), "--out", str(result), "--engine", engine]) == 0
        assert np.array_equal(sim.Program.load(result).dram, written.dram)
    capsys.readouterr()
    assert main(["disasm", str(bundle)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == program.insn_count + 1
    raw = tmp_path / "insns.bin"
    raw.write_bytes(program.insn_bytes().tobytes())
    assert main(["disasm", str(raw)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == lines[1:]


def test_errors_exit_2_with_message(tmp_path, capsys):
    bad = tmp_path / "bad.bin"
    bad.write_bytes((5).to_bytes(16, "little"))
    assert main(["disasm", str(bad)]) == 2
    assert "instruction 0: opcode 5 is not valid" in capsys.readouterr().err
    assert main(["sim", str(tmp_path / "missing.npz")]) == 2


def test_isa_command(capsys):
    assert main(["isa"]) == 0
    out = capsys.readouterr().out
    assert "config 1x16_i8w8a32_15_15_18_17" in out and "wgt_factor_in" in out


def test_conv_command_compiles_checks_and_traces(tmp_path, capsys):
    trace, bundle = tmp_path / "t.json", tmp_path / "c.npz"
    args = [
        "conv",
        "--shape",
        "10,10,20,24,3,1,1",
        "--disasm",
        "5",
        "--trace",
        str(trace),
        "--save",
        str(bundle),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "EXACT MATCH" in out and "GEMM" in out and trace.exists()
    assert main([*args, "--device", "pynq"]) == 2  # a trace is the simulator's (its option)
    assert "--trace is the simulator's cycle model; not with --device pynq" in (
        capsys.readouterr().err
    )
    program = sim.Program.load(bundle)
    assert sim.run(program).finish_index == program.insn_count - 1
    import json

    spans = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    loads = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e["cat"] == "load"]
    gemms = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e["name"] == "GEMM"]
    assert any(a < d and c < b for a, b in loads for c, d in gemms), "no load overlaps a GEMM"


def test_zoo_writes_a_model_compile_takes(tmp_path, capsys):
    """The README's path: pyvta zoo writes the ONNX file, pyvta compile / run take it."""
    import onnx

    onnx_path = str(tmp_path / "r.onnx")
    args = ["zoo", "resnet18", "-o", onnx_path, "--size", "32", "--classes", "10", "--width", "16"]
    assert main(args) == 0
    assert "input float32[1, 3, 32, 32], 10 classes" in capsys.readouterr().out
    model = onnx.load(onnx_path)
    onnx.checker.check_model(model)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 32, 32]
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [1, 10]
    assert main(["zoo"]) == 0
    assert set(capsys.readouterr().out.split()) >= {"resnet18", "resnet34", "mobilenet"}
    assert main(["zoo", "resnet99"]) == 2
    assert (
        "allowed: mobilenet, mobilenet_v2, regnetx400mf, regnetx4gf, regnetx600mf, resnet18,"
        " resnet34, resnext26, resnext50" in capsys.readouterr().err
    )
    assert main(["zoo", "resnet18", "--size", "16"]) == 2
    assert "--size 16 is too small" in capsys.readouterr().err


def test_isa_prints_a_config_that_loads_back(tmp_path, capsys):
    from pyvta.isa import HwConfig

    assert main(["isa", "--print-config"]) == 0
    path = tmp_path / "vta_config.json"
    path.write_text(capsys.readouterr().out)
    assert HwConfig.load(path) == HwConfig()
    edited = path.read_text().replace('"LOG_UOP_BUFF_SIZE": 15', '"LOG_UOP_BUFF_SIZE": 14')
    path.write_text(edited)
    assert main(["isa", "--config", str(path)]) == 0
    assert "config 1x16_i8w8a32_14_15_18_17" in capsys.readouterr().out


def test_compile_and_run_a_small_network(tmp_path, capsys):
    onnx_path = str(tmp_path / "r.onnx")
    args = ["zoo", "resnet18", "-o", onnx_path, "--size", "32", "--classes", "10", "--width", "16"]
    assert main(args) == 0
    artifact = tmp_path / "r.npz"
    assert main(["compile", onnx_path, "--target", "vta", "-o", str(artifact)]) == 0
    assert "on the accelerator" in capsys.readouterr().out
    assert main(["run", str(artifact), "--target", "vta", "--device", "sim", "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert "vta_conv2d" in out and "accelerator:" in out and "M cycles" in out
    assert main(["run", onnx_path, "--target", "cpu"]) == 0
    assert main(["run", str(artifact), "--target", "cpu"]) == 2  # compiled for vta, not cpu
    assert "was compiled for 'vta'" in capsys.readouterr().err


def test_partition_and_batch_flags(tmp_path, capsys):
    """--partition legacy keeps the stem, pools and classifier on the CPU (each with its reason);
    --batch 2 compiles two images per launch; a cpu target refuses both flags."""
    onnx_path = str(tmp_path / "r.onnx")
    args = ["zoo", "resnet18", "-o", onnx_path, "--size", "32", "--classes", "10", "--width", "16"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["run", onnx_path, "--partition", "legacy", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "float conv2d (kept float" in out and "19 launches" in out
    artifact = tmp_path / "r2.npz"
    assert main(["compile", onnx_path, "--batch", "2", "-o", str(artifact)]) == 0
    out = capsys.readouterr().out
    assert "host: quantize float -> int8" in out and "vta_conv2d" not in out  # (plan: CPU rows)
    assert main(["run", str(artifact), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "output [2, 10]" in out and "sample 1:" in out
    assert main(["run", onnx_path, "--target", "cpu", "--partition", "whole"]) == 2
    assert "--partition" in capsys.readouterr().err


def test_compile_with_per_channel_weight_scales(tmp_path, capsys):
    from pyvta.compiler.graph.zoo import save_model
    from pyvta.runtime.compiled_model import CompiledModel

    onnx_path = str(tmp_path / "r.onnx")
    save_model("resnet18", onnx_path, size=32, classes=10, width=16)
    artifact = tmp_path / "r.npz"
    args = ["compile", onnx_path, "--target", "vta-sim", "-o", str(artifact)]
    assert main([*args, "--weight-scales", "channel"]) == 0
    cm = CompiledModel.load(artifact)
    assert any(isinstance(n.attrs.get("shift"), list) for n in cm.graph.nodes)
    assert main(["run", str(artifact), "--target", "vta-sim"]) == 0
    assert main([*args, "--weight-scales", "bogus"]) == 2
    assert "allowed: tensor, channel, auto" in capsys.readouterr().err
    assert main(["compile", onnx_path, "--target", "cpu", "-o", str(artifact), "--weight-scales",
                 "auto"]) == 2  # fmt: skip
    assert "--weight-scales" in capsys.readouterr().err


def test_tune_a_network_then_run_with_its_log(tmp_path, capsys):
    from pyvta.compiler.graph.zoo import save_model

    onnx_path = str(tmp_path / "r.onnx")
    save_model("resnet18", onnx_path, size=32, classes=10, width=16)
    log, plot = tmp_path / "net.jsonl", tmp_path / "net.png"
    args = ["tune", onnx_path, "--trials", "6", "--batch", "6", "--log", str(log)]
    assert main([*args, "--plot", str(plot), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "distinct accelerator layers" in out and "one inference: default" in out
    assert plot.stat().st_size > 0 and log.stat().st_size > 0
    assert main(["run", onnx_path, "--tuning-log", str(log), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "tuned configs for" in out and "accelerator:" in out
    assert main(["run", onnx_path, "--tuning-log", str(tmp_path / "missing.jsonl")]) == 2
    assert "no tuning log" in capsys.readouterr().err


def test_compile_and_run_with_keep_float(tmp_path, capsys):
    """``--keep-float none``: every conv and dense int8 (no cpu_conv2d/cpu_dense left); a layer
    name keeps that layer float; unknown names, empty lists and float targets are refused."""
    from pyvta.compiler.graph.onnx_import import import_onnx
    from pyvta.compiler.graph.zoo import save_model
    from pyvta.runtime.compiled_model import CompiledModel

    onnx_path = str(tmp_path / "r.onnx")
    save_model("resnet18", onnx_path, size=32, classes=10, width=16)
    artifact = tmp_path / "r.npz"
    args = ["compile", onnx_path, "--target", "cpu-int8", "-o", str(artifact)]
    floats = ("cpu_conv2d", "cpu_dense")
    assert main([*args, "--keep-float", "none"]) == 0
    ops = [n.op for n in CompiledModel.load(artifact).graph.nodes]
    assert not set(floats) & set(ops) and "qdense" in ops
    assert main([*args, "--keep-float", "default"]) == 0
    ops = [n.op for n in CompiledModel.load(artifact).graph.nodes]
    assert ops.count("cpu_conv2d") == 1 and ops.count("cpu_dense") == 1
    third = [n.name for n in import_onnx(onnx_path).nodes if n.op == "conv2d"][2]
    assert main([*args, "--keep-float", third]) == 0
    cm = CompiledModel.load(artifact)
    assert [n.name for n in cm.graph.nodes if n.op in floats] == [third]
    capsys.readouterr()
    assert main(["run", onnx_path, "--target", "cpu-int8", "--keep-float", "none"]) == 0
    assert "output [1, 10]" in capsys.readouterr().out
    assert main([*args, "--keep-float", "nope"]) == 2
    assert "not a conv2d/dense" in capsys.readouterr().err
    assert main([*args, "--keep-float", ","]) == 2
    assert "allowed: default, classifier, none" in capsys.readouterr().err
    assert main(["compile", onnx_path, "--target", "cpu", "-o", str(artifact), "--keep-float",
                 "none"]) == 2  # fmt: skip
    assert "--keep-float applies to a quantized target" in capsys.readouterr().err
    assert main(["run", str(artifact), "--target", "cpu-int8", "--keep-float", "none"]) == 2
    assert "--keep-float applies to compiling" in capsys.readouterr().err
