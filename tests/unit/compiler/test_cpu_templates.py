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
        # k below the unrolled k step: the unrolled copies past k are dead (they failed verify)
        (1, 32, 3, GemmKnobs(bm=6, bn=32, bk=4)),
        (3, 32, 1, GemmKnobs(bm=6, bn=32, bk=4)),
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
        (16, 6, 32, WinogradKnobs(p_block=3, k_block=16)),  # U in two column blocks
        (4, 5, 32, WinogradKnobs(p_block=9, k_block=32, parallel=False)),
    ],
)
def test_winograd_template(build, rng, conv_reference, c, h, k, knobs):
    s, args = conv2d_winograd(c, h, h, k, knobs)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    out = np.zeros((1, k, h, h), np.float32)
    build(s, args)(x, transform_weights(w, knobs.k_block), out)
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


def _nchwc_conv_reference(x, w, bias, strides, pads, ob, res=None, clip=None):
    """float64 conv of NCHW ``x`` with OIHW ``w`` + bias (+ residual, clip), NCHW{ob}c out."""
    from numpy.lib.stride_tricks import sliding_window_view

    t, lft, b, r = pads
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (t, b), (lft, r)))
    win = sliding_window_view(xp, w.shape[2:], axis=(1, 2))[:, :: strides[0], :: strides[1]]
    y = np.tensordot(w.astype(np.float64), win, axes=([1, 2, 3], [0, 3, 4]))
    y += bias[:, None, None]
    o, oh, ow = y.shape
    y = y.reshape(o // ob, ob, oh, ow).transpose(0, 2, 3, 1)[None]
    if res is not None:
        y = y + res
    return y if clip is None else np.clip(y, *clip)


@pytest.mark.parametrize(
    "c,h,o,k,stride,pad,ow_block,oc_tile,flat",
    [
        (32, 14, 32, 3, 1, 1, 5, 0, False),  # 14 columns as 5 + 5 + 4
        (16, 7, 16, 3, 1, 1, 4, 0, False),  # 7 as 4 + 3
        (16, 13, 32, 3, 2, 1, 6, 8, False),  # 7 outputs, stride 2: 6 + 1
        (3, 23, 16, 7, 2, 3, 5, 0, False),  # the 3-channel stem: 12 as 5 + 5 + 2
        (32, 9, 16, 1, 1, 0, 9, 8, False),  # one tile per row
        (32, 7, 16, 3, 1, 1, 5, 0, True),  # 49 positions as 9 x 5 + 4, across rows
        (16, 13, 32, 3, 2, 1, 6, 8, True),  # stride 2: 49 as 8 x 6 + 1
    ],
)
def test_nchwc_conv_with_tiles_that_do_not_divide_the_row(
    build, rng, c, h, o, k, stride, pad, ow_block, oc_tile, flat
):
    from pyvta.compiler.ops.cpu.nchwc import Epilogue, pack_conv_weights
    from pyvta.compiler.ops.cpu.nchwc_direct import NchwcConvKnobs, conv2d_nchwc

    ib, ob = (16 if c % 16 == 0 else c), 16
    knobs = NchwcConvKnobs(ow_block=ow_block, oc_tile=oc_tile, flat=flat)
    ep = Epilogue(residual=True, clip=(0.0, 6.0))
    pads = (pad,) * 4
    s, args = conv2d_nchwc(c, h, h, o, (k, k), (stride, stride), pads, ib, ob, knobs, ep)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    oh, ow = -(-h // stride), -(-h // stride)
    out_shape = (1, o // ob, oh, ow, ob)  # flat: the same bytes as [1, O/ob, OH * OW, ob]
    assert args[-1].shape == ((1, o // ob, oh * ow, ob) if flat else out_shape)
    res = rng.standard_normal(out_shape).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, c // ib, ib, h, h).transpose(0, 1, 3, 4, 2))
    out = np.full(out_shape, np.nan, np.float32)  # every element must be written
    shape = args[-1].shape
    build(s, args)(xb, pack_conv_weights(w, ib, ob), bias, res.reshape(shape), out.reshape(shape))
    want = _nchwc_conv_reference(x, w, bias, (stride, stride), pads, ob, res, (0.0, 6.0))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "c,h,w,k,stride,pads,dil",
    [
        (16, 5, 4, (3, 3), (2, 2), (2, 1, 3, 2), (3, 2)),  # every output reads padding
        (16, 13, 13, (7, 7), (1, 1), (6, 6, 6, 6), (2, 2)),  # net27's dilated 7x7
        (8, 6, 9, (5, 3), (1, 2), (4, 0, 3, 1), (2, 3)),
    ],
)
def test_nchwc_conv_skips_padded_kernel_rows_exactly(build, rng, c, h, w, k, stride, pads, dil):
    """The direct template tests each kernel row of a tile once and skips it where it reads
    only padding (dilations, asymmetric pads, strides, small images): a skipped row that reads
    the image would change the sums."""
    from pyvta.compiler.api import lower
    from pyvta.compiler.ops.cpu.nchwc import Epilogue, pack_conv_weights
    from pyvta.compiler.ops.cpu.nchwc_direct import NchwcConvKnobs, conv2d_nchwc

    o, ib, ob = 16, c, 8
    oh = (h + pads[0] + pads[2] - (k[0] - 1) * dil[0] - 1) // stride[0] + 1
    ow = (w + pads[1] + pads[3] - (k[1] - 1) * dil[1] - 1) // stride[1] + 1
    knobs = NchwcConvKnobs(ow_block=min(4, ow))
    s, args = conv2d_nchwc(c, h, w, o, k, stride, pads, ib, ob, knobs, Epilogue(), dilations=dil)
    text = str(lower(s, args))
    assert "if (" in text[text.index("for ry") : text.index("for rci")], text
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c, *k)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    dilated = np.zeros((o, c, (k[0] - 1) * dil[0] + 1, (k[1] - 1) * dil[1] + 1), np.float32)
    dilated[:, :, :: dil[0], :: dil[1]] = wt  # the same taps, as an undilated kernel
    xb = np.ascontiguousarray(x.reshape(1, 1, c, h, w).transpose(0, 1, 3, 4, 2))
    out = np.full((1, o // ob, oh, ow, ob), np.nan, np.float32)
    build(s, args)(xb, pack_conv_weights(wt, ib, ob), bias, out)
    want = _nchwc_conv_reference(x, dilated, bias, stride, pads, ob)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_default_nchwc_tiles_take_whole_blocks_and_even_columns():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc import SPARE_REGISTERS
    from pyvta.compiler.ops.cpu.nchwc_direct import NchwcConvKnobs, register_tiles

    t = CpuTarget.host()
    lanes, room = t.vector_lanes("float32"), t.vector_registers - SPARE_REGISTERS
    block = 2 * lanes
    for ow in (112, 56, 28, 14, 7, 3):
        k = NchwcConvKnobs.for_target(t, ow, block)
        assert k.oc_tile == 0, ow  # the whole output block per tile
        assert 2 * k.ow_block <= room and k.ow_block <= ow
        tiles = -(-ow // k.ow_block)
        # no narrower tile needs as few tiles per row: the last tile is as wide as it can be
        assert tiles == -(-ow // (room // 2)) or ow < room // 2
        assert all(-(-ow // d) > tiles for d in range(1, k.ow_block))
        assert (k.ow_block, block) in register_tiles(t, ow, block)
    if lanes == 8:  # AVX2: 16 registers, 12 accumulators
        assert [NchwcConvKnobs.for_target(t, ow, 16).ow_block for ow in (56, 14, 7)] == [6, 5, 4]


@pytest.mark.parametrize("pad", [1, 0])
def test_nchwc_conv_reads_an_nchw_input_from_its_padding_copy(build, rng, pad):
    """The stem's form: NCHW data of one channel block, padded as NCHW by the kernel's own
    padding stage (also without padding; not blocked: 3-lane vectors cost more), equal to the
    conv of the blocked input."""
    from pyvta.compiler.ops.cpu.nchwc import Epilogue, pack_conv_weights
    from pyvta.compiler.ops.cpu.nchwc_direct import NchwcConvKnobs, conv2d_nchwc

    c, h, o, k, stride = 3, 11, 16, 3, 2
    pads = (pad,) * 4
    ep = Epilogue(clip=(0.0, 6.0))
    knobs = NchwcConvKnobs(ow_block=4)
    s, args = conv2d_nchwc(c, h, h, o, (k, k), (stride, stride), pads, c, 16, knobs, ep, True)
    assert args[0].shape == (1, c, h, h)
    assert tuple(s.tensor("data.pad").shape) == (1, c, h + 2 * pad, h + 2 * pad)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    out = np.full(args[-1].shape, np.nan, np.float32)
    build(s, args)(x, pack_conv_weights(w, c, 16), bias, out)
    want = _nchwc_conv_reference(x, w, bias, (stride, stride), pads, 16, clip=(0.0, 6.0))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "parts",
    [
        [(64, 16), (31, 16)],  # aligned: parts chosen per output block (vector loop)
        [(16, 16), (32, 16), (7, 16)],
        [(13, 8), (20, 16), (7, 8)],  # misaligned: per channel, blocks of other widths
    ],
)
def test_concat_nchwc_equals_numpy(build, rng, parts):
    """The blocked channel concat of parts of odd channel counts (padded last blocks, whose
    padded lanes the kernel may copy: the output's padded channels are not compared), into
    blocks of 16; the aligned cases build a vectorized loop (a scalar condition per block)."""
    from pyvta.compiler.ops.cpu.nchwc import concat_nchwc
    from pyvta.runtime.layout import pack_nchw

    h, w, block = 3, 5, 16
    xs = [rng.standard_normal((1, c, h, w)).astype(np.float32) for c, _ in parts]
    mod = build(*concat_nchwc(parts, h, w, block), num_threads=2)
    packed = [pack_nchw(x, b)[:, :, :, :, 0] for x, (_, b) in zip(xs, parts, strict=True)]
    out = np.full(mod.func.params[-1].shape, np.nan, np.float32)
    mod(*packed, out)
    total = sum(c for c, _ in parts)
    got = out.transpose(0, 1, 4, 2, 3).reshape(1, -1, h, w)[:, :total]
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=1))
    aligned = all(b == block for _, b in parts[:-1]) and all(c % block == 0 for c, _ in parts[:-1])
    assert ("<16 x float>" in mod.llvm_ir or "<8 x float>" in mod.llvm_ir) == aligned


@pytest.mark.parametrize("h,w", [(42, 42), (13, 13), (7, 7), (1, 3), (1, 1)])
def test_global_avg_pool_sums_in_partial_sums(build, rng, h, w):
    """The global average pool of blocked channels: every pixel counted once, whether or not
    the partial sums divide the pixels (169 = 13 x 13 pixels: a last, guarded row; fewer pixels
    than partial sums), and nearer the float64 mean than one running sum of float32 (the
    order the pool had, here in numpy): its error over the 42 x 42 map was 3.6x onnxruntime's."""
    from pyvta.compiler.ops.cpu.nchwc import GAP_PARTIAL_SUMS, global_avg_pool_nchwc
    from pyvta.runtime.layout import pack_nchw

    c, block = 40, 16  # three blocks, the last padded (the graph passes the padded count)
    x = (rng.standard_normal((1, c, h, w)) + 3.0).astype(np.float32)  # a non-zero mean
    mod = build(*global_avg_pool_nchwc(-(-c // block) * block, h, w, block))
    out = np.full(mod.func.params[-1].shape, np.nan, np.float32)
    packed = pack_nchw(x, block)[:, :, :, :, 0]  # [1, C/16, H, W, 16]
    mod(packed.reshape(mod.func.params[0].shape), out)  # as the runtime passes it (same bytes)
    got = out.reshape(-1)[:c]  # [1, C/16, 1, 1, 16] is NCHW [1, C] byte for byte, padded
    exact = x.astype(np.float64).mean(axis=(2, 3)).reshape(-1)
    np.testing.assert_allclose(got, exact, rtol=1e-6)
    if h * w >= 64 * GAP_PARTIAL_SUMS:  # enough pixels for the order to show
        running = np.zeros(c, np.float32)
        for p in x.reshape(c, -1).T:  # one running float32 sum per channel, pixel by pixel
            running += p
        running *= np.float32(1.0 / (h * w))
        err, err_running = np.abs(got - exact).max(), np.abs(running - exact).max()
        print(f"max error from float64: partial sums {err:.3g}, one running sum {err_running:.3g}")
        assert err * 2 < err_running
