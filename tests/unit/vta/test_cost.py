"""The compiler's analytic cost (``compiler.backend.vta.cost``) against the cycle model on the real
lowering: per module it counts what the cycle model counts, on any ``Timing``; the overlapped
total is close; and ``default`` ranks by it."""

import dataclasses

import numpy as np
import pytest

from pyvta import sim
from pyvta.compiler.backend.vta import Epilogue, lower_conv2d
from pyvta.compiler.backend.vta.config import ConvConfig, FitError, check_fit, fitting_configs
from pyvta.compiler.backend.vta.conv2d import DramMap
from pyvta.compiler.backend.vta.cost import conv_cost, tile_compute_insns, uop_image
from pyvta.compiler.backend.vta.default import estimate_cycles, ranked_configs
from pyvta.compiler.backend.vta.workload import ConvWorkload
from pyvta.isa import GemmInsn, HwConfig, MemInsn, MemType
from pyvta.sim.timing import Timing

HW = HwConfig()
EPILOGUES = {
    "alu bias": Epilogue(bias=True, shift=8, lo=-128, hi=127),
    "gemm bias": Epilogue(bias=True, shift=8, lo=0, hi=127, bias_via_gemm=True),
    "residual after shift": Epilogue(
        bias=True, shift=10, lo=0, hi=127, residual=True, residual_shift=10,
        bias_via_gemm=True, residual_after_shift=True,
    ),
    "alu residual": Epilogue(bias=True, shift=4, residual=True, residual_shift=12),
}  # fmt: skip
WORKLOADS = (ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1), ConvWorkload(28, 28, 64, 128, 1, 1, 2, 0))


def _lowering_configs(wl, ep, rng, n, overlap=True):
    """(config, instructions, DRAM image with the micro-ops) of ``n`` random configs."""
    fitting = fitting_configs(wl, ep, HW)
    out = []
    for i in rng.permutation(len(fitting)):
        c = dataclasses.replace(fitting[i], overlap=overlap)
        dram_map = DramMap.disjoint(wl, HW)
        try:
            low = lower_conv2d(wl, ep, c, HW, dram_map)
        except FitError:
            continue
        out.append((c, low.insns, uop_image(dram_map.uops, low.uops, HW)))
        if len(out) == n:
            return out
    return out


def _module_cycles(report, name):
    s = report.modules[name]
    return s.busy_cycles - s.dram_stall_cycles


@pytest.mark.parametrize("ep_name", EPILOGUES)
@pytest.mark.parametrize("timing", [Timing(), Timing.rtl_testbench()], ids=["board", "testbench"])
@pytest.mark.parametrize("overlap", [False, True], ids=["v0.0.2", "overlap"])
def test_modules_count_what_the_cycle_model_counts(ep_name, timing, overlap, rng):
    """Busy cycles less DRAM-port waits, per module, on two DRAM latencies (observed: within
    0.6%; what is left out is the epilogue's one-micro-op kernels and the program's constants).
    With the epilogue overlapped, within 7% (observed up to 6.4%, on one-pixel tiles with a
    residual): which instructions push a token (and so wait for the pipeline to drain) follows
    the dependencies, not the template (``insert_dep_tokens``)."""
    if overlap and timing != Timing():
        pytest.skip("the overlapped lowering is checked on the board timing only (time budget)")
    if overlap and ep_name == "alu residual":
        pytest.skip(
            "not modelled: the overlapped epilogue's ACC residual loads drain both pipes (observed"
            " up to 10% more compute cycles on one-pixel tiles)"
        )
    ep, checked = EPILOGUES[ep_name], 0
    tolerance = 0.07 if overlap else 0.01
    for wl in WORKLOADS:
        for c, insns, image in _lowering_configs(wl, ep, rng, 2 if overlap else 4, overlap):
            # the micro-ops' rows (read-after-write holds) are costed by both; overlapped, the
            # cycle model would also see the pipes' ACC bank waits (rule 7), which the cost
            # leaves out (observed 11% on a one-channel tile with the ALU bias): those run
            # without the micro-ops replayed, and so without the holds on either side
            t = dataclasses.replace(timing, acc_dst_raw_cycles=1) if overlap else timing
            report = sim.cycles_of(insns, HW, t, dram=None if overlap else image)
            cost = conv_cost(wl, ep, c, HW, t)
            for name, value in (
                ("compute", cost.compute_cycles),
                ("load", cost.load_cycles),
                ("store", cost.store_cycles),
            ):
                assert value == pytest.approx(_module_cycles(report, name), rel=tolerance), (
                    name,
                    wl,
                    c,
                )
            checked += 1
    assert checked >= (3 if overlap else 6)


