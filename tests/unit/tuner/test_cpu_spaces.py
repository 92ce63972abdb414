"""The CPU conv templates' big tuning spaces: random points build correct kernels, the knobs'
defaults build the loops of before (so untuned speed is unchanged), records logged in the older
spaces still read, and the valid-point count agrees with visiting every point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler.ops.cpu import nchwc, nchwc_direct
from pyvta.compiler.ops.cpu.groups import GroupSpan
from pyvta.compiler.ops.cpu.winograd import WinogradKnobs
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.targets.cpu.kernels import ConvWorkload, conv_schedule, default_direct_knobs
from pyvta.tuner import cpu, cpu_measure, cpu_pointwise
from pyvta.tuner.log import TuningLog, apply_best, make_record, read_records
from pyvta.tuner.measure import MeasureResult
from pyvta.tuner.space import ChoiceKnob, ConfigSpace, TileKnob
from pyvta.tuner.task import Task

LEGACY_DIRECT_KNOBS = ("ow_block", "oc_tile", "unroll_rx", "parallel", "flat")

# small layers of the shapes the network runs: 3x3 / 1x1 stride 1 and 2, the 3-channel stem
DIRECT_LAYERS = [
    ConvWorkload(16, 9, 9, 32, (3, 3), (1, 1), (1, 1, 1, 1), 8, 16),
    ConvWorkload(3, 15, 15, 32, (7, 7), (2, 2), (3, 3, 3, 3), 3, 16),
    ConvWorkload(32, 8, 8, 32, (1, 1), (2, 2), (0, 0, 0, 0), 8, 16),
]


def _valid_points(task: Task, rng: np.random.Generator, n: int) -> list:
    """``n`` distinct random points of ``task``'s space that its ``problem`` accepts."""
    out: dict = {}
    while len(out) < n:
        cfg = task.space.get(int(task.space.sample(rng, 1)[0]))
        if task.space.problem(cfg) is None:
            out[cfg.index] = cfg
    return list(out.values())


def _check_points(task: Task, configs) -> None:
    """Build each config, run it on seeded random inputs (the output first filled with NaN:
    every element must be written) and compare with the template's float64 reference."""
    rng = np.random.default_rng(0)
    for cfg in configs:
        sch, args = task.instantiate(cfg)
        mod = compiler.build(sch, args, cache_dir=None, num_threads=2)
        arrays = [rng.standard_normal(a.shape).astype(np.float32) for a in args]
        arrays[-1][...] = np.nan
        mod(*arrays)
        try:
            cpu_measure.check_output({}, task, arrays)
        except Exception as e:
            raise AssertionError(f"{task.key} {cfg.to_dict()}: {e}") from None


@pytest.mark.parametrize("wl", DIRECT_LAYERS, ids=lambda wl: wl.key)
def test_random_direct_configs_compute_the_conv(wl, seed):
    rng = np.random.default_rng(seed)
    task = cpu.nchwc_conv_tasks(wl)[0]
    print(f"{task.key}: {task.space.size} points, seed {seed}")
    _check_points(task, _valid_points(task, rng, 3))


def test_the_direct_spaces_of_resnet18_hold_a_million_valid_points():
    """Every ResNet-18 layer C1-C12, blocked as the network blocks it on this host."""
    for name, wl in cpu.resnet18_cpu_workloads().items():
        task = cpu.nchwc_conv_tasks(wl)[0]
        valid = cpu.direct_valid_count(task)
        print(f"{name}: {task.space.size} points, {valid} valid")
        assert 10**6 <= valid < task.space.size, name


