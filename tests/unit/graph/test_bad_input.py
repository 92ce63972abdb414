"""Bad models and inputs: clean OnnxImportError/GraphError (PyvtaErrors) naming what is wrong,
never a traceback or a silently wrong answer. NaN/Inf weights are refused for int8 targets
naming the node; NaN inputs are refused when quantized."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from pyvta.cli import main
from pyvta.compiler.graph import import_onnx, zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.onnx_import import OnnxImportError
from pyvta.isa.errors import PyvtaError
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.ir import GraphError


@pytest.fixture(scope="module")
def small_model():
    return zoo.resnet(18, size=32, width=8, classes=10, seed=2)


def _with_initializer(model, name, fill):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i, init in enumerate(m.graph.initializer):
        if init.name == name:
            a = numpy_helper.to_array(init).copy()
            a.flat[0] = fill
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, name))
    return m


def test_error_types_are_pyvta_errors_and_value_errors():
    from pyvta.compiler.backend.llvm.codegen import CodegenError
    from pyvta.compiler.backend.vta.emitter import UopOverflowError
    from pyvta.compiler.ir.verify import IRError
    from pyvta.compiler.lower.schedule_ops import LowerError
    from pyvta.tuner.task import InvalidConfig

    for cls in (OnnxImportError, GraphError, IRError, CodegenError, LowerError, UopOverflowError):
        assert issubclass(cls, PyvtaError) and issubclass(cls, ValueError), cls
    assert issubclass(InvalidConfig, PyvtaError)


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "empty"),
        (b"\x08\x07\x12garbage\xff\xff\xff\xff", "not a readable ONNX model|0 nodes"),
        (b"\xff" * 64, "not a readable ONNX model"),
    ],
)
def test_empty_or_corrupt_onnx_file_is_a_clean_error(tmp_path, content, match):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(OnnxImportError, match=match):
        import_onnx(path)


def test_missing_file_or_folder_is_a_clean_error(tmp_path):
    with pytest.raises(OnnxImportError, match="no such file"):
        import_onnx(tmp_path / "missing.onnx")
    with pytest.raises(OnnxImportError, match="is a directory"):
        import_onnx(tmp_path)


def test_truncated_model_is_a_clean_error(tmp_path, small_model):
    path = tmp_path / "cut.onnx"
    path.write_bytes(small_model.SerializeToString()[:3000])
    with pytest.raises(OnnxImportError):
        import_onnx(path)


def test_malformed_node_names_the_node():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    node = helper.make_node("Conv", ["x"], ["y"], name="conv_without_weight")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]))
    with pytest.raises(OnnxImportError, match="conv_without_weight"):
        import_onnx(model)


def test_symbolic_shape_says_how_to_fix_it():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    )
    with pytest.raises(OnnxImportError, match=r"symbolic shape \['N', 4\].*input_shapes"):
        import_onnx(model)
    assert import_onnx(model, {"x": (2, 4)}).values["x"].shape == (2, 4)


def test_undefined_graph_output_is_refused():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("nowhere", onnx.TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    )
    with pytest.raises(OnnxImportError, match="not produced"):
        import_onnx(model)


def test_cli_unsupported_op_is_one_line_exit_2(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    node = helper.make_node("Celu", ["x"], ["y"], name="celu0")
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph([node], "g", [x], [y])), path)
    assert main(["compile", str(path), "-o", str(tmp_path / "a.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node 'celu0': op 'Celu' is not supported" in err[0]
    assert "Traceback" not in err[0]


def test_cli_empty_onnx_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    assert main(["compile", str(path), "-o", str(tmp_path / "a.npz")]) == 2
    assert "empty (0 bytes)" in capsys.readouterr().err


@pytest.mark.parametrize("fill", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("target", ["cpu-int8", "vta"])
def test_non_finite_weight_is_refused_for_int8_naming_the_node(tmp_path, small_model, fill, target):
    path = tmp_path / "w.onnx"
    onnx.save(_with_initializer(small_model, "conv5.weight", fill), path)
    with pytest.raises(GraphError, match=r"node 'conv5' .*constant 'conv5.weight") as exc:
        compile_model(path, target)
    assert "bias" not in str(exc.value)


def test_nan_input_is_refused_by_an_int8_model(tmp_path, small_model):
    path = tmp_path / "m.onnx"
    onnx.save(small_model, path)
    cm = compile_model(path, "cpu-int8")
    x = zoo.sample_inputs(1, 32, seed=1)[0]
    run_model(cm, x)  # finite: runs
    x[0, 1, 2, 3] = np.nan
    with pytest.raises(GraphError, match="NaN or Inf"):
        run_model(cm, x)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # squares of 1e30
def test_huge_weight_is_blamed_on_the_weights_with_a_readable_scale(tmp_path, small_model):
    path = tmp_path / "w.onnx"
    onnx.save(_with_initializer(small_model, "conv5.weight", 1e30), path)
    with pytest.raises(GraphError, match=r"node 'conv5'.*2\*\*11: max \|weight\|") as exc:
        compile_model(path, "cpu-int8")
    assert "2**--" not in str(exc.value)


def test_int8_node_without_its_fused_attrs_fails_the_graph_check(tmp_path, small_model):
    from pyvta.runtime.ir import check_graph

    path = tmp_path / "m.onnx"
    onnx.save(small_model, path)
    cm = compile_model(path, "cpu-int8")
    node = next(n for n in cm.graph.nodes if n.op == "qconv2d")
    del node.attrs["clip_lo"]
    with pytest.raises(GraphError, match=rf"node '{node.name}' \(qconv2d\) is malformed.*clip_lo"):
        check_graph(cm.graph)
