"""compile_model, CompiledModel.load and run_model given each wrong type (issue 39): the
package's ArtifactError naming the argument, before any work."""

import numpy as np
import onnx
import pytest
from onnx import helper

from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import float_model
from pyvta.runtime.compiled_model import ArtifactError, CompiledModel, run_model


@pytest.fixture(scope="module")
def relu(tmp_path_factory):
    path = tmp_path_factory.mktemp("relu") / "m.onnx"
    onnx.save(
        float_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (1, 16)}, {"y": (1, 16)}), path
    )
    return path


@pytest.mark.parametrize("path", [3, None, 1.5, ["m.onnx"]])
def test_paths_must_be_paths(path):
    with pytest.raises(ArtifactError, match="path must be a file path"):
        compile_model(path, "cpu")
    with pytest.raises(ArtifactError, match="path must be a file path"):
        CompiledModel.load(path)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"target": 5}, "target 5 is not supported"),
        ({"target": "tpu"}, "target 'tpu' is not supported"),
        ({"target": "vta", "hw": "1x16"}, "hw must be an isa.HwConfig or None, got str"),
    ],
)
def test_compile_model_checks_its_arguments(relu, kwargs, named):
    with pytest.raises(ArtifactError, match=named):
        compile_model(relu, **kwargs)


def test_run_model_checks_its_arguments(relu):
    cm = compile_model(relu, "cpu")
    x = np.ones((1, 16), np.float32)
    with pytest.raises(
        ArtifactError, match="compiled must be a CompiledModel, got str|compiled must"
    ):
        run_model(str(relu), x)
    with pytest.raises(ArtifactError, match="device must be a driver.Device .*got str 'sim'"):
        run_model(cm, x, device="sim")
    with pytest.raises(ArtifactError, match="inputs must be a numpy array or a dict"):
        run_model(cm, [[1.0] * 16])
    (y,), _ = run_model(cm, x)
    assert np.array_equal(y, x)
