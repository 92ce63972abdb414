"""The VTA tuning space's schedule knobs (``config.schedule_space``: vthreads 1/2/4, overlap,
tile and chunk loop orders, micro-op mode): seeded random points with a non-default knob, on
small layers, run on the functional simulator bit-exact against the golden conv
(``reference_conv``), their tokens race-free under a reversed module order; the defaults
reproduce the programs of the space before these knobs, and records logged before them still
load (missing knobs = defaults)."""

import dataclasses
import json

import numpy as np
import pytest

from pyvta import sim
from pyvta.compiler.backend.vta import (
    ConvWorkload,
    Epilogue,
    VtaConv2d,
    pack_bias,
    pack_data,
    pack_weights,
    unpack_data,
)
from pyvta.compiler.backend.vta.config import (
    CHUNK_ORDERS,
    TILE_ORDERS,
    UOP_MODES,
    ConvConfig,
    config_space,
)
from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.driver import SimDevice
from pyvta.isa import HwConfig, MemInsn, Module, encode_uops
from pyvta.runtime import layout
from pyvta.tuner import vta as vta_tuner
from pyvta.tuner.log import TuningLog, apply_best, make_record, read_records
from pyvta.tuner.measure import MeasureResult
from pyvta.tuner.space import ChoiceKnob, ConfigSpace
from pyvta.tuner.task import InvalidConfig
from pyvta.tuner.vta import conv_config, vta_conv2d_task, vta_layer_task

SEED = 3407
NEW_KNOBS = {"overlap": True, "tile_order": "co", "chunk_order": "up", "uop_mode": "resident"}

# small layers with several channel tiles, spatial tiles and input-channel chunks to order
LAYERS = [
    (ConvWorkload(8, 8, 64, 64, 3, 3, 1, 1), Epilogue.requant(shift=9, relu=True)),
    (ConvWorkload(6, 6, 64, 128, 1, 1, 1, 0), Epilogue.requant(shift=7)),
    (
        ConvWorkload(8, 8, 48, 64, 3, 3, 2, 1),
        Epilogue(bias=True, shift=7, lo=0, hi=127, residual=True, residual_shift=2),
    ),
    # a grouped conv (4 groups of one channel block each: block-diagonal GEMMs)
    (ConvWorkload(8, 8, 64, 64, 3, 3, 1, 1, groups=4), Epilogue.requant(shift=8, relu=True)),
]
GROUPS = {3: 4}  # layer -> its conv's groups


def _non_default_points(task, rng, n):
    """``n`` valid points (they lower) of ``task``'s space with at least one schedule knob off its default
    (or four threads), drawn with ``rng``."""
    out = []
    for i in rng.permutation(len(task.space)):
        point = task.space.get(int(i))
        new = point["vthreads"] == 4 or any(point[k] != v for k, v in NEW_KNOBS.items())
        if not new:
            continue
        try:
            task.instantiate(point)
        except InvalidConfig:
            continue
        if not task.context(point).any():  # a GEMM hazard or micro-op overflow (no lowering)
            continue
        out.append(point)
        if len(out) == n:
            break
    return out