def test_every_constant_comes_from_the_timing():
    wl, ep = WORKLOADS[0], EPILOGUES["gemm bias"]
    c = ConvConfig(7, 7, 2, 2, 2, ("ci", "co"))
    base = conv_cost(wl, ep, c, HW)
    later = conv_cost(wl, ep, c, HW, Timing(dram_latency_cycles=Timing().dram_latency_cycles + 10))
    insns = lower_conv2d(wl, ep, c, HW, DramMap.disjoint(wl, HW)).insns
    transfers = [  # the load and store modules' (the program's constants included)
        i
        for i in insns
        if isinstance(i, MemInsn)
        and i.memory_type in (MemType.INP, MemType.WGT, MemType.OUT)
        and i.x_size
    ]
    assert len(transfers) > base.inp_loads + base.wgt_loads + base.stores  # + 2 constants
    assert later.dma_latency_cycles - base.dma_latency_cycles == 10 * len(transfers)
    assert later.compute_cycles == base.compute_cycles
    slow_gemm = conv_cost(wl, ep, c, HW, Timing(gemm_cycles_per_uop=2))
    tile = tile_compute_insns(wl, ep, c, check_fit(wl, ep, c, HW))
    gemm_iters = sum(tile.start_gemms) + tile.chunks * tile.chunk_gemm + sum(tile.epilogue_gemms)
    assert slow_gemm.compute_cycles - base.compute_cycles == base.tiles * gemm_iters
    assert slow_gemm.load_cycles == base.load_cycles
    assert estimate_cycles(wl, ep, c, HW, Timing(alu_setup_cycles=50)) > estimate_cycles(
        wl, ep, c, HW
    )


def test_tile_compute_matches_the_lowered_gemms():
    wl, ep = WORKLOADS[1], EPILOGUES["residual after shift"]
    c = ConvConfig(7, 14, 4, 2, 1, ("ci", "co"))
    tile = tile_compute_insns(wl, ep, c, check_fit(wl, ep, c, HW))
    insns = lower_conv2d(wl, ep, c, HW, DramMap.disjoint(wl, HW)).insns
    gemms = [i for i in insns if isinstance(i, GemmInsn)]
    cost = conv_cost(wl, ep, c, HW)
    assert len(gemms) == cost.tiles * (
        len(tile.start_gemms) + tile.chunks + len(tile.epilogue_gemms)
    )
    assert sum(g.reset_reg for g in gemms) == cost.tiles
    assert cost.gemm_cycles == wl.gemm_uops


@pytest.mark.parametrize("wl", WORKLOADS, ids=str)
def test_total_is_close_and_ranks_like_the_cycle_model(wl, rng):
    """Observed with seed 1234: mean error 4% (3x3) and 9% (1x1, whose slowest random configs,
    one-pixel tiles, wait on the DRAM port more than modelled); Spearman rho above 0.95."""
    from scipy.stats import spearmanr

    ep = EPILOGUES["gemm bias"]
    pairs = [
        (conv_cost(wl, ep, c, HW).total_cycles, sim.cycles_of(insns, HW, dram=image).total_cycles)
        for c, insns, image in _lowering_configs(wl, ep, rng, 16)
    ]
    est, cycles = np.array(pairs, float).T
    assert np.mean(np.abs(est - cycles) / cycles) < 0.12
    assert spearmanr(est, cycles).statistic > 0.9


def test_ranking_uses_the_given_timing():
    wl, ep = WORKLOADS[0], EPILOGUES["gemm bias"]
    slow = dataclasses.replace(Timing(), dram_latency_cycles=10 * Timing().dram_latency_cycles)
    ranked = ranked_configs(wl, ep, HW, timing=slow)
    est, c = ranked[0]
    assert est == estimate_cycles(wl, ep, c, HW, slow) > estimate_cycles(wl, ep, c, HW)
    assert est == min(e for e, _ in ranked)
