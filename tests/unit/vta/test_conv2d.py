import dataclasses
import itertools

import numpy as np
import pytest

from pyvta import sim
from pyvta.compiler.backend.vta import (
    ConvConfig,
    ConvWorkload,
    DramMap,
    Epilogue,
    FitError,
    VtaConv2d,
    check_fit,
    default_config,
    lower_conv2d,
    pack_bias,
    pack_data,
    pack_weights,
    unpack_data,
)
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.compiler.backend.vta.workload import resnet18_workload
from pyvta.compiler.workloads import VTA_LAYERS
from pyvta.driver import SimDevice
from pyvta.isa import AluOp, HwConfig, MemType, Module, encode_uops


def run_and_check(
    wl: ConvWorkload, ep: Epilogue, rng, config: ConvConfig | None = None, bias_range: int = 20000
):
    x = rng.integers(-128, 128, (1, wl.in_channels, wl.height, wl.width), dtype=np.int8)
    w = rng.integers(
        -128, 128, (wl.out_channels, wl.in_channels, wl.kernel_h, wl.kernel_w), dtype=np.int8
    )
    b = rng.integers(-bias_range, bias_range, wl.out_channels).astype(np.int32)
    res = None
    if ep.residual:
        res = rng.integers(-128, 128, (1, wl.out_channels, wl.out_h, wl.out_w), dtype=np.int8)
    dev = SimDevice(dram_bytes=1 << 26)
    op = VtaConv2d(wl, ep, pack_weights(w), pack_bias(b), dev, config)
    run = op(pack_data(x), None if res is None else pack_data(res))
    got = unpack_data(run.output, wl.out_channels)
    expected = reference_conv(x, w, b, ep, wl, res)
    assert np.array_equal(got, expected), f"{wl} {op.config.to_dict()}: result differs"
    # the conv's MACs, plus the epilogue passes the GEMM core does (bias digits, residual)
    rows = wl.co_blocks * wl.out_h * wl.out_w
    extra = rows * (
        int(op.ep.bias_via_gemm) + (op.ep.residual_passes if op.ep.residual_via_gemm else 0)
    )
    assert run.counters["macs"] == wl.macs + extra * wl.block * wl.block
    return op, run


@pytest.mark.parametrize("name", VTA_LAYERS)
def test_resnet18_layers_exact(name, rng):
    wl = resnet18_workload(name)
    run_and_check(wl, Epilogue.requant(shift=9, relu=True), rng)


def test_dense_512_to_1000(rng):
    wl = ConvWorkload.dense(512, 1000)
    op, _ = run_and_check(wl, Epilogue.requant(shift=6), rng)
    assert wl.co_blocks == 63  # 1000 padded to 1008


def test_random_conv_shapes(rng):
    for i in range(10):
        k = int(rng.choice([1, 3, 5, 7]))
        s = int(rng.integers(1, 3))
        h = int(rng.integers(k, 20))
        pad = int(rng.integers(0, min(3, k - 1) + 1)) if k > 1 else int(rng.integers(0, 2))
        ci, co = int(rng.integers(1, 50)) | 1, int(rng.integers(1, 50)) | 1
        wl = ConvWorkload(h, h + int(rng.integers(0, 3)), ci, co, k, k, s, pad)
        ep = Epilogue.requant(shift=int(rng.integers(0, 12)), relu=bool(rng.integers(0, 2)))
        print(i, wl, ep)
        run_and_check(wl, ep, rng)


@pytest.mark.parametrize("vthreads", [1, 2, 3])
@pytest.mark.parametrize("loops", [("ci", "co"), ("oh", "co"), ("ci", "oh")])
def test_every_thread_count_and_loop_assignment(vthreads, loops, rng):
    wl = ConvWorkload(12, 12, 48, 64, 3, 3, 1, 1)
    c = ConvConfig(tile_h=4, tile_w=6, tile_ci=1, tile_co=2, vthreads=vthreads, gemm_loops=loops)
    run_and_check(wl, Epilogue.requant(shift=8, relu=True), rng, c)


def test_fused_residual_add(rng):
    wl = ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1)
    ep = Epilogue(bias=True, shift=7, lo=0, hi=127, residual=True, residual_shift=3)
    run_and_check(wl, ep, rng)


def test_no_bias_and_narrow_clip(rng):
    wl = ConvWorkload(8, 8, 16, 32, 3, 3, 2, 1)
    run_and_check(wl, Epilogue(bias=False, shift=10, lo=-7, hi=9), rng)


