"""Context features of the VTA conv2d template (``tuner.vta.CONTEXT_NAMES``): one width for every
layer, finite, zero exactly for the points that do not lower, moving the physical way when a
knob changes, and their per-module cycle counts agreeing with the cycle model."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.compiler.backend.vta.config import shared_inputs
from pyvta.isa import HwConfig
from pyvta.tuner.cli_support import RESNET18
from pyvta.tuner.features import ContextFeaturizer, make_featurizer
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.synthetic import TILED_GEMM
from pyvta.tuner.task import InvalidConfig
from pyvta.tuner.tune import tune
from pyvta.tuner.vta import (
    CONTEXT_NAMES,
    VtaCycleBackend,
    conv_config,
    task_layer,
    vta_conv2d_task,
)

SMALL = (14, 14, 64, 64, 3, 1, 1)


def _layer(name: str):
    hw, ic, oc, k, s = RESNET18[name]
    return vta_conv2d_task(hw, hw, ic, oc, k, s, k // 2)


def _point(task, config: dict):
    """The point of ``config``'s tile knobs, the schedule knobs at their defaults."""
    return task.space.config(config)  # the knobs it does not name take their defaults


def _feature(task, config: dict, name: str) -> float:
    return float(task.context(_point(task, config))[CONTEXT_NAMES.index(name)])


def test_one_width_for_every_resnet_layer_and_finite_rows(rng):
    ctx, both = make_featurizer("context"), make_featurizer("context+knob")
    widths = set()
    for name in [f"C{i}" for i in range(2, 13)]:
        task = _layer(name)
        idx = np.array(task.space.sample_unique(rng, 40))
        x = ctx(task, idx)
        assert x.shape == (idx.size, len(CONTEXT_NAMES)) and x.dtype == np.float32
        assert np.isfinite(x).all(), name
        assert x.any(axis=1).sum() > 0, f"{name}: no valid point among 40"
        widths.add((x.shape[1], both(task, idx).shape[1]))
    assert len(widths) == 1, widths
    assert ctx(_layer("C8"), []).shape == (0, len(CONTEXT_NAMES))


def test_zero_rows_exactly_for_points_that_do_not_lower(rng):
    task = vta_conv2d_task(*SMALL)
    backend = VtaCycleBackend()
    idx = task.space.sample_unique(rng, 60)
    x = make_featurizer("context")(task, idx)
    n_invalid = 0
    for i, row in zip(idx, x, strict=True):
        try:
            backend.build(task, task.space.get(i))
            lowers = True
        except InvalidConfig:
            lowers, n_invalid = False, n_invalid + 1
        assert row.any() == lowers, task.space.get(i)
    assert 0 < n_invalid < len(idx)  # both kinds were checked
    # a GEMM hazard (check_fit passes, the lowering refuses): one output pixel, a 3x3 kernel
    # enumerated in the micro-op kernel, so consecutive micro-ops accumulate into one ACC row
    hazard = {"tile_h": 1, "tile_w": 1, "tile_ci": 1, "tile_co": 1, "vthreads": 1}
    config = _point(task, {**hazard, "gemm_loops": "ci,co"})
    with pytest.raises(InvalidConfig, match="hazard"):
        backend.build(task, config)
    assert not task.context(config).any()


def test_features_move_the_physical_way():
    task = _layer("C8")  # 14x14 out, 8 input and 16 output channel blocks, 1x1, stride 2
    base = {"tile_h": 7, "tile_w": 7, "tile_ci": 2, "tile_co": 4, "vthreads": 2}
    base["gemm_loops"] = "oh,co"

    def f(name, **change):
        return _feature(task, {**base, **change}, name)

    # wider channel tiles: the input is reloaded once per pair of channel tiles (the two
    # threads share it, config.shared_inputs), so fewer input bytes per MAC, down to one load
    # per spatial tile from two channel tiles (8 blocks each) on; more weight and accumulator
    # rows on chip
    wl, ep = task_layer(task)
    assert shared_inputs(wl, ep, conv_config(_point(task, base)), HwConfig())
    for name in ("inp_bytes_per_mac", "log2_inp_reload"):
        vals = [f(name, tile_co=co) for co in (1, 2, 4, 8, 16)]
        assert (np.diff(vals[:4]) < 0).all() and vals[4] == vals[3], (name, vals)
    assert f("wgt_occupancy", tile_co=8) == pytest.approx(2 * f("wgt_occupancy"))
    assert f("acc_occupancy", tile_co=8) > f("acc_occupancy")  # (+ the biases, held once)
    # larger spatial tiles (two chunks): weights are reloaded per tile, so fewer weight bytes
    assert f("wgt_bytes_per_mac", tile_h=14) < f("wgt_bytes_per_mac", tile_h=7)
    assert f("log2_tiles", tile_h=14) == f("log2_tiles") - 1
    # one thread holds half the buffers and nothing overlaps: the bound is the modules' sum
    assert f("inp_occupancy", vthreads=1) == pytest.approx(f("inp_occupancy") / 2)
    assert f("log2_bound_over_gemm", vthreads=1) > f("log2_bound_over_gemm")
    # whole dimensions: fraction 1 (log2 0), one chunk
    assert f("log2_frac_co", tile_co=16) == 0 and f("log2_frac_h", tile_h=14) == 0
    assert f("log2_chunks", tile_ci=8, tile_h=1) == 0 and f("log2_chunks") == 2
    one_hot = [f(n) for n in ("gemm_loops_ci_co", "gemm_loops_oh_co", "gemm_loops_ci_oh")]
    assert one_hot == [0, 1, 0]
    assert f("stride") == 2 and f("log2_kernel_elems") == 0


