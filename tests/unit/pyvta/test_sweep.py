"""A sweep of the command line's bad inputs (issue 39): every int, float and choice option of
every subcommand given a value of the wrong kind, and the file options of the commands that
read or write files given a path they cannot use (a folder, a missing file, garbage, a folder
that cannot be written). Each is refused with one error line naming the option or the path,
exit 2, and no file in the working folder is written or changed. Counts are printed."""

import argparse
import hashlib
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from pyvta.cli import build_parser, main
from pyvta.sim.random_program import random_program

SEED = 39


def _walk(parser, prefix=()):
    """(subcommand words, action) for every option of every (nested) subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*prefix, name))
        elif prefix and not isinstance(action, argparse._HelpAction) and action.dest != "debug":
            yield prefix, action


def _numeric_cases():
    cases = []
    for words, action in _walk(build_parser()):
        name = getattr(action.type, "__name__", "")
        if not action.option_strings:
            continue
        opt = action.option_strings[-1]
        if name.startswith(("int", "float")):
            bad = ["x", "-1", "1e400" if name.startswith("float") else "1.5"]
            bad += ["nan", "inf"] if name.startswith("float") else []
            cases += [(words, opt, v) for v in bad]
        elif action.choices:
            cases.append((words, opt, "no-such-choice"))
    return cases


NUMERIC = _numeric_cases()


def _snapshot(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "dir"
        for p in sorted(folder.rglob("*"))
    }


def _one_line_refusal(argv, capsys, names: tuple[str, ...], folder: Path):
    before = _snapshot(folder)
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse
        rc = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, (argv, rc, err)
    last = err[-1] if err else ""
    assert last.startswith(f"pyvta {argv[0]}") and "error" in last, (argv, err)
    assert not any("Traceback" in line for line in err), err
    assert len(err) == 1 or err[0].startswith("usage:"), err  # argparse prints its usage first
    assert any(n in last for n in names), (argv, last)
    assert _snapshot(folder) == before, f"{argv} changed the folder"
    return last


@pytest.mark.parametrize(
    "words, opt, value", NUMERIC, ids=[f"{' '.join(w)} {o} {v}" for w, o, v in NUMERIC]
)
def test_every_numeric_and_choice_option_refuses_a_value_of_the_wrong_kind(
    tmp_path, monkeypatch, capsys, words, opt, value
):
    monkeypatch.chdir(tmp_path)
    _one_line_refusal([*words, f"{opt}={value}"], capsys, (f"argument {opt}",), tmp_path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A bundle, an ONNX model, a CPU artifact, a folder, garbage, in one folder."""
    import onnx
    from onnx import helper

    from pyvta.compiler.graph.zoo import float_model

    folder = tmp_path_factory.mktemp("sweep")
    print(f"seed {SEED}")
    random_program(np.random.default_rng(SEED)).save(folder / "B.npz")
    model = float_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (1, 16)}, {"y": (1, 16)})
    onnx.save(model, folder / "m.onnx")
    assert (
        main(["compile", str(folder / "m.onnx"), "--target", "cpu", "-o", str(folder / "a.npz")])
        == 0
    )
    (folder / "D").mkdir()
    (folder / "junk.bin").write_bytes(b"\x00junk\xff" * 7)
    (folder / "key").write_bytes(b"0123456789abcdef-key")
    from pyvta.isa import HwConfig

    (folder / "cfg.json").write_text(HwConfig().to_json())
    assert (
        main(
            [
                "tune",
                "gemm:16,16,16",
                "--trials",
                "2",
                "--no-progress",
                "--log",
                str(folder / "log.jsonl"),
            ]
        )
        == 0
    )
    return folder


# (base argv, option or None for the positional, what it takes: "in" a file, "out" a file)
FILE_OPTIONS = [
    (["sim", "{B}"], None, "in"),
    (["disasm", "{B}"], None, "in"),
    (["disasm", "{B}"], "--config", "in"),
    (["isa"], "--config", "in"),
    (["sim", "{B}"], "--out", "out"),
    (["sim", "{B}"], "--trace", "out"),
    (["run", "{a}", "--target", "cpu"], None, "in"),
    (["run", "{a}", "--target", "cpu"], "--config", "in"),
    (["run", "{a}", "--target", "cpu"], "--input", "in"),
    (["run", "{a}", "--target", "cpu"], "--save-output", "out"),
    (["run", "{m}", "--target", "cpu"], "--tuning-log", "in"),
    (["run", "{m}", "--target", "vta", "--device", "sim"], "--calibration", "in"),
    (["compile", "{m}", "--target", "cpu", "-o", "{o}"], None, "in"),
    (["compile", "{m}", "--target", "cpu", "-o", "{o}"], "--config", "in"),
    (["compile", "{m}", "--target", "vta", "-o", "{o}"], "--calibration", "in"),
    (["compile", "{m}", "--target", "cpu"], "-o", "out"),
    (["zoo", "resnet18", "--size", "32", "--classes", "10", "--width", "8"], "-o", "out"),
    (["serve", "--listen", "127.0.0.1:0"], "--config", "in"),
    (["serve", "--listen", "127.0.0.1:0"], "--key-file", "in"),
    (["hw", "run", "{B}", "--out", "{o}"], None, "in"),
    (["hw", "verilog"], "-o", "out"),
    (["demo", "gemm", "--m", "16", "--k", "16", "--n", "16"], "--trace", "out"),
    (["demo", "gemm", "--m", "16", "--k", "16", "--n", "16"], "--save", "out"),
    (["conv", "--shape", "8,8,16,16,3,1,1", "--search", "0"], "--trace", "out"),
    (["conv", "--shape", "8,8,16,16,3,1,1", "--search", "0"], "--save", "out"),
    (["conv", "--shape", "8,8,16,16,3,1,1", "--search", "0"], "--config", "in"),
    (["tune", "gemm:16,16,16", "--trials", "1", "--no-progress"], "--plot", "out"),
    (["tune", "gemm:16,16,16", "--trials", "1", "--no-progress"], "--transfer-log", "in"),
    (["board", "recipe", "--board", "pynq-z2", "-o", "recipe-out"], "--config", "in"),
    (["serve", "--listen", "127.0.0.1:0"], "--tls-cert", "in"),
    (["dse", "--no-synth", "--size", "32"], "--configs", "in"),
]
BAD_IN = {"missing": "nothing-here.bin", "folder": "D", "garbage": "junk.bin"}
BAD_OUT = {"folder": "D", "missing folder": "no-such-dir/x.npz", "unwritable": "/proc/x.npz"}
CASES = [
    (base, opt, why, value)
    for base, opt, kind in FILE_OPTIONS
    for why, value in (BAD_IN if kind == "in" else BAD_OUT).items()
    if not (opt == "--key-file" and why == "garbage")  # a key is any bytes (>= 16)
]