def _old_schedule(wl: ConvWorkload, knobs: dict, residual: bool):
    """``(sch, args)`` of ``wl``'s direct conv scheduled the way the template did before its
    cache-tile knobs came (the same compute, the old primitives replayed on a fresh schedule)."""
    from pyvta.compiler.ops.cpu.conv2d import schedule_register_tile

    k = nchwc_direct.NchwcConvKnobs(**knobs)
    _, args = conv_schedule(wl, {"template": "direct", "knobs": knobs}, (0.0, 6.0), residual)
    s = create_schedule(args[-1])
    out, conv = s[args[-1]], s[s.tensor("conv")]
    dp = s[s.tensor("data.pad")] if wl.nchw_input or any(wl.pads) else None
    conv.set_scope("local")
    xo, xi = out.split("x", k.ow_block)
    fo, fi = out.split("fi", k.oc_tile or wl.ob)
    out.reorder(*(("n", "f") if k.flat else ("n", "f", "y")), xo, fo, xi, fi)
    conv.compute_at(out, fo)
    schedule_register_tile(conv, k.unroll_rx, rows=not k.flat)
    out.unroll(xi)
    out.vectorize(fi)
    if dp is not None and not wl.nchw_input:  # an NCHW input's padding rows: LLVM's
        dp.vectorize("ci")
    if k.parallel:
        out.parallel(out.fuse("f", xo) if k.flat else out.fuse("f", "y"))
        if dp is not None:
            dp.parallel(dp.fuse("ch", "y"))
    return s, args


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("unroll_rx", [False, True])
def test_default_direct_knobs_build_the_loops_of_before(flat, unroll_rx):
    """The untuned knobs (``NchwcConvKnobs.for_target``, new knobs at their defaults, one
    output block per tile) and an old-style knob dict lower to exactly the loop IR of the old schedule."""
    layers = DIRECT_LAYERS + [
        ConvWorkload(3, 20, 20, 16, (7, 7), (2, 2), (3, 3, 3, 3), 3, 16, nchw_input=True),
        ConvWorkload(64, 7, 7, 64, (3, 3), (1, 1), (1, 1, 1, 1), 16, 16),
    ]
    for wl in layers:
        full = default_direct_knobs(wl)
        assert set(full) == set(nchwc_direct.NchwcConvKnobs().to_dict())
        # one output block per tile (AVX-512's untuned tile spans two: a knob the old
        # schedule has not)
        full.update(flat=flat, unroll_rx=unroll_rx, oc_blocks=1)
        old = {k: full[k] for k in LEGACY_DIRECT_KNOBS}
        for residual in (False, True):
            want = str(compiler.lower(*_old_schedule(wl, old, residual)))
            for knobs in (full, old):
                sch = {"template": "direct", "knobs": knobs}
                got = str(compiler.lower(*conv_schedule(wl, sch, (0.0, 6.0), residual)))
                assert got == want, f"{wl.key} {knobs}"


def _legacy_direct_space(task: Task) -> ConfigSpace:
    """The direct template's space before the cache-tile knobs: its first three knobs."""
    return ConfigSpace(task.space.knobs[:3])


def test_an_old_direct_record_reads_with_the_new_knobs_at_their_defaults(tmp_path):
    wl = DIRECT_LAYERS[0]
    task = cpu.nchwc_conv_tasks(wl)[0]
    old_space = _legacy_direct_space(task)
    assert task.space.legacy(["tile", "unroll_rx", "flat"]).signature() == old_space.signature()
    old_cfg = old_space.get(len(old_space) - 1)  # the widest tile, unroll_rx, flat
    line = {
        "v": 1, "task": task.key, "space": old_space.signature(), "index": old_cfg.index,
        "config": old_cfg.to_dict(), "costs": [1e-3], "cost": 1e-3, "error": None, "msg": "",
        "build_s": 0.1, "ts": 1.0, "unit": "s", "target": cpu.cpu_measured_on(),
    }  # fmt: skip
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps(line) + "\n")
    (rec,) = read_records(log, task)
    assert rec.matches(task) and rec.problem(task) is None
    defaults = {k.name: k.default for k in task.space.knobs[3:]}
    assert rec.config == {**old_cfg.to_dict(), **defaults}
    best = apply_best(log, task)
    assert best.index == rec.index and best == task.space.config(old_cfg.to_dict())
    # its schedule is the old one: the same loops as the old knob dict
    sch = cpu.schedule_of(task, best)
    old_knobs = cpu.schedule_of_template("direct", old_cfg)
    lowered = [str(compiler.lower(*conv_schedule(wl, s))) for s in (sch, old_knobs)]
    assert lowered[0] == lowered[1]
    # a record of another space (another host's tiles) is not taken for this one
    other = {**line, "space": "0" * 12}
    log.write_text(json.dumps(other) + "\n")
    assert read_records(log, task) == []
    # and a new record appends beside the old one and reads back as itself
    log.write_text(json.dumps(line) + "\n")
    cfg = _valid_points(task, np.random.default_rng(1), 1)[0]
    with TuningLog(log) as w:
        w.append(make_record(task, cfg, MeasureResult(costs=(5e-4,))))
    recs = read_records(log, task)
    assert [r.index for r in recs] == [rec.index, cfg.index]
    assert apply_best(log, task) == cfg


def test_shipped_logs_read_in_the_new_spaces():
    """The shipped CPU logs' records of this host's feature level read as points of today's
    spaces (their old-space records upgraded), for the direct template."""
    from pyvta.tuner.cpu_network import pretuned_cpu_log

    here = cpu.cpu_measured_on().split()[1]
    found = 0
    for model in ("resnet18", "mobilenet"):
        log = pretuned_cpu_log(f"{model}_224")
        for line in read_records(log):
            if not line.task_key.startswith("cpu.conv2d_nchwc") or line.target.split()[1] != here:
                continue
            args = json.loads(
                line.task_key[line.task_key.index("[") : line.task_key.index("]") + 1]
            )
            task = cpu.CONV2D_NCHWC.task(*args)
            recs = read_records(log, task)
            assert recs and all(r.matches(task) for r in recs), line.task_key
            found += 1
    if not found:
        pytest.skip(f"the shipped logs have no direct records measured at {here}")


