"""The CPU templates of MobileNet-style layers: depthwise 3x3 (row-block padding, register
tiles along the width, stride 2) and pointwise 1x1 (a GEMM over the flattened pixels), each
with its fused epilogue, against float64 numpy in the blocked NCHW{c}c layout."""

import re

import numpy as np
import pytest

from pyvta.compiler.ops.cpu.depthwise import (
    DepthwiseKnobs,
    depthwise_nchwc,
    pack_depthwise_weights,
)
from pyvta.compiler.ops.cpu.nchwc import Epilogue, pack_conv_weights
from pyvta.compiler.ops.cpu.pointwise import PointwiseKnobs, pointwise_nchwc


def _blocked(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW ``[1, C, H, W]`` -> ``[1, C/c, H, W, c]``."""
    _, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(1, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def _epilogue(y, bias, block, res, clip):
    """NCHW float64 ``y [C, OH, OW]`` + bias -> blocked, + residual, clipped."""
    y = _blocked((y + bias[:, None, None])[None], block)
    return np.clip(y + res, *clip)


@pytest.mark.parametrize(
    "c,h,w,stride,block,knobs",
    [
        (32, 14, 14, 1, 16, DepthwiseKnobs(7, 2)),
        (32, 13, 11, 1, 16, DepthwiseKnobs(4, 3)),  # tiles and row blocks that do not divide
        (16, 14, 14, 2, 16, DepthwiseKnobs(7, 2)),  # stride 2: 7 x 7 out
        (16, 15, 9, 2, 8, DepthwiseKnobs(3, 4, parallel=False)),  # 8 x 5 out: 3 + 2 columns
        (16, 7, 7, 1, 16, DepthwiseKnobs(7, 7)),  # one task per channel block
    ],
)
def test_depthwise_template(build, rng, c, h, w, stride, block, knobs):
    from numpy.lib.stride_tricks import sliding_window_view

    ep = Epilogue(residual=True, clip=(0.0, 6.0))
    s, args = depthwise_nchwc(c, h, w, (3, 3), (stride, stride), (1, 1, 1, 1), block, knobs, ep)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    k = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    out_shape = args[-1].shape
    res = rng.standard_normal(out_shape).astype(np.float32)
    out = np.full(out_shape, np.nan, np.float32)  # every element must be written
    build(s, args)(_blocked(x, block), pack_depthwise_weights(k, block), bias, res, out)
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::stride, ::stride]
    y = np.einsum("cyxij,cij->cyx", win, k[:, 0].astype(np.float64))
    want = _epilogue(y, bias, block, res, (0.0, 6.0))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "c,h,w,g,stride,dilation,block,knobs",
    [
        (32, 14, 14, 4, 1, 1, 16, DepthwiseKnobs(4, 2)),  # ResNeXt's groups of 4
        (32, 13, 11, 8, 1, 1, 16, DepthwiseKnobs(3, 3)),  # tiles and row blocks that do not divide
        (48, 15, 9, 2, 2, 1, 16, DepthwiseKnobs(3, 4, parallel=False)),  # stride 2
        (16, 9, 9, 4, 1, 2, 8, DepthwiseKnobs(5, 1)),  # dilated, AVX2's blocks of 8
        (16, 7, 7, 8, 1, 1, 16, DepthwiseKnobs(7, 7)),  # half a block
    ],
)
def test_narrow_groups_on_the_depthwise_template(
    build, rng, c, h, w, g, stride, dilation, block, knobs
):
    """A grouped conv of groups of ``g`` channels narrower than the block: lane ``k`` of a
    block reads its group's ``g`` input lanes, against a float64 grouped conv."""
    ep = Epilogue(residual=True, clip=(0.0, 6.0))
    st, dil = (stride, stride), (dilation, dilation)
    pads = (dilation,) * 4
    s, args = depthwise_nchwc(c, h, w, (3, 3), st, pads, block, knobs, ep, dil, group_width=g)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    k = rng.standard_normal((c, g, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    out_shape = args[-1].shape
    res = rng.standard_normal(out_shape).astype(np.float32)
    out = np.full(out_shape, np.nan, np.float32)  # every element must be written
    build(s, args)(_blocked(x, block), pack_depthwise_weights(k, block), bias, res, out)
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (dilation,) * 2, (dilation,) * 2))
    oh, ow = out_shape[2:4]
    y = np.zeros((c, oh, ow))
    for o in range(c):
        first = (o // g) * g
        for j in range(g):
            for ky in range(3):
                for kx in range(3):
                    y0, x0 = ky * dilation, kx * dilation
                    tap = xp[
                        first + j, y0 : y0 + stride * oh : stride, x0 : x0 + stride * ow : stride
                    ]
                    y[o] += k[o, j, ky, kx] * tap
    want = _epilogue(y, bias, block, res, (0.0, 6.0))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_narrow_groups_must_divide_the_block():
    with pytest.raises(ValueError, match="group width 3 must divide the block 16"):
        depthwise_nchwc(48, 7, 7, (3, 3), (1, 1), (1,) * 4, 16, group_width=3)


@pytest.mark.parametrize(
    "c,h,w,o,ib,ob,knobs",
    [
        (32, 7, 7, 32, 16, 16, PointwiseKnobs(6, 0)),  # 49 pixels: 8 tiles of 6 and one of 1
        (16, 5, 6, 32, 16, 32, PointwiseKnobs(3, 16)),  # channel tiles of a 32-block
        (3, 4, 4, 16, 3, 16, PointwiseKnobs(16, 0, parallel=False)),  # one tile, odd channels
        (64, 5, 5, 32, 16, 16, PointwiseKnobs(6, 0, k_blocks=2)),  # two accumulation passes
        (64, 3, 5, 32, 16, 16, PointwiseKnobs(4, 8, k_blocks=3)),  # 3 does not divide 4: one
        (96, 3, 5, 32, 16, 16, PointwiseKnobs(4, 8, k_blocks=2)),  # 3 passes, the last tile short
        (96, 7, 7, 96, 16, 16, PointwiseKnobs(7, 0, k_blocks=2, oc_blocks=3)),  # 3 blocks, passes
        (32, 7, 7, 64, 16, 16, PointwiseKnobs(5, 0, oc_blocks=2)),  # tiles of 2 output blocks
        (64, 5, 5, 64, 16, 16, PointwiseKnobs(6, 0, k_blocks=2, oc_blocks=4)),  # 4, in passes
        (32, 3, 5, 64, 16, 16, PointwiseKnobs(4, 0, tile_order="pixels", oc_blocks=2)),
        (32, 4, 4, 96, 16, 16, PointwiseKnobs(3, 0, parallel_loops=2, oc_blocks=3)),
        # one block: its pixel tiles across threads (the untuned order of few tiles)
        (
            32,
            7,
            7,
            16,
            16,
            16,
            PointwiseKnobs(8, 0, k_blocks=0, tile_order="pixels", parallel_loops=2),
        ),
    ],
)
def test_pointwise_template(build, rng, c, h, w, o, ib, ob, knobs):
    ep = Epilogue(residual=True, clip=(0.0, 6.0))
    s, args = pointwise_nchwc(c, h, w, o, ib, ob, knobs, ep)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    k = rng.standard_normal((o, c, 1, 1)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, o // ob, h, w, ob)).astype(np.float32)
    out = np.full(res.shape, np.nan, np.float32)
    mod = build(s, args)
    flat = [a.reshape(p.shape) for a, p in zip([_blocked(x, ib), pack_conv_weights(k, ib, ob),
            bias, res, out], mod.func.params, strict=True)]  # fmt: skip
    mod(*flat)
    y = np.einsum("chw,oc->ohw", x[0].astype(np.float64), k[:, :, 0, 0].astype(np.float64))
    want = _epilogue(y, bias, ob, res, (0.0, 6.0))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_bad_knobs_say_what_is_allowed():
    with pytest.raises(ValueError, match="ow_block 15 must be in 1..14"):
        depthwise_nchwc(16, 14, 14, (3, 3), (1, 1), (1, 1, 1, 1), 16, DepthwiseKnobs(15, 1))
    with pytest.raises(ValueError, match="p_block 50 must be in 1..49"):
        pointwise_nchwc(16, 7, 7, 16, 16, 16, PointwiseKnobs(50, 0))
    with pytest.raises(ValueError, match="oc_tile 24 divide the block 16"):
        pointwise_nchwc(16, 7, 7, 16, 16, 16, PointwiseKnobs(4, 24))
    with pytest.raises(ValueError, match="oc_blocks 3 must divide the 4 output blocks"):
        pointwise_nchwc(16, 7, 7, 64, 16, 16, PointwiseKnobs(4, 0, oc_blocks=3))
    with pytest.raises(ValueError, match=r"oc_blocks 2 needs whole blocks per tile \(oc_tile 0\)"):
        pointwise_nchwc(16, 7, 7, 64, 16, 32, PointwiseKnobs(4, 16, oc_blocks=2))


def test_pointwise_oc_blocks_1_is_the_loops_of_before_and_2_changes_them():
    """``oc_blocks`` 1 (the default) lowers to the same loop IR as knobs without it (the
    schedule of before: ``test_cpu_spaces`` reads old records through it); 2 puts the blocks'
    loop inside the tile's pixels, unrolled (each broadcast input feeds both blocks' FMAs)."""
    from pyvta import compiler

    def ir(**kw):
        return str(
            compiler.lower(*pointwise_nchwc(64, 7, 7, 64, 16, 16, PointwiseKnobs(7, 0, **kw)))
        )

    assert ir() == ir(oc_blocks=1)
    two = ir(oc_blocks=2)
    assert two != ir()
    assert "for f in range(0, 2) unrolled" in two and "for f in range(0, 2)" not in ir()
    assert "for f.outer in range(0, 2) parallel" in two


def _fma_blocks(asm: str) -> list[tuple[int, int]]:
    """``(vector FMAs, vector stores)`` of each basic block of ``asm`` with FMAs in it."""
    blocks = re.split(r"\n(?=\.LBB\d+_\d+:)", asm)
    counts = [(len(re.findall(r"vfmadd\w*ps", b)), len(re.findall(r"vmovu?a?ps\s+%zmm\d+, ", b)))
              for b in blocks]  # fmt: skip
    return [c for c in counts if c[0]]


@pytest.mark.parametrize("c,knobs", [(384, PointwiseKnobs(7, 0, k_blocks=8, oc_blocks=3)),
                                     (480, PointwiseKnobs(7, 0, k_blocks=8, oc_blocks=2))])  # fmt: skip
def test_pointwise_passes_keep_a_tile_in_registers(c, knobs):
    """A pass's register tile is a stage of its own (``part``, one tile's sums from zero) added
    into the block's partial sums after the pass, so its accumulators stay in registers: summed
    in the partial sums themselves, LLVM stored them after every FMA for 3 blocks x 7 pixels
    (21 vectors) and where a last pass was shorter (30 blocks in passes of 8), on 2 threads: a
    Zen 5 ran both 0.36-0.42x one pass. A ``k_blocks`` that does not divide the input blocks
    now runs one pass."""
    from pyvta.compiler import lower
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.backend.llvm.build import assembly

    sch, args = pointwise_nchwc(c, 7, 7, c, 16, 16, knobs)
    ir = str(lower(sch, args))
    if c // 16 % knobs.k_blocks == 0:
        assert f"allocate part: float32[1, 1, {knobs.oc_blocks}, 7, 16] in 'local'" in ir
    else:
        assert "part" not in ir and "rco.outer" not in ir  # one pass
    asm = assembly(lower(sch, args), CpuTarget.of_cpu("znver5", "avx512", num_threads=2))
    counts = _fma_blocks(asm)
    assert counts and all(stores < fmas for fmas, stores in counts), counts


def test_default_pointwise_tile_spans_three_blocks_where_two_do_not_divide():
    """With 32 vector registers a one-vector block's untuned tile spans the first of
    ``TILE_BLOCKS`` that divides the layer's blocks and leaves two tiles: RegNetX's 33 and 15
    blocks 3 (one before), 6 blocks 3, 64 blocks 2 (as before), RegNetX-4.0GF's 35 and 85
    blocks 5 (4 pixels: 20 accumulators beside 5 weight vectors), 3 and 5 blocks one; AVX2's
    16 registers one."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.pointwise import TILE_BLOCKS

    wide, avx2 = CpuTarget.of_cpu("znver5", "avx512"), CpuTarget.of_cpu("znver2", "avx2")
    counts = (33, 15, 6, 64, 35, 85, 3, 5)
    got = {n: PointwiseKnobs.for_target(wide, 49, 16, n).oc_blocks for n in counts}
    assert TILE_BLOCKS == (3, 2, 5)
    assert got == {33: 3, 15: 3, 6: 3, 64: 2, 35: 5, 85: 5, 3: 1, 5: 1}
    assert PointwiseKnobs.for_target(avx2, 49, 8, 33).oc_blocks == 1
    for n, blocks in ((33, 3), (85, 5)):  # the tile and its weight vectors fit the registers
        k = PointwiseKnobs.for_target(wide, 196, 16, n)
        assert k.p_block * blocks + blocks <= wide.vector_registers - 4, k
    assert PointwiseKnobs.for_target(wide, 196, 16, 85).p_block == 4


def test_default_pointwise_layers_of_few_tiles_run_their_pixels_across_threads():
    """A layer of an odd number of tiles of output blocks below ``PIXEL_TASKS_BELOW_TILES``
    (not spread evenly over ``SPREAD_THREADS``) runs its pixel tiles outside and across threads
    with its blocks, in one pass (before: 16 output channels ran on one thread); even counts
    and 11 tiles or more keep the blocks across threads; on AVX2 too (its blocks of two vectors
    a tile each: 15 blocks are 15 tiles there, 5 of 3 blocks with 32 registers)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.pointwise import PIXEL_TASKS_BELOW_TILES, SPREAD_THREADS

    assert (PIXEL_TASKS_BELOW_TILES, SPREAD_THREADS) == (10, 2)
    wide, avx2 = CpuTarget.of_cpu("znver5", "avx512"), CpuTarget.of_cpu("znver2", "avx2")
    always = {1: True, 3: True, 5: True, 7: True, 9: True, 2: False, 4: False, 11: False}
    for target, lanes in ((wide, 16), (avx2, 8)):
        # 85 blocks: 17 tiles of 5 with 32 registers (pixels outside: PIXEL_ORDER_FROM_BLOCKS)
        cases = {**always, 33: False, 15: lanes == 16, 85: lanes == 16}
        for out_blocks, pixels in cases.items():
            k = PointwiseKnobs.for_target(target, 49, 16, out_blocks, in_blocks=32)
            tiles = out_blocks // k.oc_blocks
            assert (k.tile_order == "pixels") == pixels, (lanes, out_blocks, tiles, k)
            assert (k.parallel_loops == 2) == pixels
            if pixels:
                assert k.k_blocks == 0  # one pass: K_BLOCKS runs passes over 32 blocks


@pytest.mark.parametrize(
    "m,k,n,block,lanes",
    [
        (1, 37, 80, 40, 8),  # panels of 5 vectors side by side
        (2, 16, 48, 24, 8),  # 3 vectors, two rows
        (1, 9, 12, 4, 8),  # a panel narrower than one vector
        (4, 88, 67, 8, 8),  # 67 (prime) as 9 panels of one vector, the last 3 columns
        (3, 20, 5, 16, 16),  # fewer outputs than one panel
    ],
)
def test_dense_panels_of_several_vectors(build, rng, m, k, n, block, lanes):
    from pyvta.compiler.ops.cpu.nchwc import dense_nc, pack_dense_weights

    ep = Epilogue(residual=True, clip=(0.0, 6.0))
    s, args = dense_nc(m, k, n, block, ep, vector_lanes=lanes)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal((m, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    build(s, args)(x, pack_dense_weights(w, block), bias, res, out)
    want = np.clip(x.astype(np.float64) @ w.T.astype(np.float64) + bias + res, 0.0, 6.0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_dense_panels_take_whole_vectors_of_the_host():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.targets.cpu.kernels import DENSE_PANEL_VECTORS, dense_block

    lanes = CpuTarget.host().vector_lanes("float32")
    assert dense_block(DENSE_PANEL_VECTORS * lanes * 7) == DENSE_PANEL_VECTORS * lanes
    assert dense_block(lanes * 2) == lanes * 2
    assert dense_block(lanes + 2) in (4, 2) and (lanes + 2) % dense_block(lanes + 2) == 0
    # an odd count: one vector, the last panel padded (not panels of one column)
    assert dense_block(67) == lanes and dense_block(5) == lanes


def test_default_pointwise_tile_leaves_no_one_pixel_tail():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc import SPARE_REGISTERS
    from pyvta.compiler.ops.cpu.pointwise import TILE_COST_PIXELS

    t = CpuTarget.host()
    lanes = t.vector_lanes("float32")
    room = (t.vector_registers - SPARE_REGISTERS) // 2
    for pixels in (49, 196, 784, 3136, 12544, 5):
        p = PointwiseKnobs.for_target(t, pixels, 2 * lanes).p_block
        cost = -(-pixels // p) * (p + TILE_COST_PIXELS)
        assert 0 < p <= min(room, pixels)
        assert all(-(-pixels // q) * (q + TILE_COST_PIXELS) >= cost for q in range(1, p)), pixels
    if lanes == 8:  # AVX2: up to 6 x 16; 7 x 7 as 9 x 5 + 4, 14 x 14 as 32 x 6 + 4
        assert [PointwiseKnobs.for_target(t, n, 16).p_block for n in (49, 196)] == [5, 6]


def test_default_depthwise_tile_is_at_most_the_default_vectors():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.depthwise import DEFAULT_TILE_VECTORS

    t = CpuTarget.host()
    block = 2 * t.vector_lanes("float32")
    for hw in ((112, 112), (56, 56), (14, 14), (7, 7), (3, 3)):
        k = DepthwiseKnobs.for_target(t, hw, block)
        assert 0 < 2 * k.ow_block <= DEFAULT_TILE_VECTORS and k.ow_block <= hw[1]
        assert hw[0] % k.y_block == 0
    if t.vector_lanes("float32") == 8:  # AVX2: 4 columns x 16 channels, 7 as 4 + 3
        assert DepthwiseKnobs.for_target(t, (7, 7), 16).ow_block == 4