# options given where they do not apply: (argv, the option named)
NOT_APPLYING = [
    (["run", "{a}", "--target", "cpu", "--bitstream", "D"], "--bitstream"),
    (["run", "{a}", "--target", "cpu", "--key-file", "key"], "--key-file"),
    (["run", "{a}", "--target", "vta", "--device", "sim", "--key-file", "key"], "--key-file"),
    (["run", "{a}", "--target", "cpu", "--tuning-log", "junk.bin"], "--tuning-log"),
    (["run", "{a}", "--target", "cpu", "--search", "3"], "--search"),
    (["run", "{a}", "--target", "cpu", "--calibration", "D"], "--calibration"),
    (["run", "{a}", "--target", "cpu", "--input-shape", "x=1,16"], "--input-shape"),
    (["run", "{m}", "--target", "cpu", "--calibration", "D"], "--calibration"),
    (["run", "{m}", "--target", "cpu", "--search", "3"], "--search"),
    (["run", "{m}", "--target", "cpu-int8", "--tuning-log", "junk.bin"], "--tuning-log"),
    (["run", "{m}", "--target", "cpu", "--config", "cfg.json"], "--config"),
    (["compile", "{m}", "--target", "cpu", "-o", "{o}", "--calibration", "D"], "--calibration"),
    (["compile", "{m}", "--target", "cpu", "-o", "{o}", "--search", "2"], "--search"),
    (["compile", "{m}", "--target", "cpu", "-o", "{o}", "--config", "cfg.json"], "--config"),
    (
        ["compile", "{m}", "--target", "cpu", "-o", "{o}", "--other-cpu-records"],
        "--other-cpu-records",
    ),
    (["run", "{a}", "--target", "cpu", "--other-cpu-records"], "--other-cpu-records"),
    (
        ["run", "{m}", "--target", "vta", "--tuning-log", "junk.bin", "--other-cpu-records"],
        "--other-cpu-records",
    ),
    (
        ["tune", "gemm:16,16,16", "--tuner", "random", "--transfer-log", "log.jsonl"],
        "--transfer-log",
    ),
]


@pytest.mark.parametrize("argv, flag", NOT_APPLYING, ids=[" ".join(a[2:]) for a, _ in NOT_APPLYING])
def test_an_option_given_where_it_does_not_apply_is_refused(files, capsys, monkeypatch, argv, flag):
    monkeypatch.chdir(files)
    sub = {"B": "B.npz", "a": "a.npz", "m": "m.onnx", "o": "out.npz"}
    argv = [w.format(**sub) for w in argv]
    last = _one_line_refusal(argv, capsys, (flag,), files)
    assert any(w in last for w in ("does not use", "applies to", "apply to", "has none")), last


class _Timeout(Exception):
    pass


@pytest.mark.parametrize(
    "base, opt, why, value",
    CASES,
    ids=[f"{' '.join(b[:1])} {o or 'positional'} {w}" for b, o, w, _ in CASES],
)
def test_every_file_option_refuses_a_path_it_cannot_use(
    files, capsys, monkeypatch, base, opt, why, value
):
    if base[0] == "hw":
        pytest.importorskip("amaranth")
    if why == "unwritable" and not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    monkeypatch.chdir(files)
    sub = {"B": "B.npz", "a": "a.npz", "m": "m.onnx", "o": "out.npz"}
    argv = [w.format(**sub) for w in base]
    if opt is None:  # the positional's place
        at = argv.index(
            sub[{"sim": "B", "disasm": "B", "hw": "B", "run": "a", "compile": "m"}[argv[0]]]
        )
        argv[at] = value
    else:
        argv += [opt, value]

    def stop(*_):
        raise _Timeout(f"{argv}: still running after 60 s (the bad path was not refused)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(60)
    try:
        names = (opt or value, value, value.rstrip("/"), str(files / value))
        _one_line_refusal(argv, capsys, tuple(n for n in names if n), files)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_sweep_counts(capsys):
    n_num = sum(1 for _, _, v in NUMERIC)
    with capsys.disabled():
        print(
            f"\nsweep: {n_num} numeric/choice cases over"
            f" {len({(tuple(w), o) for w, o, _ in NUMERIC})} options;"
            f" {len(CASES)} file cases over {len(FILE_OPTIONS)} file options;"
            f" {len(NOT_APPLYING)} options given where they do not apply"
        )
