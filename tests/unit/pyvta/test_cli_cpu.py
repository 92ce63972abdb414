"""pyvta compile / run / tune for the float CPU target."""

import re

import pytest

from pyvta.cli import main


@pytest.fixture
def small_model(tmp_path):
    from pyvta.compiler.graph.zoo import save_model

    path = str(tmp_path / "r.onnx")
    save_model("resnet18", path, size=32, classes=10, width=16)
    return path


def test_compile_for_cpu_then_run_the_artifact(small_model, tmp_path, capsys):
    artifact = str(tmp_path / "r.cpu.npz")
    assert main(["compile", small_model, "--target", "cpu", "-o", artifact]) == 0
    assert "0 on the accelerator" in capsys.readouterr().out
    # Which nodes are slowest is timing, not a contract: check the row limit with --top 3
    # and the compiled conv kernels in the whole table (--top 0).
    assert main(["run", artifact, "--target", "cpu", "--top", "3"]) == 0
    out = capsys.readouterr().out
    rows = out.split("share\n", 1)[1].split("device time", 1)[0].splitlines()
    assert len(rows) == 3 and "top-5 classes" in out
    assert main(["run", artifact, "--target", "cpu", "--top", "0", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count(" cpu_conv2d ") >= 20  # ResNet-18's 20 convs, none left to numpy
    # a CPU inference's time in ms (it read "0.00 s"); the table is the last inference's
    walls = re.findall(r"^inference (\d): (\d+\.\d\d) ms wall$", out, re.M)
    assert [int(k) for k, _ in walls] == [1, 2, 3] and all(float(ms) > 0 for _, ms in walls)
    assert re.search(r"^the table: inference 3; the first took [\d.]+ ms, the others", out, re.M)
    assert out.index("the table: inference 3") < out.index(" cpu_conv2d ")
    missing = str(tmp_path / "missing.jsonl")
    assert (
        main(["compile", small_model, "--target", "cpu", "--tuning-log", missing, "-o", artifact])
        == 2
    )
    assert "no tuning log" in capsys.readouterr().err


@pytest.mark.slow
def test_tune_cpu_layers_then_compile_with_the_log(small_model, tmp_path, capsys):
    log = str(tmp_path / "cpu.jsonl")
    args = ["tune", small_model, "--target", "cpu", "--trials", "2", "--log", log]
    assert main([*args, "--tuner", "random", "--final-check", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "distinct CPU conv layers" in out and "cpu.conv2d_nchwc" in out
    assert "re-rank them there with --in-network 3" in out  # bests alone may lose in the network
    artifact = str(tmp_path / "r.npz")
    assert (
        main(["compile", small_model, "--target", "cpu", "--tuning-log", log, "-o", artifact]) == 0
    )
    assert "tuned schedules for 11 of 11" in capsys.readouterr().out
    assert main(["run", artifact, "--target", "cpu", "--top", "3"]) == 0
