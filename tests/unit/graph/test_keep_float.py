"""``--keep-float`` (``KeepFloat``): which conv/dense layers an int8 target leaves in float, and
the all-int8 choice giving the same bits on every CPU (x86 feature levels here, in subprocesses
limited by ``PYVTA_CPU_FEATURES``; the ARM CPUs in tests/board)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pyvta.compiler.graph import KeepFloat
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.passes.quantize_int8 import keep_float_names
from pyvta.compiler.graph.zoo import save_model
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.ir import GraphError

SEED = 5
MODEL = dict(size=32, classes=10, width=16, seed=SEED)


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory):
    print(f"seed {SEED}")
    return save_model("resnet18", str(tmp_path_factory.mktemp("kf") / "r18.onnx"), **MODEL)


def _x(cm) -> np.ndarray:
    shape = cm.graph.values[cm.input_names[0]].shape
    return np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)


def test_keep_float_names(onnx_path):
    g = import_onnx(onnx_path)
    convs = [n.name for n in g.nodes if n.op == "conv2d"]
    denses = [n.name for n in g.nodes if n.op == "dense"]
    assert keep_float_names(g, None) == keep_float_names(g, KeepFloat.DEFAULT)
    assert keep_float_names(g, KeepFloat.DEFAULT) == (convs[0], denses[-1])
    assert keep_float_names(g, KeepFloat.CLASSIFIER) == (denses[-1],)
    assert keep_float_names(g, KeepFloat.NONE) == ()
    assert keep_float_names(g, (convs[2],)) == (convs[2],)
    with pytest.raises(GraphError, match="not a conv2d/dense.*allowed: " + convs[0]):
        keep_float_names(g, ("nope",))


def test_all_int8_runs_the_3_channel_stem_in_int8_kernels(onnx_path):
    """``KeepFloat.NONE``: no float conv/dense left; the 3-channel stem conv (a padded channel
    block) runs a compiled int8 kernel, bit-exact with the numpy reference of its node."""
    from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels
    from pyvta.runtime.cpu_ops import run_cpu_op
    from pyvta.runtime.executor import Executor

    cm = compile_model(onnx_path, "cpu-int8", keep_float=KeepFloat.NONE)
    assert not [n for n in cm.graph.nodes if n.op in ("cpu_conv2d", "cpu_dense", "conv2d")]
    stem = next(n for n in cm.graph.nodes if n.op == "qconv2d")
    assert cm.graph.values[stem.inputs[0]].shape[1] == 3, cm.graph.values[stem.inputs[0]]
    backend = CpuInt8Kernels(cm.graph)
    assert stem.name in backend.kernels
    checked = []

    class Checked:  # each compiled node against its numpy reference on the same inputs
        def run(self, node, args):
            out = backend.run(node, args)
            if node.name in backend.kernels:
                assert np.array_equal(out, run_cpu_op(node.op, args, node.attrs)), node.name
                checked.append(node.name)
            return out

    Executor(cm.graph, backends={"cpu": Checked()}).run({cm.input_names[0]: _x(cm)})
    assert stem.name in checked and sorted(checked) == sorted(backend.kernels)


_CHILD = """
import sys, numpy as np
from pyvta.compiler.graph import KeepFloat
from pyvta.compiler.graph.compile import compile_model
from pyvta.runtime.compiled_model import run_model
keep = None if sys.argv[2] == "default" else KeepFloat(sys.argv[2])
cm = compile_model(sys.argv[1], "cpu-int8", keep_float=keep)
x = np.random.default_rng(int(sys.argv[4])).standard_normal(
    cm.graph.values[cm.input_names[0]].shape).astype(np.float32)
(y,), _ = run_model(cm, x)
np.save(sys.argv[3], y)
"""


def _levels() -> list[str]:
    from pyvta.host_cpu import host, levels_met

    _, _, features = host("host")
    return [lv for lv in ("avx2", "sse") if lv in levels_met(features)]


def _host_has_fma() -> bool:
    """Whether the kernels this process compiles use fused multiply-add: the host's features
    as ``$PYVTA_CPU_FEATURES`` limits them (under ``sse``, the host's run has none either)."""
    from pyvta.host_cpu import host

    return bool(host()[2].get("fma"))


def _run_at(level: str, onnx_path, keep: str, out) -> np.ndarray:
    env = dict(os.environ, PYVTA_CPU_FEATURES=level)
    cmd = [sys.executable, "-P", "-c", _CHILD, str(onnx_path), keep, str(out), str(SEED)]
    subprocess.run(cmd, env=env, check=True, timeout=300)
    return np.load(out)


def test_all_int8_is_bit_identical_across_x86_feature_levels(onnx_path, tmp_path):
    """Compiled and run on this host, and in processes limited to AVX2 and to SSE (128-bit, no
    fused multiply-add, as the Cortex-A9): ``KeepFloat.NONE`` gives the same bits at every level
    (compile and run in each); the default (float stem conv feeding a quantize) differs at the
    level without fused multiply-add when this host has it."""
    levels = _levels()
    if not levels:
        pytest.skip("needs an x86 host with AVX2 or SSE4.2 to emulate another feature level")
    print(f"levels compared with this host: {levels}")
    for keep in ("none", "default"):
        cm = compile_model(onnx_path, "cpu-int8", keep_float=KeepFloat(keep))
        (host_y,), _ = run_model(cm, _x(cm))
        for level in levels:
            y = _run_at(level, onnx_path, keep, tmp_path / f"{keep}-{level}.npy")
            diff = float(np.abs(y - host_y).max() / np.abs(host_y).max())
            print(f"--keep-float {keep}: host vs {level}: max|diff|/max {diff:.2e}")
            if keep == "none":
                assert np.array_equal(y, host_y), level
            elif level == "sse" and _host_has_fma():
                assert not np.array_equal(y, host_y)  # the rounding --keep-float none avoids