SMALL_DIRECT = ConvWorkload(16, 4, 4, 32, (3, 3), (1, 1), (1, 1, 1, 1), 8, 16)


def _small_straddling() -> ConvWorkload:
    """Two groups of one and a half blocks of one vector (24 in 16s on AVX-512, 12 in 8s on
    AVX2): tiles of 3 blocks read their channels exactly (root padding only)."""
    from pyvta.compiler.targets.cpu.kernels import host_lanes

    b = host_lanes()
    span = GroupSpan(2, 3 * b // 2, 3 * b // 2)
    return ConvWorkload(3 * b, 4, 4, 3 * b, (3, 3), (1, 1), (1,) * 4, b, b, groups=span)


def _small_direct_task(keep: dict, wl: ConvWorkload = SMALL_DIRECT) -> Task:
    """A small layer's direct task with only the first ``keep[name]`` values of some knobs."""
    task = cpu.nchwc_conv_tasks(wl)[0]
    knobs = []
    for k in task.space.knobs:
        n = keep.get(k.name)
        if n is not None and k.name == "tile":
            k = TileKnob(k.name, k.parts, k.values[:n])
        elif n is not None:
            k = ChoiceKnob(k.name, k.values[:n], default=k.default)
        knobs.append(k)
    return Task(task.template, task.args, ConfigSpace(knobs, task.space.problem_fn))


@pytest.mark.parametrize("straddling", [False, True], ids=["dense", "straddling"])
def test_direct_valid_count_agrees_with_visiting_every_point(straddling):
    """``direct_valid_count`` on a space small enough to visit (a small layer, fewer values of
    the knobs that do not interact with the others) equals counting ``problem`` None; for
    groups straddling the blocks, their exact tile's points too (root padding, their own
    reduction's chunks and unrolling)."""
    keep = {"tile": 2, "tile_x": 3, "reduce_order": 3, "unroll_ry": 1}
    keep.update(unroll_rci=5 if straddling else 1, pad_at=2, rco_block=2)
    if straddling:
        keep.update(outer_order=2, inner_order=2, tile_f=2)
    small = _small_direct_task(keep, _small_straddling() if straddling else SMALL_DIRECT)
    assert 10_000 < small.space.size < 100_000, small.space
    visited = sum(small.space.problem(small.space.get(i)) is None for i in range(small.space.size))
    assert 0 < visited < small.space.size
    assert cpu.direct_valid_count(small) == visited
    if straddling:  # the exact tile's points are there, only with root padding
        exact = [small.space.get(i) for i in range(0, small.space.size, 7)]
        exact = [c for c in exact if c["oc_blocks"] == 3]
        assert exact and any(small.space.problem(c) is None for c in exact)
        assert all(small.space.problem(c) for c in exact if c["pad_at"] != "root")


def test_the_unroll_bound_refuses_points_and_the_count_agrees(monkeypatch):
    """Past ``MAX_UNROLLED_FMAS`` (lowered to 40 here, so a small layer reaches it) a point is
    refused with the product named; ``direct_valid_count`` still equals visiting every point
    of a space whose unrolling knobs keep all their values."""
    monkeypatch.setattr(cpu, "MAX_UNROLLED_FMAS", 40)
    keep = {"tile_f": 1, "tile_y": 1, "tile_x": 1, "outer_order": 2, "inner_order": 2}
    small = _small_direct_task({**keep, "reduce_order": 2, "pad_at": 1, "rco_block": 1})
    assert 1_000 < small.space.size < 100_000, small.space
    whys = [small.space.problem(small.space.get(i)) for i in range(small.space.size)]
    unrolled = [w for w in whys if w and "vector FMAs unrolled" in w]
    print(f"{small.space.size} points, {whys.count(None)} valid, {len(unrolled)} past the bound")
    assert unrolled and "at most 40" in unrolled[0]
    assert 0 < whys.count(None) < small.space.size
    assert cpu.direct_valid_count(small) == whys.count(None)
    wide = cpu.direct_knobs({**small.space.get(0).as_dict(), "unroll_rx": True, "unroll_ry": True})
    assert wide.unrolled_fmas((3, 3), 16, 16) == 9 * small.space.get(0)["tile"][0]


def test_random_points_are_drawn_among_valid_ones(seed):
    """``sample_unique`` (random search's draws) of a space with a ``problem`` gives valid,
    distinct points only, though most of the direct space's points are not valid."""
    rng = np.random.default_rng(seed)
    task = cpu.nchwc_conv_tasks(cpu.resnet18_cpu_workloads()["C9"])[0]
    raw = task.space.valid_mask(task.space.sample(rng, 400))
    assert 0 < raw.mean() < 0.5
    drawn = task.space.sample_unique(rng, 100, exclude={0, 1})
    assert len(set(drawn)) == 100 and not {0, 1} & set(drawn)
    assert task.space.valid_mask(drawn).all()


WINOGRAD_LAYERS = [
    ConvWorkload(32, 9, 9, 32, (3, 3), (1, 1), (1, 1, 1, 1), 16, 16),
    ConvWorkload(16, 6, 7, 32, (3, 3), (1, 1), (1, 1, 1, 1), 8, 16),
]
POINTWISE_LAYERS = [
    ConvWorkload(256, 4, 4, 32, (1, 1), (1, 1), (0, 0, 0, 0), 16, 16),  # passes of 8 blocks
    ConvWorkload(48, 7, 7, 32, (1, 1), (1, 1), (0, 0, 0, 0), 16, 16),
]


def _winograd_error(task: Task, direct: Task, cfg, w: np.ndarray, rng) -> tuple[float, list]:
    """The relative error of ``cfg``'s Winograd kernel (on the OIHW weights ``w`` transformed
    for its tiles; seeded random data and bias, the output first NaN) against the direct
    template's float64 reference of the untransformed weights, and the kernel's arguments."""
    from pyvta.compiler.ops.cpu.winograd import transform_weights

    sch, args = task.instantiate(cfg)
    mod = compiler.build(sch, args, cache_dir=None, num_threads=2)
    data = rng.standard_normal(args[0].shape).astype(np.float32)
    bias = rng.standard_normal(args[2].shape).astype(np.float32)
    out = np.full(args[-1].shape, np.nan, np.float32)
    mod(data, transform_weights(w, cfg["tile"][1], cfg["out_tile"]), bias, out)
    packed = nchwc.pack_conv_weights(w, *direct.args[-2:])
    want = cpu._nchwc_reference([data, packed, bias, out], *direct.args)
    return float(np.abs(out - want).max() / np.abs(want).max()), args


@pytest.mark.parametrize("wl", WINOGRAD_LAYERS, ids=lambda wl: wl.key)
def test_random_winograd_configs_compute_the_conv(wl, seed):
    """The kernel of each random point, on weights transformed for its ``k_block``, equals
    the direct reference of the untransformed weights."""
    rng = np.random.default_rng(seed)
    task = cpu.nchwc_conv_tasks(wl)[1]
    assert task.name == cpu.WINOGRAD_NCHWC.name
    direct = cpu.nchwc_conv_tasks(wl)[0]
    print(f"{task.key}: {task.space.size} points, seed {seed}")
    w = rng.standard_normal((wl.o, wl.c, 3, 3)).astype(np.float32)
    for cfg in _valid_points(task, rng, 3):
        err, _ = _winograd_error(task, direct, cfg, w, rng)
        assert err < 1e-4, (cfg.to_dict(), err)


@pytest.mark.parametrize("wl", WINOGRAD_LAYERS, ids=lambda wl: wl.key)
def test_winograd_with_4x4_output_tiles_computes_the_conv(wl, seed):
    """``out_tile`` 4 (F(4x4, 3x3), 6x6 input tiles) on heights and widths that 4 does not
    divide: every output written, within float32 rounding of the direct reference."""
    rng = np.random.default_rng(seed)
    task, direct = cpu.nchwc_conv_tasks(wl)[1], cpu.nchwc_conv_tasks(wl)[0]
    tiles = [t for t in task.space.knobs[0].values if t[1] == wl.ob][:1]
    w = rng.standard_normal((wl.o, wl.c, 3, 3)).astype(np.float32)
    for tile in tiles:
        cfg = task.space.config({"tile": tile, "out_tile": 4})
        assert task.space.problem(cfg) is None, cfg.to_dict()
        err, args = _winograd_error(task, direct, cfg, w, rng)
        assert args[1].shape[:2] == (6, 6)
        print(f"{task.key} tile {tile} out_tile 4: relative error {err:.2e}")
        assert err < 1e-4, (cfg.to_dict(), err)


def _logged_in(old_space, old_cfg, task, log):
    """A record of ``old_cfg``, a point of the older ``old_space``, logged into ``log`` as a run of
    that space wrote it, read back as a record of ``task`` (today's space)."""
    rec = make_record(task, task.space.config(old_cfg.to_dict()), MeasureResult((1e-3,)))
    line = json.loads(rec.to_json())
    line.update(space=old_space.signature(), index=old_cfg.index, config=old_cfg.to_dict())
    log.write_text(json.dumps(line) + "\n")
    (got,) = read_records(log, task)
    return got


def test_untuned_tiles_are_points_of_the_pointwise_and_depthwise_spaces(tmp_path):
    """The compiler's untuned pointwise and depthwise tiles are points of their spaces (a
    search can start from them), the tiles the spaces had before still the first ones, so a
    record logged in the older space reads as the same point (``TileKnob.before``)."""
    import onnx

    from pyvta.compiler.graph import zoo
    from pyvta.tuner.cpu_measure import cpu_target_info
    from pyvta.tuner.cpu_network import _default_point, cpu_network_layers, default_in_space

    path = tmp_path / "mobilenet_32.onnx"
    onnx.save(zoo.mobilenet(size=32, width=8, classes=10, seed=3), path)
    checked = 0
    for layer in cpu_network_layers(path):
        for task in cpu.nchwc_conv_tasks(layer.workload):
            if task.name not in (cpu.POINTWISE_NCHWC.name, cpu.DEPTHWISE_NCHWC.name):
                continue
            assert default_in_space(task, layer), task.key
            knob = task.space.knobs[0]
            old = knob.legacy()
            assert old.values == knob.values[: len(old.values)]
            point = _default_point(task, layer)
            if tuple(point["tile"]) in old.values:
                continue
            checked += 1  # the untuned tile was added: a record of the old space still reads
            old_space = ConfigSpace([old, *task.space.knobs[1:]])
            old_cfg = old_space.config({**point.to_dict(), "tile": old.values[-1]})
            got = _logged_in(old_space, old_cfg, task, tmp_path / f"old{checked}.jsonl")
            assert got.config == old_cfg.to_dict()
            assert got.index == task.space.config(old_cfg.to_dict()).index
    if not checked:  # a host-dependent premise: the untuned tiles follow the vector width
        pytest.skip(
            "every untuned tile of this network is already a point of the older spaces on this"
            f" host's feature level ({cpu_target_info()}): no added tile to read an old record of"
        )


@pytest.mark.parametrize("wl", POINTWISE_LAYERS, ids=lambda wl: wl.key)
def test_random_pointwise_configs_compute_the_conv(wl, seed):
    rng = np.random.default_rng(seed)
    task = cpu.nchwc_conv_tasks(wl)[-1]
    assert task.name == cpu.POINTWISE_NCHWC.name
    print(f"{task.key}: {task.space.size} points, seed {seed}")
    _check_points(task, _valid_points(task, rng, 3))


def test_pointwise_space_offers_tiles_of_several_output_blocks(seed):
    """The pointwise space's ``oc_blocks`` knob: default 1 (what records logged before the
    knob ran), values dividing the output blocks; the untuned point is the compiler's tile (two
    blocks of one vector each on AVX-512, one block of two vectors on AVX2); its valid points
    of several blocks fit the registers, and random ones compute the conv."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc import VECTOR_BLOCK_TILE_BLOCKS
    from pyvta.compiler.ops.cpu.pointwise import PointwiseKnobs
    from pyvta.tuner.cpu_network import CpuLayer, _default_point

    wl = ConvWorkload(64, 7, 7, 64, (1, 1), (1, 1), (0, 0, 0, 0), 16, 16)  # 4 output blocks
    task = cpu.nchwc_conv_tasks(wl)[-1]
    knob = task.space.knobs[-1]
    assert (knob.name, knob.values, knob.default) == ("oc_blocks", [1, 2, 4], 1)
    t = CpuTarget.host()
    untuned = VECTOR_BLOCK_TILE_BLOCKS if t.vector_lanes("float32") == 16 else 1
    default = _default_point(task, CpuLayer(wl, 1))
    assert default["oc_blocks"] == untuned
    # the compiler's tile: 49 pixels as 7 tiles of 7 on AVX-512, 10 tiles of 5 on AVX2 (at
    # most 6 pixels of two vectors); with SSE's 4 lanes, 3 pixels of four vectors
    pixels = PointwiseKnobs.for_target(t, 49, 16, 4).p_block
    assert default["tile"] == (pixels, 16)
    assert pixels == {16: 7, 8: 5, 4: 3}[t.vector_lanes("float32")]
    room, vecs = t.vector_registers - nchwc.SPARE_REGISTERS, max(1, 16 // t.vector_lanes("float32"))
    rng = np.random.default_rng(seed)
    print(f"{task.key}: seed {seed}")
    blocks = []
    for cfg in _valid_points(task, rng, 60):
        if cfg["oc_blocks"] > 1:
            assert cfg["tile"][0] * cfg["oc_blocks"] * vecs <= room, cfg.to_dict()
            blocks.append(cfg)
    if vecs > 1:  # AVX2's 16-channel blocks: only the fewest pixels fit several blocks
        assert {c["tile"][0] for c in blocks} <= set(cpu_pointwise.FEW_PIXELS), blocks[:3]
    assert blocks, "no valid point of several blocks among 60"
    _check_points(task, blocks[:3])


@pytest.mark.parametrize(
    "c,hw,o",
    [(240, 14, 240), (240, 14, 528), (480, 7, 480), (528, 7, 528), (96, 28, 96), (32, 112, 16),
     (512, 7, 48),  # these two: few tiles of output blocks, pixels across threads
     (560, 14, 560)],  # 35 blocks: tiles of 5 (RegNetX-4.0GF)
)  # fmt: skip
def test_the_untuned_pointwise_schedule_is_a_valid_point_of_its_space(c, hw, o):
    """RegNetX's 1x1 layers and two of few output blocks: the compiler's untuned knobs are a
    point the space measures (a ``k_blocks`` of 0 where ``K_BLOCKS`` also runs one pass, here
    because 8 does not divide 15 or 33 input blocks, is the space's duplicate of it: the
    untuned knobs give ``K_BLOCKS``; pixels across threads need one pass)."""
    from pyvta.compiler.ops.cpu.pointwise import K_BLOCKS, PointwiseKnobs, in_passes
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.cpu_network import CpuLayer, _default_point

    wl = ConvWorkload(c, hw, hw, o, (1, 1), (1, 1), (0, 0, 0, 0), 16, 16)
    task = cpu.nchwc_conv_tasks(wl)[-1]
    knobs = default_conv_schedule(wl)["knobs"]
    point = _default_point(task, CpuLayer(wl, 1))
    assert task.space.problem(point) is None, (knobs, task.space.problem(point))
    same = ("k_blocks", "oc_blocks", "tile_order", "parallel_loops")
    assert {k: point[k] for k in same} == {k: knobs[k] for k in same}
    if (c // 16) % K_BLOCKS:  # one pass, by the K_BLOCKS the space offers
        assert knobs["k_blocks"] == K_BLOCKS and not in_passes(PointwiseKnobs(**knobs), wl)


def test_pointwise_records_of_the_older_spaces_read(tmp_path):
    """Records logged before ``oc_blocks`` (the five knobs, the tile knob with the untuned
    tile appended) and before every knob but the tile (its oldest tiles) read as today's
    points, ``oc_blocks`` 1, whichever tiles the tile knob has gained since; and records
    logged before the tile knob's last tiles (``FEW_PIXELS``, on a host whose blocks are
    several vectors) as the same points, ``oc_blocks`` as they were."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.pointwise import PointwiseKnobs
    from pyvta.tuner.cpu_nchwc import with_tile

    wl = POINTWISE_LAYERS[1]
    task = cpu.nchwc_conv_tasks(wl)[-1]
    knobs = task.space.knobs
    assert knobs[-1].name == "oc_blocks"
    oldest = knobs[0]
    while (older := oldest.legacy()) is not oldest:
        oldest = older
    untuned = PointwiseKnobs.for_target(CpuTarget.host(), wl.h * wl.w, wl.ob).p_block
    five = with_tile(oldest, (untuned, wl.ob))  # the tile knob before oc_blocks came
    for i, old_space in enumerate([ConfigSpace([five, *knobs[1:-1]]), ConfigSpace([oldest])]):
        old_cfg = old_space.get(len(old_space) - 1)  # the last tile: the untuned one, if added
        got = _logged_in(old_space, old_cfg, task, tmp_path / f"old{i}.jsonl")
        assert got.config == task.space.config(old_cfg.to_dict()).to_dict()
        assert got.config["oc_blocks"] == 1
    before_few = ConfigSpace([knobs[0].legacy(), *knobs[1:]])  # every knob, the tiles before
    old_cfg = before_few.get(len(before_few) - 1)  # the last tile, the most blocks
    got = _logged_in(before_few, old_cfg, task, tmp_path / "before_few.jsonl")
    assert got.config == old_cfg.to_dict() and got.config["oc_blocks"] > 1
    assert got.index == task.space.config(old_cfg.to_dict()).index


