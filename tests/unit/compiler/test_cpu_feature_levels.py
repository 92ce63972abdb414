"""Every x86 feature level the CPU backend targets (``X86_LEVELS``): on each level this host can
run, the int8 dot form that level selects (and the VNNI form emulated where it has no VNNI) is
compiled with the level's features and checked bit for bit against the accelerator's contract
on the odd layers that once broke and on a seeded random sweep, and a float GEMM and a small
float network at the level's vector width against numpy / onnxruntime; on a level the host
cannot run, the same kernels are assembled for a CPU that has it and checked for the
instructions they must contain. The session's closing summary lists which levels ran and
which were only assembled (``tests/conftest.py``)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from pyvta import compiler
from pyvta.compiler.api import lower
from pyvta.compiler.backend.llvm.build import assembly
from pyvta.compiler.backend.llvm.target import X86_LEVELS, CpuFeatureError, CpuTarget
from pyvta.compiler.ops.cpu.gemm import GemmKnobs, matmul_packed
from pyvta.compiler.ops.cpu.int8 import (
    Int8ConvKnobs,
    conv_out_hw,
    dot_form,
    dot_isa,
    pack_qconv,
    qconv2d_nchw,
)
from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.vta_ops import FusedParams

# level -> (an LLVM CPU that has it, the int8 instruction its dot form must emit, the float
# FMA / multiply the float GEMM must emit)
LEVELS = {
    "avx512vnni": ("icelake-server", r"vpdpbusd\s+%zmm", r"vfmadd\w+ps\s+%zmm"),
    "avx512": ("skylake-avx512", r"vpmaddwd\s+%zmm", r"vfmadd\w+ps\s+%zmm"),
    "avxvnni": ("alderlake", r"\{vex\}\s+vpdpbusd\s+%ymm", r"vfmadd\w+ps\s+%ymm"),
    "avx2": ("haswell", r"vpmaddwd\s+%ymm", r"vfmadd\w+ps\s+%ymm"),
    "sse": ("nehalem", r"\bpmaddwd\s+%xmm", r"\bmulps\s+%xmm"),
}
SEED = 4242


def test_the_table_covers_every_level():
    assert set(LEVELS) == set(X86_LEVELS)


def test_the_host_target_follows_the_variable_at_each_call(monkeypatch):
    """``CpuTarget.host()`` is made once per level and thread count, and reads
    ``PYVTA_CPU_FEATURES`` at every call: a change of the variable gives the other level's
    target; a level this CPU lacks or a bad thread count raises every time, never cached."""
    from pyvta import host_cpu

    if _runnable("sse") is None:
        pytest.skip("needs an x86 host (the sse feature level)")
    monkeypatch.setenv(host_cpu.FEATURES_ENV, "sse")
    sse = CpuTarget.host()
    assert sse.vector_bits == 128 and not sse.has("avx") and CpuTarget.host() is sse
    assert CpuTarget.host(features="sse") is sse and CpuTarget.host(3).num_threads == 3
    monkeypatch.setenv(host_cpu.FEATURES_ENV, "host")
    own = CpuTarget.host()
    assert own.features == host_cpu.flat(host_cpu.host("host")[2]) and own is not sse
    monkeypatch.delenv(host_cpu.FEATURES_ENV)
    assert CpuTarget.host() is own
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="num_threads must be a positive int"):
            CpuTarget.host(bad)
    lacking = [lv for lv in X86_LEVELS if _runnable(lv) is None]
    for _ in range(2):
        for lv in lacking:  # e.g. avx512 on an AVX2 host
            monkeypatch.setenv(host_cpu.FEATURES_ENV, lv)
            with pytest.raises(CpuFeatureError):
                CpuTarget.host()


def _runnable(level: str) -> CpuTarget | None:
    try:
        return CpuTarget.host(2, level)
    except CpuFeatureError:
        return None


def _target_for(level: str, cpu_levels) -> tuple[CpuTarget, bool]:
    """The host at ``level`` (runs), else a CPU that has it (assembled only); recorded in the
    session's summary."""
    host = _runnable(level)
    cpu_levels[level] = "ran" if host is not None else "assembled only (this CPU lacks it)"
    return (host, True) if host is not None else (CpuTarget.of_cpu(LEVELS[level][0], level), False)


