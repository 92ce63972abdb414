"""Outputs never replace inputs and never go missing: an output equal to an input (after the
suffix is added and symlinks are resolved), a directory, a missing folder or a wrong suffix is
refused before any work runs; results are written atomically; the CLI prints a PyvtaError as one
line (exit 2), an unexpected exception as a short note (exit 3), tracebacks with --debug."""

import os
from pathlib import Path

import numpy as np
import pytest

from pyvta.cache import atomic_output
from pyvta.cli import main
from pyvta.commands.common import CommandError, output_path
from pyvta.sim.random_program import random_program

SEED = 3


@pytest.fixture
def bundle(tmp_path):
    print(f"seed {SEED}")
    path = tmp_path / "B.npz"
    random_program(np.random.default_rng(SEED)).save(path)
    return path


def _refused(argv, capsys, match):
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # refused while parsing (argparse)
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--out", "B.npz"], "would destroy the input"),
        (["--out", "B"], "would destroy the input"),  # numpy would add .npz
        (["--out", "L.npz"], "would destroy the input"),  # a symlink to the input
        (["--out", "H.npz"], "would destroy the input"),  # a hard link to the input
        (["--trace", "B.npz"], "must end in .json"),
        (["--out", "D/"], "is a directory"),
        (["--out", "D/.npz"], "is a directory"),
        (["--out", "D"], "is a directory"),
        (["--out", "r.bin"], "must end in .npz"),
        (["--out", "nowhere/r.npz"], "does not exist"),
        (["--out", "r.npz", "--trace", "r.npz"], "must end in .json"),
    ],
)
def test_sim_outputs_that_would_lose_data_are_refused(tmp_path, bundle, capsys, flags, match):
    (tmp_path / "D").mkdir()
    (tmp_path / "L.npz").symlink_to(bundle)
    os.link(bundle, tmp_path / "H.npz")
    before = bundle.read_bytes()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        _refused(["sim", "B.npz", *flags], capsys, match)
    finally:
        os.chdir(cwd)
    assert bundle.read_bytes() == before
    assert not (tmp_path / "D" / ".npz").exists()


def test_sim_out_without_suffix_prints_the_file_it_writes(tmp_path, bundle, capsys):
    assert main(["sim", str(bundle), "--out", str(tmp_path / "res")]) == 0
    assert f"written to {tmp_path / 'res.npz'}" in capsys.readouterr().out
    assert (tmp_path / "res.npz").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_folder_is_refused_before_the_run(tmp_path, bundle, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _refused(["sim", bundle, "--out", ro / "r.npz"], capsys, "cannot write")
    finally:
        ro.chmod(0o700)


def test_output_path_checks(tmp_path):
    src = tmp_path / "in.npz"
    src.write_bytes(b"x")
    assert output_path(tmp_path / "o", ".npz") == tmp_path / "o.npz"
    with pytest.raises(CommandError, match="would destroy the input"):
        output_path(tmp_path / "in", ".npz", inputs=(src,))
    with pytest.raises(CommandError, match="not a regular file"):
        output_path("/dev/null")
    with pytest.raises(CommandError, match="is a directory"):
        output_path("")


def test_atomic_output_keeps_the_old_file_when_writing_fails(tmp_path):
    dst = tmp_path / "r.npz"
    dst.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(dst) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed mid-write")
    assert dst.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.npz"]
    with atomic_output(dst) as tmp:
        np.savez(tmp, a=np.arange(3))
    with np.load(dst) as z:
        assert z["a"].tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["zoo", "resnet18", "-o", "D"], "is a directory"),
        (["zoo", "resnet18", "-o", "m.txt"], "must end in .onnx"),
        (["zoo", "nope"], "no model 'nope'"),
        (["conv", "--save", "D/", "--shape", "8,8,16,16,3,1,1"], "is a directory"),
        (["conv", "--trace", "D", "--shape", "8,8,16,16,3,1,1"], "is a directory"),
        (["conv", "--shape", "1,2"], "--shape wants 7 integers"),
        (["conv", "--tile", "x", "--shape", "8,8,16,16,3,1,1"], "--tile wants 4 integers"),
        (["hw", "run", "B.npz", "--out", "B"], "would destroy the input"),
        (["hw", "verilog", "-o", "D"], "is a directory"),
        (["tune", "gemm:64,64,64", "--plot", "D"], "is a directory"),
        (["demo", "gemm", "--save", "D"], "is a directory"),
        (["demo", "gemm", "--trace", "B.npz"], "must end in .json"),
        (["demo", "gemm", "--m", "0"], "--m 0: a matrix dimension must be >= 1"),
        (["conv", "--search", "-1"], "argument --search: invalid int (a finite number >= 0)"),
        (["conv", "--disasm", "-2"], "argument --disasm: invalid count (>= 0, or -1 for all)"),
        (["isa", "--config", "B.npz"], "not a JSON config (not UTF-8 text)"),
        (["isa", "--config", "D"], "is a directory, not a JSON config"),
    ],
)
def test_other_commands_refuse_bad_outputs_before_work(tmp_path, bundle, capsys, argv, match):
    (tmp_path / "D").mkdir()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        _refused(argv, capsys, match)
    finally:
        os.chdir(cwd)