def test_module_cycles_agree_with_the_cycle_model(rng):
    """The per-module counts are the cycle model's busy time less its waits for the DRAM port
    (observed: within 0.5%; the overlap between modules is what they leave out). With the
    epilogue overlapped, the cycle model's compute busy time also holds the pipes' waits for
    each other's ACC bank (rule 7: up to 13% here, while the totals stay within 0.5% of the
    RTL's), which the counts leave out: there only load and store are compared. The loop
    orders and the micro-op mode (``config.schedule_space``) the estimate does not read (their
    own features say which they are): points at their defaults."""
    from pyvta.compiler.backend.vta.config import overlapped

    task = vta_conv2d_task(*SMALL)
    backend = VtaCycleBackend()
    gemm = 4 * 4 * 9 * 14 * 14  # GEMM micro-ops of the layer
    names = {m: CONTEXT_NAMES.index(f"log2_{m}_over_gemm") for m in ("compute", "load", "store")}
    orders = {
        k.name: k.default for k in task.space.knobs if k.default is not None and k.name != "overlap"
    }
    checked = 0
    for i in task.space.sample_unique(rng, 40):
        config = task.space.config({**task.space.get(i).to_dict(), **orders})
        row = task.context(config)
        if not row.any():
            continue
        stream = backend.build(task, config)  # with its micro-ops: the GEMMs' ACC-row holds
        wl, ep, c, hw = task.instantiate(config)
        report = sim.cycles_of(list(stream), hw, dram=stream.dram)
        for m, j in names.items():
            if m == "compute" and overlapped(wl, ep, c, hw):
                continue
            s = report.modules[m]
            assert gemm * 2 ** float(row[j]) == pytest.approx(
                s.busy_cycles - s.dram_stall_cycles, rel=0.01
            ), (m, dict(config))
        checked += 1
    assert checked >= 10


def test_a_template_without_context_fn_is_refused_by_name():
    task = TILED_GEMM.task(64, 64, 64)
    assert task.context(task.space.get(0)) is None
    with pytest.raises(ValueError, match=r"synthetic\.tiled_gemm.*no context_fn.*vta\.conv2d"):
        make_featurizer("context")(task, [0])
    assert isinstance(make_featurizer("context+knob"), ContextFeaturizer)
    with pytest.raises(ValueError, match="context, context\\+knob"):
        make_featurizer("context+loop")


def test_tune_with_context_features(seed):
    task = vta_conv2d_task(*SMALL)
    res = tune(
        task,
        16,
        InProcessMeasurer(VtaCycleBackend(), repeats=1),
        "xgb",
        batch_size=8,
        seed=seed,
        progress=False,
        features="context",
    )
    assert len(res.history) == 16 and np.isfinite(res.best_cost)


def test_model_tuner_never_proposes_a_point_that_does_not_fit(seed):
    from pyvta.tuner.features import fits
    from pyvta.tuner.measure import MeasureResult
    from pyvta.tuner.tuners import make_tuner

    task = vta_conv2d_task(14, 14, 256, 512, 3, 2, 1)  # C10: half its points do not fit
    ok = fits(task, np.arange(task.space.size))
    assert 0 < ok.sum() < task.space.size
    rng = np.random.default_rng(seed)
    tn = make_tuner("xgb", task, seed)
    for _ in range(3):
        batch = tn.next_batch(16)
        assert ok[batch].all(), "proposed a point whose context row says it does not fit"
        tn.update(batch, [MeasureResult(costs=(float(c),)) for c in rng.uniform(1, 2, 16)])
    plain = make_tuner("xgb", task, seed, skip_unfit=False)
    assert not ok[plain.next_batch(64)].all()