# (C, H, W, O, kernel, strides, pads, residual): the layer that broke on AVX-512 VNNI (7 -> 12
# channels, 3x5 kernel, stride 2x1, asymmetric pads), channels no multiple of 4 or 16, a dense
ODD_LAYERS = [
    (7, 11, 9, 12, (3, 5), (2, 1), (1, 2, 0, 1), False),
    (13, 9, 11, 24, (3, 3), (2, 2), (1, 0, 2, 1), True),
    (5, 6, 10, 20, (1, 3), (1, 2), (0, 1, 0, 1), True),
    (19, 8, 8, 36, (3, 3), (1, 1), (1, 1, 1, 1), False),
    (40, 1, 1, 10, (1, 1), (1, 1), (0, 0, 0, 0), False),
]


def _sweep(n: int, seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        c, o = int(rng.integers(1, 50)), int(rng.integers(1, 70))
        kh, kw = (int(k) for k in rng.choice([1, 3, 5, 7], 2))
        sh, sw = (int(s) for s in rng.integers(1, 3, 2))
        pads = tuple(int(p) for p in rng.integers(0, 4, 4))
        h, w = int(rng.integers(kh, 17)), int(rng.integers(kw, 17))
        try:
            conv_out_hw(h, w, (kh, kw), (sh, sw), pads)
        except ValueError:
            continue
        out.append((c, h, w, o, (kh, kw), (sh, sw), pads, bool(rng.integers(0, 2))))
    return out


def _knob_choices(o: int, ow: int, target: CpuTarget, dot: str) -> list[Int8ConvKnobs]:
    """The layer's default tile at this target, and a scalar tile of four or more unrolled
    columns run on two threads (the shape LLVM miscompiled in the emulated VNNI form)."""
    lanes, regs = target.vector_lanes("int32"), target.vector_registers
    default = Int8ConvKnobs.for_layer(o, ow, lanes, regs, dot)
    cols = max([d for d in range(1, ow + 1) if ow % d == 0 and d <= 8])
    return list(dict.fromkeys([default, Int8ConvKnobs(1, cols, dot=dot)]))


def _check_int8(layer, knobs, level: str, rng, x_lo: int = -128) -> None:
    """One layer at ``level`` against ``run_cpu_op``, bit for bit. The shift puts a typical
    accumulator near +-48 and the clip leaves most of int8 open, so the outputs carry the
    convolution (a shift or clip that saturates every output would hide a wrong sum)."""
    c, h, w, o, kernel, strides, pads, residual = layer
    typical = np.sqrt(c * kernel[0] * kernel[1]) * 74 * 74  # std of the sum of int8 products
    attrs = dict(
        strides=list(strides), pads=list(pads), dilations=[1, 1], group=1,
        clip_lo=int(rng.integers(-128, -63)), clip_hi=int(rng.integers(64, 128)),
        shift=max(0, int(np.log2(typical / 48))), res_shift=int(rng.integers(0, 3)),
    )  # fmt: skip
    x = rng.integers(x_lo, 128, (1, c, h, w)).astype(np.int8)
    wt = rng.integers(-128, 128, (o, c, *kernel)).astype(np.int8)
    bias = rng.integers(-int(typical), int(typical) + 1, o).astype(np.int32)
    oh, ow = conv_out_hw(h, w, kernel, strides, pads)
    res = [rng.integers(-128, 128, (1, o, oh, ow)).astype(np.int8)] if residual else []
    params = FusedParams.from_attrs(attrs)
    sch, args = qconv2d_nchw(c, h, w, o, kernel, params, residual, knobs)
    mod = compiler.build(sch, args, num_threads=2, cache_dir=None, cpu_features=level)
    wp, bp = pack_qconv(wt, bias, knobs.oc_block, knobs.dot)
    out = np.zeros((1, o, oh, ow), np.int8)
    mod(x, wp, bp, *res, out)
    ref = run_cpu_op("qconv2d", [x, wt, bias, *res], attrs)
    assert len(np.unique(ref)) >= min(8, ref.size // 2), "degenerate reference: saturated"
    bad = int((out != ref).sum())
    assert bad == 0, f"{level} {knobs} layer {layer}: {bad} of {out.size} outputs differ"


@pytest.mark.parametrize("level", list(LEVELS))
def test_int8_dot_form_of_each_level(level, cpu_levels):
    """The level's own dot form (what ``cpu-int8`` picks there) on the odd layers and 12 random
    ones, bit-exact where it runs; its instruction in the assembly either way."""
    target, runs = _target_for(level, cpu_levels)
    dot = dot_form(dot_isa(target.feature_dict))
    params = FusedParams(9, 0, 127, pads=(1, 1, 1, 1))
    wide = target.vector_lanes("int32")
    knobs = Int8ConvKnobs.for_layer(64, 14, wide, target.vector_registers, dot)
    asm = assembly(lower(*qconv2d_nchw(64, 14, 14, 64, (3, 3), params, knobs=knobs)), target)
    assert re.search(LEVELS[level][1], asm), f"{level}: no {LEVELS[level][1]} in the {dot} kernel"
    if not runs:
        return
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}; {level}: dot form {dot}, {wide} int32 lanes")
    for layer in ODD_LAYERS + _sweep(12, SEED):
        _, h, w, o, kernel, strides, pads, _ = layer
        ow = conv_out_hw(h, w, kernel, strides, pads)[1]
        for kn in _knob_choices(o, ow, target, dot):
            _check_int8(layer, kn, level, rng)


@pytest.mark.parametrize("level", [lv for lv in LEVELS if "vnni" not in lv])
def test_emulated_vnni_form_is_exact(level, cpu_levels):
    """The ``vpdpbusd`` form compiled for a level without VNNI computes byte by byte: bit-exact
    too (the form LLVM 22's SLP vectorizer miscompiled as shifts and masks)."""
    if _runnable(level) is None:
        pytest.skip(f"needs a CPU that runs the {level} feature level")
    rng = np.random.default_rng(SEED + 1)
    target = CpuTarget.host(2, level)
    for layer in ODD_LAYERS + _sweep(6, SEED + 1):
        _, h, w, o, kernel, strides, pads, _ = layer
        ow = conv_out_hw(h, w, kernel, strides, pads)[1]
        for kn in _knob_choices(o, ow, target, "vpdpbusd"):
            _check_int8(layer, kn, level, rng)


@pytest.mark.parametrize("level", [lv for lv in LEVELS if "vnni" not in lv])
def test_unsigned_form_is_exact(level, cpu_levels):
    """The ``pmaddubsw`` form (inputs 0..127, what ``cpu-int8`` picks without VNNI after a
    ReLU) compiled for a level without VNNI: vpmaddubsw and vpmaddwd by ones (AVX2, AVX-512BW,
    SSSE3), bit-exact on the odd layers and a random sweep."""
    if _runnable(level) is None:
        pytest.skip(f"needs a CPU that runs the {level} feature level")
    rng = np.random.default_rng(SEED + 2)
    print(f"seed {SEED + 2}")
    target = CpuTarget.host(2, level)
    for layer in ODD_LAYERS + _sweep(6, SEED + 2):
        _, h, w, o, kernel, strides, pads, _ = layer
        ow = conv_out_hw(h, w, kernel, strides, pads)[1]
        for kn in _knob_choices(o, ow, target, "pmaddubsw"):
            _check_int8(layer, kn, level, rng, x_lo=0)


@pytest.mark.parametrize("level", list(LEVELS))
def test_float_gemm_at_each_vector_width(level, cpu_levels):
    """A float32 GEMM tiled for the level's vector width: its FMA (or SSE multiply) on the
    level's registers, and within 1e-4 of numpy where it runs."""
    target, runs = _target_for(level, cpu_levels)
    knobs = GemmKnobs.for_target(target)
    m, n, k = 13, 4 * knobs.bn, 37
    asm = assembly(lower(*matmul_packed(m, n, k, knobs)), target)
    assert re.search(LEVELS[level][2], asm), f"{level}: no {LEVELS[level][2]} in the GEMM"
    if level != "sse":
        assert not re.search(r"%zmm", asm) or target.vector_bits == 512
    if not runs:
        return
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    sch, args = matmul_packed(m, n, k, knobs)
    mod = compiler.build(sch, args, num_threads=2, cache_dir=None, cpu_features=level)
    c = np.zeros((m, n), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def _network(tmp_path, rng):
    """A small float network: odd channels (3 -> 24 -> 20), stride 2, asymmetric pads, a
    grouped and a depthwise conv, a residual add, pools and a dense."""
    from onnx import TensorProto, helper, numpy_helper

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype("float32") * 0.2, name)

    conv = helper.make_node
    nodes = [
        conv("Conv", ["input", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 0, 2, 1]),
        conv("Relu", ["c1"], ["r1"]),
        conv("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=4),
        conv("Add", ["c2", "r1"], ["a2"]),
        conv("Conv", ["a2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], group=24),
        conv("Relu", ["c3"], ["r3"]),
        conv("Conv", ["r3", "w4", "b4"], ["c4"]),
        conv("MaxPool", ["c4"], ["p4"], kernel_shape=[2, 2], strides=[2, 2]),
        conv("GlobalAveragePool", ["p4"], ["g"]),
        conv("Flatten", ["g"], ["f"]),
        conv("Gemm", ["f", "w5", "b5"], ["out"], transB=1),
    ]
    inits = [init("w1", 24, 3, 3, 3), init("b1", 24), init("w2", 24, 6, 3, 3), init("b2", 24),
             init("w3", 24, 1, 3, 3), init("b3", 24), init("w4", 20, 24, 1, 1), init("b4", 20),
             init("w5", 10, 20), init("b5", 10)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 21, 19])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    path = tmp_path / "net.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("level", list(LEVELS))
def test_networks_at_each_level(level, tmp_path, monkeypatch, cpu_levels):
    """A small network with ``PYVTA_CPU_FEATURES`` set to the level: compiled for ``cpu``
    against onnxruntime (1e-4), and for ``cpu-int8`` every compiled int8 node bit-exact with
    the numpy reference on the same inputs."""
    if _runnable(level) is None:
        pytest.skip(f"needs a CPU that runs the {level} feature level")
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.reference import run_onnxruntime
    from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels
    from pyvta.runtime.compiled_model import run_model
    from pyvta.runtime.executor import Executor

    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    path = _network(tmp_path, rng)
    monkeypatch.setenv("PYVTA_CPU_FEATURES", level)
    x = rng.standard_normal((1, 3, 21, 19)).astype("float32")
    (ref,) = run_onnxruntime(onnx.load(path), {"input": x})
    out = run_model(compile_model(str(path), "cpu"), x)[0][0]
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) < 1e-4
    g = compile_model(str(path), "cpu-int8", keep_float=()).graph
    backend = CpuInt8Kernels(g, num_threads=2)
    assert backend.kernels, "no int8 node compiled"

    class Checked:
        def run(self, node, args):
            got = backend.run(node, args)
            if node.name in backend.kernels:
                want = run_cpu_op(node.op, args, node.attrs)
                assert (got == want).all(), f"{level}: {node.name} differs from numpy"
            return got

    Executor(g, backends={"cpu": Checked()}).run({"input": x})