def test_disasm_config_that_differs_from_the_bundle_is_refused(tmp_path, bundle, capsys):
    import json

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"LOG_BLOCK": 5}))
    _refused(["disasm", bundle, "--config", cfg], capsys, "differs from the config")


def test_unexpected_exception_is_short_and_says_where_to_report(monkeypatch, capsys):
    from pyvta.commands import isa_info

    def boom(args):
        raise KeyError("internal")

    monkeypatch.setattr(isa_info, "run", boom)
    assert main(["isa"]) == 3
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "report it" in err and "--debug" in err
    assert "Traceback" not in err
    assert main(["--debug", "isa"]) == 3
    assert "Traceback" in capsys.readouterr().err
    assert main(["isa", "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_pyvta_error_is_one_line_and_debug_shows_the_traceback(tmp_path, capsys):
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"not a zip")
    err = _refused(["sim", bad], capsys, "not a readable program bundle")
    assert len(err.strip().splitlines()) == 1
    assert main(["sim", str(bad), "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_bundle_and_artifact_are_not_mistaken_for_each_other(tmp_path, bundle, capsys):
    _refused(["run", bundle], capsys, "is a program bundle (a DRAM image")
    artifact = tmp_path / "a.npz"
    np.savez(artifact, __graph__=np.array("{}"))
    _refused(["sim", artifact], capsys, "looks like a compiled model")
    junk = tmp_path / "j.npz"
    junk.write_bytes(b"junk")
    _refused(["run", junk], capsys, "not an .npz archive")
    _refused(["sim", junk], capsys, "not an .npz archive")
    _refused(["tune", junk, "--no-progress"], capsys, "not an .npz archive")
    _refused(["tune", bundle, "--no-progress"], capsys, "is a program bundle")


def test_hw_run_failure_is_one_line_and_leaves_no_output(tmp_path, bundle, capsys, monkeypatch):
    from pyvta.commands import hw

    def deadlocked(bundle_path, out, *args, **kw):
        Path(out).write_bytes(b"partial")
        raise RuntimeError("RTL run did not finish (deadlock): load waits for a token")

    monkeypatch.setattr(hw, "run_bundle", deadlocked)
    out = tmp_path / "r.npz"
    _refused(["hw", "run", bundle, "--out", out], capsys, "RTL run did not finish (deadlock)")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_output_through_a_symlink_writes_its_target(tmp_path):
    target = tmp_path / "real.npz"
    target.write_bytes(b"old")
    (tmp_path / "link.npz").symlink_to(target)
    p = output_path(tmp_path / "link.npz", ".npz")
    with atomic_output(p) as tmp:
        tmp.write_bytes(b"new")
    assert (tmp_path / "link.npz").is_symlink() and target.read_bytes() == b"new"


# -- issue 39: options that do not apply, inputs the model cannot take, archives by content ---
@pytest.fixture
def cpu_artifact(tmp_path):
    import onnx
    from onnx import helper

    from pyvta.compiler.graph.zoo import float_model

    model = float_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (1, 6)}, {"y": (1, 6)})
    onnx.save(model, tmp_path / "relu.onnx")
    artifact = tmp_path / "relu.npz"
    assert (
        main(["compile", str(tmp_path / "relu.onnx"), "--target", "cpu", "-o", str(artifact)]) == 0
    )
    return artifact


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--tuning-log", "LOG"], "--tuning-log applies"),
        (["--tuning-log", "DIR"], "--tuning-log applies"),
        (["--tuning-log", "missing.jsonl"], "--tuning-log applies"),
        (["--search", "4"], "--search applies"),
        (["--calibration", "DIR"], "--calibration applies"),
        (["--input-shape", "x=1,6"], "--input-shape applies"),
        (["--search", "2", "--calibration", "DIR"], "--search, --calibration apply"),
    ],
)
def test_run_of_an_artifact_refuses_compile_options(tmp_path, cpu_artifact, capsys, flags, named):
    (tmp_path / "LOG").write_text("")
    (tmp_path / "DIR").mkdir()
    flags = [str(tmp_path / f) if f in ("LOG", "DIR", "missing.jsonl") else f for f in flags]
    capsys.readouterr()
    err = _refused(["run", cpu_artifact, "--target", "cpu", *flags], capsys, named)
    assert "is a compiled artifact" in err and len(err.strip().splitlines()) == 1
    assert main(["run", str(cpu_artifact), "--target", "cpu"]) == 0  # without them it runs