def test_tokens_balanced_and_two_threads_overlap():
    hw = HwConfig()
    wl = ConvWorkload(28, 28, 128, 128, 3, 3, 1, 1)
    ep = Epilogue.requant(8, relu=True)
    cycles = {}
    for v in (1, 2):
        c = default_config(wl, ep, hw, vthreads=v)
        low = lower_conv2d(wl, ep, c, hw, DramMap(1 << 12, 1 << 8, 1 << 8, 1 << 18, 0, 16))
        initial = np.random.default_rng(5).integers(0, 256, 1 << 24, dtype=np.uint8)
        uops = np.frombuffer(encode_uops(low.uops, hw), np.uint8)
        initial[64 : 64 + uops.size] = uops
        dram = initial.copy()
        result = sim.run_insns(low.insns, dram, hw, check_races=True)
        assert result.leftover_tokens == {}
        for order in itertools.permutations(Module):  # same DRAM under every interleaving
            for one in (False, True):
                other = initial.copy()
                sim.run_insns(low.insns, other, hw, module_order=order, one_per_turn=one)
                assert np.array_equal(other, dram), f"tokens miss an ordering: {order}, {one}"
        cycles[v] = sim.cycles_of(low.insns, hw).total_cycles
    assert cycles[2] < cycles[1]


def test_config_that_does_not_fit_is_rejected_with_sizes():
    hw = HwConfig()
    wl = ConvWorkload(56, 56, 64, 64, 3, 3, 1, 1)
    c = ConvConfig(tile_h=56, tile_w=56, tile_ci=4, tile_co=4, vthreads=2)
    with pytest.raises(
        FitError, match=r"INP needs \d+ rows, has 2048; .*ACC needs \d+ rows, has 2048"
    ):
        lower_conv2d(wl, Epilogue(), c, hw, DramMap(0, 0, 0, 0))
    with pytest.raises(FitError, match="tile_h 5 does not divide 56"):
        lower_conv2d(wl, Epilogue(), dataclasses.replace(c, tile_h=5), hw, DramMap(0, 0, 0, 0))


