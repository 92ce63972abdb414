"""The CPU schedule templates (the tuner's search spaces) are correct for several knob values."""

import ast
import pathlib

import numpy as np
import pytest

from pyvta.compiler.ops.cpu import Conv2dKnobs, GemmKnobs, conv2d_nchw_blocked, matmul_packed
from pyvta.compiler.ops.cpu.conv2d import pack_weights
from pyvta.compiler.ops.cpu.winograd import WinogradKnobs, conv2d_winograd, transform_weights


@pytest.mark.parametrize(
    "m,n,k,knobs",
    [
        (64, 64, 32, GemmKnobs()),
        (37, 48, 19, GemmKnobs(bm=4, bn=16, bk=2)),
        (16, 32, 8, GemmKnobs(bm=2, bn=32, bk=8, parallel=False)),
        # row tiles and k steps that do not divide: partitioned main loops plus guarded tails
        (50, 64, 33, GemmKnobs(bm=6, bn=32, bk=4, panels_outer=True)),
        (50, 64, 33, GemmKnobs(bm=7, bn=16, bk=5, pack_b=False)),
    ],
)
def test_gemm_template(build, rng, m, n, k, knobs):
    s, args = matmul_packed(m, n, k, knobs)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    build(s, args)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="multiple of bn"):
        matmul_packed(m, n + 1, k, knobs)


@pytest.mark.parametrize(
    "c,h,o,k,stride,pad,knobs",
    [
        (32, 10, 32, 3, 1, 1, Conv2dKnobs(ic=16, oc=16, ow_block=5)),
        (16, 9, 32, 3, 2, 1, Conv2dKnobs(ic=8, oc=32, ow_block=5)),
        (16, 8, 16, 1, 1, 0, Conv2dKnobs(ic=16, oc=16, ow_block=4, parallel=False)),
    ],
)
def test_conv2d_template(build, rng, conv_reference, c, h, o, k, stride, pad, knobs):
    s, args = conv2d_nchw_blocked(c, h, h, o, k, stride, pad, knobs)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = rng.standard_normal((o, c, k, k)).astype(np.float32)
    out = np.zeros(args[2].shape, np.float32)
    build(s, args)(x, pack_weights(w, knobs.ic, knobs.oc), out)
    np.testing.assert_allclose(out, conv_reference(x, w, stride, pad), rtol=1e-4, atol=1e-4)


def test_compiler_imports_point_one_way():
    """compiler/ never imports sim, hw or driver."""
    root = pathlib.Path(__file__).resolve().parents[3] / "compiler"
    bad = []
    for f in root.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad += [(f.name, n) for n in names if n.split(".")[0] in ("sim", "hw", "driver")]
    assert not bad


@pytest.mark.parametrize(
    "c,h,k,knobs",
    [
        (8, 6, 32, WinogradKnobs(p_block=3, k_block=32)),
        (16, 7, 16, WinogradKnobs(p_block=4, k_block=16)),  # odd size: partial edge tiles
        (4, 5, 32, WinogradKnobs(p_block=9, k_block=32, parallel=False)),
    ],
)
def test_winograd_template(build, rng, conv_reference, c, h, k, knobs):
    s, args = conv2d_winograd(c, h, h, k, knobs)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    out = np.zeros((1, k, h, h), np.float32)
    build(s, args)(x, transform_weights(w), out)
    np.testing.assert_allclose(out, conv_reference(x, w, 1, 1), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="must divide"):
        conv2d_winograd(c, h, h, k, WinogradKnobs(p_block=1000))


def test_default_knobs_follow_the_host_vector_width():
    from pyvta.compiler.backend.llvm import CpuTarget

    t = CpuTarget.host()
    lanes = t.vector_lanes("float32")
    g = GemmKnobs.for_target(t)
    assert g.bn == 2 * lanes and 2 * g.bm <= (32 if t.vector_bits >= 512 else 16)
    c = Conv2dKnobs.for_target(t, 56)
    assert c.oc == 2 * lanes and 56 % c.ow_block == 0 and 2 * c.ow_block <= 28