def _run(wl, ep, c: ConvConfig, rng, groups: int = 1):
    x = rng.integers(-128, 128, (1, wl.in_channels, wl.height, wl.width), dtype=np.int8)
    w = rng.integers(
        -128,
        128,
        (wl.out_channels, wl.in_channels // groups, wl.kernel_h, wl.kernel_w),
        dtype=np.int8,
    )
    b = rng.integers(-20000, 20000, wl.out_channels).astype(np.int32)
    res = None
    if ep.residual:
        res = rng.integers(-128, 128, (1, wl.out_channels, wl.out_h, wl.out_w), dtype=np.int8)
    packed = pack_weights(w) if groups == 1 else layout.pack_group_oihw(w, groups, wl.groups)
    op = VtaConv2d(wl, ep, packed, pack_bias(b), SimDevice(dram_bytes=1 << 24), c)
    assert op.config == c
    run = op(pack_data(x), None if res is None else pack_data(res))
    got = unpack_data(run.output, wl.out_channels)
    dense = w if groups == 1 else layout.dense_group_oihw(w, groups)
    expected = reference_conv(x, dense, b, ep, wl, res)
    assert np.array_equal(got, expected), f"{wl} {c.to_dict()}: result differs"


def _races_and_order(wl, ep, c: ConvConfig, hw: HwConfig):
    """The lowered stream on random DRAM: no races, same DRAM under a reversed module order."""
    low = lower_conv2d(wl, ep, c, hw, DramMap.disjoint(wl, hw))
    initial = np.random.default_rng(SEED).integers(0, 256, 1 << 22, dtype=np.uint8)
    uops = np.frombuffer(encode_uops(low.uops, hw), np.uint8)
    at = DramMap.disjoint(wl, hw).uops * hw.uop_elem_bytes
    initial[at : at + uops.size] = uops
    a, b = initial.copy(), initial.copy()
    result = sim.run_insns(low.insns, a, hw, check_races=True)
    assert result.leftover_tokens == {}
    sim.run_insns(low.insns, b, hw, module_order=tuple(reversed(list(Module))))
    assert np.array_equal(a, b), f"{c.to_dict()}: tokens miss an ordering"


@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_random_schedule_points_exact(layer):
    wl, ep = LAYERS[layer]
    rng = np.random.default_rng(SEED + layer)
    print(f"seed {SEED + layer}, {wl}")
    task = vta_layer_task(wl, ep)
    points = _non_default_points(task, rng, 6)
    assert len(points) == 6
    seen = {k: set() for k in NEW_KNOBS}
    for point in points:
        c = conv_config(point)
        print(" ", c.to_dict())
        _run(wl, ep, c, rng, GROUPS.get(layer, 1))
        for k in NEW_KNOBS:
            seen[k].add(getattr(c, k))
    # both lowering paths of the layer (overlapped and v0.0.2) ran with the new orders
    hw = HwConfig()
    for c in (
        ConvConfig(4, 4, 1, 1, 2, tile_order="sp", chunk_order="snake", uop_mode="ring"),
        ConvConfig(4, 4, 1, 1, 4, tile_order="sp", chunk_order="snake"),
        ConvConfig(4, 4, 1, 1, 2, overlap=False, tile_order="sp", chunk_order="snake"),
    ):
        c = dataclasses.replace(
            c, tile_h=min(c.tile_h, wl.out_h) if wl.out_h % 4 == 0 else wl.out_h
        )
        c = dataclasses.replace(c, tile_w=c.tile_h)
        _run(wl, ep, c, rng, GROUPS.get(layer, 1))
        _races_and_order(wl, ep, c, hw)


def test_schedule_knobs_change_the_program():
    """Each knob's non-default value lowers to another program than its default (else it would
    be no knob), and the loop orders keep data: fewer loads."""
    wl, ep, hw = ConvWorkload(8, 8, 64, 64, 3, 3, 1, 1), Epilogue.requant(shift=9), HwConfig()
    base = ConvConfig(4, 4, 1, 1, 2)

    def lowered(**kw):
        return lower_conv2d(wl, ep, dataclasses.replace(base, **kw), hw, DramMap.disjoint(wl, hw))

    def loads(low):
        return sum(isinstance(i, MemInsn) and not i.is_store for i in low.insns)

    ref = lowered()
    for kw in (
        {"tile_order": TILE_ORDERS[1]},
        {"chunk_order": CHUNK_ORDERS[1]},
        {"uop_mode": UOP_MODES[1]},
        {"overlap": False},
        {"vthreads": 4},
    ):
        assert lowered(**kw).insns != ref.insns, kw
    # one chunk a tile: inputs kept across a thread's channel tiles (its weights then reload)
    one_chunk = {"tile_ci": 4}
    assert loads(lowered(tile_order="sp", **one_chunk)) < loads(lowered(**one_chunk))
    assert loads(lowered(chunk_order="snake")) < loads(ref)  # the last chunk's weights kept


def test_duplicate_points_are_invalid():
    task = vta_conv2d_task(8, 8, 64, 64, 3, 1, 1)
    point = task.space.config(
        {"tile_h": 4, "tile_w": 4, "tile_ci": 4, "tile_co": 1, "vthreads": 2, "gemm_loops": "ci,co"}
        | NEW_KNOBS
        | {"chunk_order": "snake"}  # one chunk: nothing to reorder
    )
    with pytest.raises(InvalidConfig, match="duplicate"):
        task.instantiate(point)
    assert not task.context(point).any()  # the model's fit check agrees


def test_records_without_the_new_knobs_load_as_defaults(tmp_path):
    """A record logged in the space before the schedule knobs (six knobs, another space
    signature) reads as the point with the new knobs at their defaults."""
    task = vta_conv2d_task(8, 8, 64, 64, 3, 1, 1)
    old = {"tile_h": 8, "tile_w": 4, "tile_ci": 2, "tile_co": 2, "vthreads": 2}
    old["gemm_loops"] = "oh,co"
    point = task.space.config(old | NEW_KNOBS)
    log = tmp_path / "old.jsonl"
    with TuningLog(log) as f:
        f.append(make_record(task, point, MeasureResult(costs=(1234.0,))))
    line = json.loads(log.read_text())
    # the space as it was (``config_space``: six knobs, up to two threads), built here
    wl, _ = vta_tuner._workload(*task.args)
    before = ConfigSpace(
        [
            ChoiceKnob(n, [vta_tuner._loops_key(x) for x in v] if n == "gemm_loops" else list(v))
            for n, v in config_space(wl).items()
        ]
    )
    assert before.signature() != task.space.signature()
    then = before.config(old)
    line["space"], line["index"], line["config"] = before.signature(), then.index, old
    log.write_text(json.dumps(line) + "\n")
    (rec,) = read_records(log, task)
    assert rec.config == point.to_dict() and rec.index == point.index
    assert apply_best(log, task) == point
    # a record of another older space (its signature) is not taken for this one's
    line["space"] = "0123456789ab"
    log.write_text(json.dumps(line) + "\n")
    assert read_records(log, task) == []
    line["space"] = before.signature()
    # a record with a value the space does not offer is not taken for one of its points
    line["config"] = old | {"tile_h": 3}
    log.write_text(json.dumps(line) + "\n")
    assert read_records(log, task) == []