def test_fit_bounds_come_from_the_config_layout():
    # 4 x 32 blocks of 3x3 weights: 1152 rows, more than the default's 1024-row WGT buffer, but a
    # 4096-row buffer holds them (the check used to restate the default's 10-bit wgt factor).
    # The GEMM word's factor fields use all 64 bits on the default, so the ACC shrinks to 512 rows.
    wl, ep = ConvWorkload(14, 14, 512, 64, 3, 3, 1, 1), Epilogue(bias=False)
    c = ConvConfig(tile_h=2, tile_w=14, tile_ci=32, tile_co=4, vthreads=1)
    with pytest.raises(FitError, match="WGT needs 1152 rows, has 1024"):
        check_fit(wl, ep, c, HwConfig())
    big = HwConfig(LOG_WGT_BUFF_SIZE=20, LOG_ACC_BUFF_SIZE=15)
    assert check_fit(wl, ep, c, big).wgt_rows == 1152
    # A co loop with a 1024-row stride overflows the default's 10-bit wgt_factor_in field (the
    # buffer itself holds the 1024 rows); with co inside the micro-op kernel it fits.
    wl = ConvWorkload(4, 4, 1024, 16, 4, 4)
    c = ConvConfig(tile_h=1, tile_w=1, tile_ci=64, tile_co=1, vthreads=1, gemm_loops=("oh", "co"))
    with pytest.raises(
        FitError, match=r"wgt_factor_in = 1024 exceeds the 10-bit field \(max 1023\)"
    ):
        check_fit(wl, ep, c, HwConfig())
    assert check_fit(wl, ep, c, big).wgt_rows == 1024
    assert check_fit(wl, ep, dataclasses.replace(c, gemm_loops=("ci", "oh")), HwConfig())
    with pytest.raises(FitError, match="packed to 16-element blocks but the hardware's BLOCK is 8"):
        check_fit(
            wl,
            ep,
            c,
            HwConfig(LOG_BLOCK=3, LOG_INP_BUFF_SIZE=14, LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
        )


def test_hazard_config_rejected():
    hw = HwConfig()
    wl = ConvWorkload.dense(64, 16)  # one output block: consecutive micro-ops hit one ACC row
    c = ConvConfig(tile_h=1, tile_w=1, tile_ci=4, tile_co=1, vthreads=1)
    with pytest.raises(FitError, match="pipeline hazard"):
        lower_conv2d(wl, Epilogue(), c, hw, DramMap(0, 0, 0, 0))


@pytest.mark.parametrize("shift, res_shift", [(11, 11), (10, 12), (11, 10), (4, 9), (2, 14)])
def test_residual_paths(shift, res_shift, rng):
    # between the two parts of a split shift (GEMM), or by the ALU when 2^(k - s) is too large
    wl = ConvWorkload(8, 8, 32, 32, 3, 3, 1, 1)
    ep = Epilogue(bias=True, shift=shift, lo=0, hi=127, residual=True, residual_shift=res_shift)
    op, _ = run_and_check(wl, ep, rng)
    assert op.ep.residual_after_shift
    assert op.ep.residual_via_gemm == (res_shift - min(res_shift, shift) <= 8)


def test_micro_op_kernels_beyond_the_buffer_are_loaded_on_demand(rng):
    # a 1-block UOP buffer of 2048 micro-ops cannot hold both threads' 9 x 14 x 14 kernels
    hw = HwConfig(LOG_UOP_BUFF_SIZE=13)
    wl = ConvWorkload(14, 14, 32, 32, 3, 3, 1, 1)
    ep = Epilogue.requant(shift=8, relu=True)
    c = ConvConfig(14, 14, 1, 1, 2, ("ci", "co"))
    low = lower_conv2d(wl, ep, c, hw, DramMap.disjoint(wl, hw))
    uop_loads = [
        i
        for i in low.insns
        if getattr(i, "memory_type", None) is not None and i.memory_type.name == "UOP" and i.x_size
    ]
    assert len(uop_loads) > 1 and len(low.uops) > hw.uop_depth
    x = rng.integers(-128, 128, (1, 32, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    b = rng.integers(-999, 999, 32).astype(np.int32)
    op = VtaConv2d(wl, ep, pack_weights(w), pack_bias(b), SimDevice(hw, dram_bytes=1 << 24), c)
    got = unpack_data(op(pack_data(x)).output, 32)
    assert np.array_equal(got, reference_conv(x, w, b, ep, wl))


OVERLAP_EPILOGUES = {
    "alu bias": Epilogue(bias=True, shift=8, lo=-128, hi=127),
    "residual after shift": Epilogue(
        bias=True, shift=10, lo=0, hi=127, residual=True, residual_shift=10,
        bias_via_gemm=True, residual_after_shift=True,
    ),
    "alu residual": Epilogue(bias=True, shift=4, residual=True, residual_shift=12),
}  # fmt: skip


@pytest.mark.parametrize("ep_name", OVERLAP_EPILOGUES)
@pytest.mark.parametrize("c", [ConvConfig(2, 7, 4, 2), ConvConfig(7, 14, 2, 1)], ids=str)
def test_overlapped_lowering_is_race_free_and_equals_the_v002_one(ep_name, c):
    """ConvConfig.overlap and CLIP (one chunk and two; one and two ACC slots per thread): the
    race checker finds no pair its tokens and overlap bits leave unordered, and the output is
    that of the v0.0.2 lowering (``ConvConfig.v002``) on the same (random) DRAM."""
    hw, wl, ep = HwConfig(), ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1), OVERLAP_EPILOGUES[ep_name]
    dram_map = DramMap.disjoint(wl, hw)
    outputs = []
    for overlap in (False, True):
        low = lower_conv2d(wl, ep, c if overlap else c.v002(), hw, dram_map)
        clips = [i for i in low.insns if getattr(i, "alu_opcode", None) is AluOp.CLIP]
        assert bool(clips) == overlap  # the extensions, or v0.0.2's MAX and MIN alone
        dram = np.random.default_rng(5).integers(0, 256, 1 << 23, dtype=np.uint8)
        uops = np.frombuffer(encode_uops(low.uops, hw), np.uint8)
        dram[dram_map.uops * 4 : dram_map.uops * 4 + uops.size] = uops
        sim.run_insns(low.insns, dram, hw, check_races=overlap)
        first = dram_map.output * hw.out_elem_bytes
        outputs.append(dram[first : first + wl.co_blocks * 196 * hw.out_elem_bytes].copy())
        if overlap:
            assert sum(getattr(i, "overlap", False) for i in low.insns) > 0
    assert np.array_equal(outputs[0], outputs[1])


def test_early_tile_starts_keep_resets_off_the_gemm_pipe(rng):
    """Two ACC slots per thread, two chunks a tile, eight groups of 196-row tiles: every tile
    starts on the ALU (a MUL by 0, then its bias), none with a GEMM reset, only the first
    group's starts come before the first GEMM (the others' beside the GEMMs of the group
    before); race-free, and exact against the reference."""
    from pyvta.isa import AluInsn, AluOp, GemmInsn

    hw, wl = HwConfig(), ConvWorkload(28, 28, 64, 64, 3, 3, 1, 1)
    ep, c = Epilogue(bias=True, shift=8, lo=-128, hi=127), ConvConfig(7, 28, 2, 1)
    dram_map = DramMap.disjoint(wl, hw)
    low = lower_conv2d(wl, ep, c, hw, dram_map)
    gemms = [i for i, x in enumerate(low.insns) if isinstance(x, GemmInsn)]
    resets = [i for i in gemms if low.insns[i].reset_reg]
    muls = [
        i for i, x in enumerate(low.insns) if isinstance(x, AluInsn) and x.alu_opcode is AluOp.MUL
    ]
    assert not resets and len(muls) == 16  # 4 channel tiles x 4 spatial tiles
    assert sum(m < gemms[0] for m in muls) == 2  # the first group's two threads
    dram = np.random.default_rng(5).integers(0, 256, 1 << 23, dtype=np.uint8)
    uops = np.frombuffer(encode_uops(low.uops, hw), np.uint8)
    dram[dram_map.uops * 4 : dram_map.uops * 4 + uops.size] = uops
    sim.run_insns(low.insns, dram, hw, check_races=True)
    run_and_check(wl, ep, rng, c)


def test_strided_1x1_loads_only_the_rows_it_reads(rng):
    """A 1x1 kernel with stride 2 and no padding reads every other input row: the input loads
    skip the others (half the INP traffic), and the result stays exact."""
    wl = ConvWorkload(28, 28, 64, 128, 1, 1, 2, 0)
    c = ConvConfig(2, 14, 4, 8, 2)
    low = lower_conv2d(wl, Epilogue.requant(8), c, HwConfig(), DramMap.disjoint(wl, HwConfig()))
    inp = [i for i in low.insns if getattr(i, "memory_type", None) is MemType.INP]
    assert inp and all(i.x_stride == 2 * wl.width and i.y_size == c.tile_h for i in inp)
    run_and_check(wl, Epilogue.requant(8), rng, c)


def test_strided_1x1_threads_share_inputs_and_the_first_weights_come_in_parts(rng):
    """Two channel tiles on two threads, one spatial tile, two chunks: each chunk's input is
    loaded once for both threads (``config.shared_inputs``), the first chunk's weights of each
    thread in two loads with a GEMM each (``config.first_chunk_parts``); the cost model counts
    the same transfers; race-free and exact against the reference."""
    from pyvta.compiler.backend.vta.cost import conv_cost
    from pyvta.isa import GemmInsn

    hw, wl = HwConfig(), ConvWorkload(14, 14, 64, 128, 1, 1, 2, 0)
    ep, c = Epilogue.requant(8), ConvConfig(7, 7, 2, 4, 2, ("oh", "co"))
    dram_map = DramMap.disjoint(wl, hw)
    low = lower_conv2d(wl, ep, c, hw, dram_map)
    loads = {
        m: sum(getattr(i, "memory_type", None) is m and not i.is_store for i in low.insns)
        for m in (MemType.INP, MemType.WGT)
    }
    gemms = [i for i in low.insns if isinstance(i, GemmInsn) and not i.reset_reg]
    assert loads[MemType.INP] == 2 * c.tile_ci  # two chunks, once for both threads
    assert loads[MemType.WGT] == 2 * 2 + 2  # per thread and chunk, + the second parts
    assert len(gemms) == 2 * 2 + 2
    cost = conv_cost(wl, ep, c, hw)
    assert (cost.inp_loads, cost.wgt_loads) == (loads[MemType.INP], loads[MemType.WGT])
    dram = np.random.default_rng(5).integers(0, 256, 1 << 23, dtype=np.uint8)
    uops = np.frombuffer(encode_uops(low.uops, hw), np.uint8)
    dram[dram_map.uops * 4 : dram_map.uops * 4 + uops.size] = uops
    sim.run_insns(low.insns, dram, hw, check_races=True)
    run_and_check(wl, ep, rng, c)