@pytest.mark.parametrize(
    "x",
    [
        np.ones((1, 6), np.complex64),
        np.ones((1, 6), bool),
        np.array([["a"] * 6]),
        np.zeros((1, 6), [("re", "f4"), ("im", "f4")]),
        np.array([[b"a"] * 6]),
    ],
    ids=["complex64", "bool", "str", "structured", "bytes"],
)
def test_run_refuses_an_input_of_a_dtype_the_model_cannot_take(tmp_path, cpu_artifact, capsys, x):
    np.save(tmp_path / "x.npy", x)
    capsys.readouterr()
    err = _refused(
        ["run", cpu_artifact, "--target", "cpu", "--input", tmp_path / "x.npy"],
        capsys,
        f"{x.dtype} [1, 6]; the model takes float32 [1, 6]",
    )
    assert len(err.strip().splitlines()) == 1


def test_run_takes_float_and_integer_inputs(tmp_path, cpu_artifact, capsys):
    for dtype in (np.float64, np.int16, np.uint8):
        np.save(tmp_path / "x.npy", np.ones((1, 6), dtype))
        assert (
            main(["run", str(cpu_artifact), "--target", "cpu", "--input", str(tmp_path / "x.npy")])
            == 0
        )


def test_disasm_reads_a_bundle_renamed_bin_as_a_bundle(tmp_path, bundle, capsys):
    renamed = tmp_path / "B.bin"
    renamed.write_bytes(bundle.read_bytes())
    assert main(["disasm", str(bundle)]) == 0
    want = capsys.readouterr().out.splitlines()[1:]
    assert main(["disasm", str(renamed)]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got[1:] == want and "not a multiple of 16" not in "\n".join(got)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (a folder nobody can write)")
def test_out_in_a_folder_that_exists_but_cannot_be_written(bundle, capsys):
    err = _refused(["sim", bundle, "--out", "/proc/version"], capsys, "the folder /proc exists")
    assert (
        "no file can be created in it" in err
        and "No such file or directory" not in err.split("(")[0]
    )
