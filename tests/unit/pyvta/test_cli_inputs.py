"""pyvta run with several inputs (--input NAME=X.npy), symbolic input shapes (--input-shape),
and a batch whose top-5 is printed per sample."""

import numpy as np
import onnx
from onnx import helper

from pyvta.cli import main
from pyvta.compiler.graph.zoo import float_model

SEED = 4


def test_two_inputs_by_name(tmp_path, capsys):
    model = float_model(
        [helper.make_node("Add", ["a", "b"], ["y"])], {"a": (1, 8), "b": (1, 8)}, {"y": (1, 8)}
    )
    onnx.save(model, tmp_path / "add.onnx")
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    a, b = (rng.standard_normal((1, 8)).astype(np.float32) for _ in range(2))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    argv = ["run", str(tmp_path / "add.onnx"), "--target", "cpu", "--save-output"]
    argv += [str(tmp_path / "y.npy"), "--input", f"a={tmp_path / 'a.npy'}"]
    assert main(argv + ["--input", f"b={tmp_path / 'b.npy'}"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), a + b, rtol=1e-6)
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                str(tmp_path / "add.onnx"),
                "--target",
                "cpu",
                "--input",
                str(tmp_path / "a.npy"),
            ]
        )
        == 2
    )
    assert "give each as --input NAME=X.npy" in capsys.readouterr().err
    assert main(argv + ["--input", f"c={tmp_path / 'b.npy'}"]) == 2
    assert "not inputs of the model" in capsys.readouterr().err


def test_symbolic_shape_from_the_command_line_and_top5_per_sample(tmp_path, capsys):
    model = float_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ("N", 6)}, {"y": ("N", 6)})
    onnx.save(model, tmp_path / "relu.onnx")
    argv = ["run", str(tmp_path / "relu.onnx"), "--target", "cpu"]
    assert main(argv) == 2
    assert "--input-shape x=" in capsys.readouterr().err
    assert main(argv + ["--input-shape", "x=3,6"]) == 0
    out = capsys.readouterr().out
    assert "output [3, 6]" in out
    assert all(f"sample {i}: top-5 classes" in out for i in range(3))
    assert main(argv + ["--input-shape", "x=3,0"]) == 2
    assert "positive dimensions" in capsys.readouterr().err