@pytest.mark.parametrize("template", ["winograd", "pointwise"])
def test_old_winograd_and_pointwise_records_read_and_build_the_old_loops(template, tmp_path):
    """A record of the one-knob (tile) space reads as today's point with the new knobs at
    their defaults, and its schedule lowers to the loops of the old knob dict."""
    wl = (WINOGRAD_LAYERS if template == "winograd" else POINTWISE_LAYERS)[0]
    task = next(t for t in cpu.nchwc_conv_tasks(wl) if template in t.name)
    old_space = ConfigSpace([task.space.knobs[0].legacy()])
    old_cfg = old_space.get(len(old_space) // 2)
    got = _logged_in(old_space, old_cfg, task, tmp_path / "old.jsonl")
    assert got.config == task.space.config(old_cfg.to_dict()).to_dict()
    assert set(got.config) == {k.name for k in task.space.knobs}
    old_knobs = cpu.schedule_of_template(template, old_cfg)
    assert set(old_knobs["knobs"]) < set(cpu.schedule_of(task, got.config)["knobs"])
    lowered = [
        str(compiler.lower(*conv_schedule(wl, s)))
        for s in (cpu.schedule_of(task, got.config), old_knobs)
    ]
    assert lowered[0] == lowered[1]


def test_an_old_in_network_choices_file_builds_its_schedules(tmp_path):
    """Schedules chosen in the network before the new knobs (an in-network choices file of
    old knob dicts) still read and build, the new knobs at their defaults."""
    from pyvta.tuner.in_network import in_network_choices, in_network_path

    direct, wino = DIRECT_LAYERS[0], WINOGRAD_LAYERS[0]
    old = {
        direct.key: {"template": "direct", "knobs": {"ow_block": 5, "oc_tile": 16,
                     "unroll_rx": True, "parallel": True, "flat": False}},
        wino.key: {"template": "winograd", "knobs": {"p_block": 6, "k_block": 16,
                   "parallel": True}},
    }  # fmt: skip
    log = tmp_path / "cpu.jsonl"
    doc = {"v": 1, "machine": cpu.cpu_measured_on(), "threads": 2, "rounds": 1}  # version 1
    doc["layers"] = {k: {"chosen": s, "candidates": []} for k, s in old.items()}
    in_network_path(log).write_text(json.dumps(doc))
    chosen = in_network_choices(log)
    assert chosen == old
    for wl in (direct, wino):
        sch = chosen[wl.key]
        knobs_type = {"direct": nchwc_direct.NchwcConvKnobs, "winograd": WinogradKnobs}[
            sch["template"]
        ]
        full = {"template": sch["template"], "knobs": knobs_type(**sch["knobs"]).to_dict()}
        assert set(full["knobs"]) > set(sch["knobs"])
        lowered = [str(compiler.lower(*conv_schedule(wl, s))) for s in (sch, full)]
        assert lowered[0] == lowered[1]


@pytest.mark.slow
@pytest.mark.parametrize("wl", DIRECT_LAYERS + POINTWISE_LAYERS, ids=lambda wl: wl.key)
def test_many_random_direct_and_pointwise_configs_compute_the_conv(wl, seed):
    """More of the above: 20 random points of each template of each small layer (Winograd's
    have no reference of their own; the fast test checks them against the direct one)."""
    rng = np.random.default_rng(seed + 1)
    for task in cpu.nchwc_conv_tasks(wl):
        if task.name == cpu.WINOGRAD_NCHWC.name:
            continue
        print(f"{task.key}: seed {seed + 1}")
        _check_points(task, _valid_points(task, rng, 20))


# Output blocks of 8 channels (one AVX2 vector), three of them: on AVX2 the compiler's untuned
# register tile spans several (``NchwcConvKnobs.for_target``), on AVX-512 one.
BLOCK_LAYER = ConvWorkload(16, 10, 10, 24, (3, 3), (1, 1), (1, 1, 1, 1), 8, 8)


@pytest.fixture(params=["host", "avx2"], ids=["host", "PYVTA_CPU_FEATURES=avx2"])
def features(request, monkeypatch):
    from pyvta import host_cpu

    if request.param == "avx2" and "avx2" not in host_cpu.levels_met(host_cpu.host("host")[2]):
        pytest.skip("needs an x86 host that runs AVX2")
    monkeypatch.setenv(host_cpu.FEATURES_ENV, request.param)
    return request.param


def test_a_tuned_config_of_two_output_blocks_builds_runs_and_reaches_the_network(
    features, tmp_path
):
    """A point with ``oc_blocks`` 2 (three blocks: the last tile short) is valid, builds other
    loops than its one-block twin, computes the conv (flat and not), and a log's record of it
    gives the network that schedule (not the compiler's untuned block count)."""
    from pyvta.tuner.cpu_network import CpuLayer, cpu_schedules

    wl, layer = BLOCK_LAYER, CpuLayer(BLOCK_LAYER, 1)
    task = cpu.nchwc_conv_tasks(wl)[0]
    assert task.space.knob("oc_blocks").values[:2] == [1, 2], task.space
    tile = max(cpu.conv_tiles(wl.out_hw[1], wl.ob, 2))  # the widest tile of two blocks
    cfgs = [
        task.space.config({"tile": tile, "unroll_rx": rx, "flat": flat, "oc_blocks": 2})
        for rx, flat in ((False, False), (True, True))
    ]
    one = task.space.config({**cfgs[0].to_dict(), "oc_blocks": 1})
    print(f"{features}: {task.key} tile {tile}, {task.space.size} points")
    for cfg in cfgs:
        assert task.space.problem(cfg) is None, cfg.to_dict()
        assert cpu.direct_knobs(cfg).oc_blocks == 2
    lowered = [str(compiler.lower(*task.instantiate(c))) for c in (cfgs[0], one)]
    assert lowered[0] != lowered[1]
    _check_points(task, cfgs)
    # a register tile too wide for two blocks' accumulators is refused before building
    wide = max(cpu.conv_tiles(wl.out_hw[1], wl.ob))
    if wide not in cpu.conv_tiles(wl.out_hw[1], wl.ob, 2):
        spill = task.space.config({**cfgs[0].to_dict(), "tile": wide})
        assert "accumulators" in task.space.problem(spill)
    # the network runs what was measured
    log = tmp_path / "tuned.jsonl"
    with TuningLog(log) as w:
        w.append(make_record(task, cfgs[0], MeasureResult(costs=(1e-4,))))
    sched = cpu_schedules(str(log), [layer], in_network=False)[wl.key]
    assert sched["template"] == "direct"
    got = nchwc_direct.NchwcConvKnobs(**sched["knobs"])
    assert got.oc_blocks == 2
    assert got.to_dict() == {**cpu.direct_knobs(cfgs[0]).to_dict(), "parallel": got.parallel}


def test_the_untuned_direct_schedule_is_the_default_point_of_its_space(features):
    """The point a network's tuning starts from (``cpu_network._default_point``) is the
    compiler's untuned direct schedule, its output blocks per tile included: it lowers to
    the same loops."""
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.cpu_network import CpuLayer, _default_point, default_in_space, layer_schedule

    wl, layer = BLOCK_LAYER, CpuLayer(BLOCK_LAYER, 1)
    task = cpu.nchwc_conv_tasks(wl)[0]
    want = default_conv_schedule(wl)
    assert want["template"] == "direct"
    point = _default_point(task, layer)
    print(f"{features}: untuned {want['knobs']}, default point {point.to_dict()}")
    assert point["oc_blocks"] == want["knobs"]["oc_blocks"]
    assert default_in_space(task, layer)
    assert cpu.point_of_schedule(task, want["knobs"]) == point
    assert task.space.problem(point) is None
    got = layer_schedule(task, point, layer)
    lowered = [str(compiler.lower(*conv_schedule(wl, s))) for s in (got, want)]
    assert lowered[0] == lowered[1]
    if features == "avx2":
        assert want["knobs"]["oc_blocks"] > 1  # the layer this test is about


def test_winograd_tiles_of_channels_no_whole_vector_divides(features, seed):
    """24 output channels (no whole AVX-512 vector divides them): the Winograd space takes the
    compiler's channel tile (``kernels.winograd_k_block``), and its point computes the conv."""
    from pyvta.compiler.targets.cpu.kernels import host_lanes, winograd_k_block

    rng = np.random.default_rng(seed)
    wl = ConvWorkload(16, 6, 7, 24, (3, 3), (1, 1), (1, 1, 1, 1), 8, 8)
    direct, task = cpu.nchwc_conv_tasks(wl)[:2]
    assert task.name == cpu.WINOGRAD_NCHWC.name
    k_blocks = {t[1] for t in task.space.knobs[0].values}
    lanes = host_lanes()
    print(f"{features}: seed {seed}, k_blocks {sorted(k_blocks)}, lanes {lanes}")
    assert lanes in k_blocks if 24 % lanes == 0 else k_blocks == {winograd_k_block(24, lanes)}
    (cfg,) = _valid_points(task, rng, 1)
    w = rng.standard_normal((wl.o, wl.c, 3, 3)).astype(np.float32)
    err, _ = _winograd_error(task, direct, cfg, w, rng)
    assert err < 1e-4, (cfg.to_dict(), err)


def test_a_record_from_before_oc_blocks_reads_as_one_block(features, tmp_path):
    """A record of the direct space before the ``oc_blocks`` knob (measured with one block per
    tile, the template's only kind then) reads as the point with ``oc_blocks`` 1 at the same
    index, and the network runs it so, whatever the untuned choice spans."""
    from pyvta.tuner.cpu_network import CpuLayer, layer_schedule

    wl, layer = BLOCK_LAYER, CpuLayer(BLOCK_LAYER, 1)
    task = cpu.nchwc_conv_tasks(wl)[0]
    assert task.space.knobs[-1].name == "oc_blocks"
    old_space = ConfigSpace(task.space.knobs[:-1])
    old_cfg = old_space.config({"tile": max(cpu.conv_tiles(wl.out_hw[1], wl.ob)),
                                "unroll_rx": True, "flat": False, "tile_y": 2})  # fmt: skip
    got = _logged_in(old_space, old_cfg, task, tmp_path / "old.jsonl")
    assert got.config == {**old_cfg.to_dict(), "oc_blocks": 1}
    assert got.index == old_cfg.index
    sched = layer_schedule(task, got.config, layer)
    assert sched["knobs"]["oc_blocks"] == 1
    print(f"{features}: untuned oc_blocks {default_direct_knobs(wl)['oc_blocks']}")
