"""Tuning a network's CPU conv layers: tasks per layer, trials spread by expected gain, the log's
best schedules applied by compile_model; the shipped ResNet-18 log still applies."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import run_onnxruntime
from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
from pyvta.runtime.compiled_model import run_model
from pyvta.tuner.cpu import nchwc_conv_tasks, schedule_of
from pyvta.tuner.cpu_network import (
    compare_templates,
    cpu_network_layers,
    cpu_schedules,
    layer_schedule,
    pretuned_cpu_log,
    spread_trials,
    tune_cpu_network,
    write_cpu_log,
)
from pyvta.tuner.log import read_records
from pyvta.tuner.measure import Backend, InProcessMeasurer


class SyntheticCost(Backend):
    """Builds nothing; a config's cost is a fixed function of its knobs, without ties, so the
    test knows which logged schedule must win."""

    def build(self, task, config):
        return None

    def run(self, task, config, artifact, repeats):
        d = config.to_dict()
        tile = d["tile"]
        base = 2e-3 if task.name == "cpu.winograd_nchwc" else 1e-3
        rx = 1.5 if d.get("unroll_rx") else 1.0
        return [base / (tile[0] * tile[1]) * rx * (1 + 1e-4 * config.index)] * repeats  # no ties


@pytest.fixture(scope="module")
def small_resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=2), path)
    return path


def test_spread_trials_follows_expected_gain():
    assert spread_trials([3.0, 1.0, 0.0], 40) == [30, 10, 4]
    assert sum(spread_trials([1.0] * 5, 50)) == 50


def test_every_layer_is_tuned_and_the_best_schedules_compile(small_resnet, tmp_path):
    layers = cpu_network_layers(small_resnet)
    assert len(layers) == 11 and sum(la.count for la in layers) == 20
    log = str(tmp_path / "cpu.jsonl")
    measurer = InProcessMeasurer(SyntheticCost(), repeats=1)
    results = tune_cpu_network(
        layers, 6, log=log, tuner="random", measurer=measurer, progress=False, final_check=0
    )
    tasks = [t for la in layers for t in nchwc_conv_tasks(la.workload)]
    assert len(results) == len(tasks)  # direct for every layer, winograd for 3x3 stride 1
    for task in tasks:
        assert read_records(log, task), f"no record for {task.key}"
    schedules = cpu_schedules(log, layers)
    assert set(schedules) == {la.workload.key for la in layers}
    for la in layers:  # the cheapest record over the layer's templates wins
        logged = [
            (r.result.cost, layer_schedule(t, t.space.config(r.config), la))
            for t in nchwc_conv_tasks(la.workload)
            for r in read_records(log, t)
            if r.result.ok
        ]
        assert schedules[la.workload.key] == min(logged, key=lambda cs: cs[0])[1]
        # what the space does not decide stays the compiler's: a small layer runs on one thread
        want = default_conv_schedule(la.workload)["knobs"].get("parallel", True)
        assert schedules[la.workload.key]["knobs"]["parallel"] == want
    assert any(not s["knobs"]["parallel"] for s in schedules.values())  # some layer is small
    cm = compile_model(small_resnet, "cpu", cpu_schedules=schedules)
    used = [n.attrs["schedule"] for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    assert all(s == schedules[k] for s, k in zip(used, _keys(cm), strict=True))
    x = zoo.sample_inputs(1, 32, seed=51)[0]
    (ref,) = run_onnxruntime(onnx.load(small_resnet), {"input": x})
    out = run_model(cm, x)[0][0]
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) < 1e-4


class WinogradScaled(SyntheticCost):
    """The synthetic costs with Winograd's times ``factor``."""

    def __init__(self, factor: float):
        self.factor = factor

    def run(self, task, config, artifact, repeats):
        cost = super().run(task, config, artifact, repeats)
        return [c * self.factor if task.name == "cpu.winograd_nchwc" else c for c in cost]


def test_templates_measured_side_by_side_decide_between_them(small_resnet, tmp_path):
    layers = cpu_network_layers(small_resnet)
    log = str(tmp_path / "cpu.jsonl")
    tune_cpu_network(
        layers, 4, log=log, tuner="random", measurer=InProcessMeasurer(WinogradScaled(1e3), 1),
        progress=False, final_check=0,
    )  # fmt: skip
    before = cpu_schedules(log, layers)
    both = [la for la in layers if len(nchwc_conv_tasks(la.workload)) == 2]
    assert both and all(before[la.workload.key]["template"] == "direct" for la in both)
    compare_templates(layers, log, InProcessMeasurer(WinogradScaled(1e-3), 1), rounds=3)
    shipped = str(tmp_path / "shipped.jsonl")
    assert write_cpu_log(log, shipped) == len(read_records(shipped))
    for schedules in (cpu_schedules(log, layers), cpu_schedules(shipped, layers)):
        for la in layers:  # side by side Winograd wins; layers with one template keep theirs
            want = "winograd" if la in both else before[la.workload.key]["template"]
            assert schedules[la.workload.key]["template"] == want, la.workload.key


def _keys(cm):
    from pyvta.compiler.targets.cpu.kernels import node_workload

    g = cm.graph
    return [
        node_workload(n, g.values[n.inputs[0]].shape).key for n in g.nodes if n.op == "cpu_conv2d"
    ]


@pytest.mark.parametrize("model", ["resnet18", "mobilenet"])
def test_shipped_log_still_fits_its_tasks(model):
    """Every record of the shipped log names the CPU it was measured on and belongs to a task
    of today's templates; those measured at this host's feature level lie in its task's space
    or in one from before its knobs with defaults came (re-tune when a template's space changes
    otherwise), and every record's schedule instantiates here,
    whichever CPU measured it (a schedule is valid on any x86 host). The log carries records
    of both AVX2 and AVX-512 hosts."""
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload
    from pyvta.tuner.cpu import cpu_measured_on

    log = pretuned_cpu_log(f"{model}_224")
    assert log is not None
    records = read_records(log)
    assert len(records) >= 11
    here = cpu_measured_on().split()[1]
    for rec in records:
        assert len(rec.target.split()) >= 2, f"record of {rec.task_key} names no CPU"
        args = rec.task_key[rec.task_key.index("[") : rec.task_key.index("]") + 1]
        numbers = list(map(int, args[1:-1].split(",")))
        if rec.task_key.startswith("cpu.depthwise_nchwc"):
            c, h, w, kh, kw, sh, sw, pt, pl, pb, pr, ob = numbers
            wl = ConvWorkload(c, h, w, c, (kh, kw), (sh, sw), (pt, pl, pb, pr), ob, ob, True)
        else:
            c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, ib, ob = numbers
            wl = ConvWorkload(c, h, w, o, (kh, kw), (sh, sw), (pt, pl, pb, pr), ib, ob)
        (task,) = [t for t in nchwc_conv_tasks(wl) if t.key == rec.task_key]
        if rec.target.split()[1] == here:  # in today's space, or an older one of it
            fits = rec.matches(task) or rec.upgraded(task) is not None
            assert fits, f"{rec.task_key}: its space changed (re-tune)"
        task.instantiate(rec.config)  # raises if it no longer fits
    levels = {r.target.split()[1] for r in records}
    assert {"avx2", "avx512vnni"} <= levels, levels


def test_records_of_another_cpu_are_named_and_applied_only_on_request(small_resnet, tmp_path):
    """A log measured only on another kind of CPU (another space signature and target), or on
    another CPU of this kind (same space, another name): each layer is named with that CPU and
    keeps the untuned schedule, unless asked (``other_cpus``, ``--other-cpu-records``): then the
    same schedules as this CPU's records give. Records of this CPU, where there are some, win
    over the others'."""
    import json

    layers = cpu_network_layers(small_resnet)
    log = tmp_path / "here.jsonl"
    measurer = InProcessMeasurer(SyntheticCost(), repeats=1)
    tune_cpu_network(
        layers, 4, log=str(log), tuner="random", measurer=measurer, progress=False, final_check=0
    )
    here = cpu_schedules(str(log), layers)
    assert here
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    other = tmp_path / "other.jsonl"
    other.write_text(
        "".join(
            json.dumps({**d, "space": "0" * 12, "target": "x86_64 sse someoldcpu"}) + "\n"
            for d in lines
        )
    )
    for asked in (False, True):
        foreign: dict = {}
        there = cpu_schedules(str(other), layers, foreign, other_cpus=asked)
        assert there == (here if asked else {})
        assert foreign == {k: "x86_64 sse someoldcpu" for k in here}
    from pyvta.commands.network import cpu_tuned_schedules  # what pyvta compile says

    for asked in (False, True):
        said: list[str] = []
        got = cpu_tuned_schedules(small_resnet, other, said.append, other_cpus=asked)
        assert got == (here if asked else {})
        (line,) = [s for s in said if "only of other CPUs" in s]
        assert f"{len(here)} layers" in line and "x86_64 sse someoldcpu" in line
        assert ("use them" if asked else "keep the untuned schedules") in line
    both = tmp_path / "both.jsonl"  # the other CPU's records and this one's
    both.write_text(other.read_text() + log.read_text())
    foreign = {}
    assert cpu_schedules(str(both), layers, foreign) == here and foreign == {}
    # another CPU of this kind (same space, another name): named, applied on request
    peer = "x86_64 somelevel somepeercpu"
    same = tmp_path / "same.jsonl"
    same.write_text("".join(json.dumps({**d, "target": peer}) + "\n" for d in lines))
    foreign = {}
    assert cpu_schedules(str(same), layers, foreign) == {}
    assert foreign == {k: peer for k in here}
    assert cpu_schedules(str(same), layers, other_cpus=True) == here
    # beside this CPU's own records, the peer's are not mixed in: its one record of a config
    # this CPU measured worst, logged at a tenth of the best cost, does not win
    ok = [d for d in lines if d.get("error") is None and d.get("cost") is not None]
    worst = max(ok, key=lambda d: d["cost"])
    fast = {**worst, "target": peer, "cost": min(d["cost"] for d in ok) / 10}
    fast["costs"] = [fast["cost"]]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(log.read_text() + json.dumps(fast) + "\n")
    for asked in (False, True):
        foreign = {}
        assert cpu_schedules(str(mixed), layers, foreign, other_cpus=asked) == here
        assert foreign == {}


@pytest.mark.parametrize("model", ["resnet18", "mobilenet"])
def test_shipped_log_covers_every_cpu_layer(tmp_path, model):
    """The shipped log of each zoo model applies: a schedule for every CPU conv layer (its
    records measured on other CPUs too: ``--other-cpu-records``)."""
    path = str(tmp_path / f"{model}.onnx")
    zoo.save_model(model, path, size=224)
    layers = cpu_network_layers(path)
    schedules = cpu_schedules(str(pretuned_cpu_log(f"{model}_224")), layers, other_cpus=True)
    missing = [la.workload.key for la in layers if la.workload.key not in schedules]
    assert not missing, f"no shipped schedule for {missing}"


@pytest.mark.parametrize("model", ["resnet18", "mobilenet"])
def test_shipped_in_network_choices_cover_and_lower_every_cpu_layer(tmp_path, model):
    """A shipped log's in-network choices (``LOG.network.json``, each host kind's applied on
    that kind of host), where there are some: for every host kind, one per CPU conv layer of
    the model, each a schedule the compiler lowers for that layer, whichever host runs it."""
    from pyvta import compiler
    from pyvta.compiler.targets.cpu.kernels import conv_schedule
    from pyvta.tuner.in_network import in_network_hosts

    hosts = in_network_hosts(pretuned_cpu_log(f"{model}_224"))
    if not hosts:
        pytest.skip(f"{model}: no in-network choices shipped")
    onnx_path = str(tmp_path / f"{model}.onnx")
    zoo.save_model(model, onnx_path, size=224)
    layers = {la.workload.key: la.workload for la in cpu_network_layers(onnx_path)}
    for machine, entry in hosts.items():
        assert set(entry["layers"]) == set(layers), machine
        for key, d in entry["layers"].items():
            compiler.lower(*conv_schedule(layers[key], d["chosen"]))


def test_mobilenet_layers_get_depthwise_and_pointwise_tasks(tmp_path):
    """A MobileNet-style net: every depthwise layer is a task of the depthwise template only,
    every 1x1 stride-1 layer also one of the pointwise template; the tuned schedules compile
    and the network still matches onnxruntime."""
    from pyvta.compiler.targets.cpu.kernels import node_workload

    path = tmp_path / "mobilenet_32.onnx"
    onnx.save(zoo.mobilenet(size=32, width=8, classes=10, seed=3), path)
    layers = cpu_network_layers(path)
    names = {la.workload.key: [t.name for t in nchwc_conv_tasks(la.workload)] for la in layers}
    dw = [k for k in names if k.endswith(" depthwise")]
    pw = [k for k in names if " k1x1 s1x1 p0,0,0,0 " in k]
    assert dw and pw
    assert all(names[k] == ["cpu.depthwise_nchwc"] for k in dw)
    assert all("cpu.pointwise_nchwc" in names[k] for k in pw)
    log = str(tmp_path / "cpu.jsonl")
    measurer = InProcessMeasurer(SyntheticCost(), repeats=1)
    tune_cpu_network(
        layers, 4, log=log, tuner="random", measurer=measurer, progress=False, final_check=0
    )
    schedules = cpu_schedules(log, layers)
    assert set(schedules) == set(names)
    assert {schedules[k]["template"] for k in dw} == {"depthwise"}
    cm = compile_model(str(path), "cpu", cpu_schedules=schedules)
    g = cm.graph
    for n in g.nodes:
        if n.op == "cpu_conv2d":
            assert (
                n.attrs["schedule"] == schedules[node_workload(n, g.values[n.inputs[0]].shape).key]
            )
    x = zoo.sample_inputs(1, 32, seed=52)[0]
    (ref,) = run_onnxruntime(onnx.load(path), {"input": x})
    out = run_model(cm, x)[0][0]
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) < 1e-4


@pytest.mark.parametrize("flat", [False, True])
def test_direct_and_pointwise_configs_pass_the_reference_check(flat, fitting_tile):
    """A 1x1 layer's direct configs (flat ones write ``[1, O/ob, OH * OW, ob]``) and its
    pointwise config measure against the float64 reference (no ``run`` error, no wrong
    answer)."""
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload
    from pyvta.tuner.cpu_measure import CpuBackend

    wl = ConvWorkload(32, 5, 5, 16, (1, 1), (1, 1), (0, 0, 0, 0), 16, 16)
    direct, pointwise = nchwc_conv_tasks(wl)[0], nchwc_conv_tasks(wl)[-1]
    cfgs = [
        (
            direct,
            direct.space.config(
                {"tile": fitting_tile(direct, 4, 16), "unroll_rx": False, "flat": flat}
            ),
        ),
        (pointwise, pointwise.space.get(0)),
    ]
    backend = CpuBackend(min_repeat_ms=1.0)
    for task, cfg in cfgs:
        (res,) = InProcessMeasurer(backend, repeats=1).measure(task, [cfg])
        assert res.ok, (task.name, res.error, res.msg[-300:])


def test_budget_tasks_mark_the_template_the_untuned_network_runs(small_resnet):
    """``cpu_budget_tasks``: one group per layer, its templates' tasks; exactly one per group
    is ``untuned`` (the template ``default_conv_schedule`` picks), each with the layer's flops
    and launches, and its default (the first pass measures it) a point of its space."""
    from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
    from pyvta.tuner.cpu_network import cpu_budget_tasks

    layers = cpu_network_layers(small_resnet)
    tasks = cpu_budget_tasks(layers)
    assert len({t.group for t in tasks}) == len(layers)
    for layer in layers:
        mine = [t for t in tasks if t.group == layer.workload.key]
        assert [t.task.name for t in mine] == [t.name for t in nchwc_conv_tasks(layer.workload)]
        (untuned,) = [t for t in mine if t.untuned]
        picked = default_conv_schedule(layer.workload)["template"]
        assert schedule_of(untuned.task, untuned.initial[0])["template"] == picked
        assert not untuned.stand_in  # ResNet-18's untuned schedules are points of the spaces
        assert all(t.flops == layer.workload.flops > 0 and t.weight == layer.count for t in mine)


def test_straddling_groups_are_tuned_in_their_exact_tiles():
    """RegNet's groups of 24 in blocks of 16: the space holds tiles of their 3-block repeat
    (``GroupSpan.exact_tile``, reading each group's channels exactly, its weights packed so)
    and of one block (the span of their groups' blocks); both measure against a reference of
    the layer, and where the compiler's untuned tile is the exact one it is the space's
    default point."""
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload, default_conv_schedule
    from pyvta.tuner.cpu_measure import CpuBackend
    from pyvta.tuner.cpu_nchwc import conv_tiles
    from pyvta.tuner.cpu_network import CpuLayer, _default_point

    wl = ConvWorkload(96, 9, 10, 96, (3, 3), (1, 1), (1, 1, 1, 1), 16, 16,
                      groups=GroupSpan(4, 24, 24))  # fmt: skip
    assert wl.groups.exact_tile(16, 16, 6) == 3
    task = nchwc_conv_tasks(wl)[0]
    untuned = default_conv_schedule(wl)["knobs"]
    point = _default_point(task, CpuLayer(wl, 1))
    print(f"untuned {untuned}, default point {point.to_dict()}")
    assert point["oc_blocks"] == untuned["oc_blocks"]
    widest = max(conv_tiles(wl.out_hw[1], wl.ob, 3))  # of 3 blocks, in the registers
    exact = {**point.to_dict(), "tile": widest, "oc_blocks": 3, "unroll_rci": 8}
    span = {**point.to_dict(), "tile": (4, wl.ob), "oc_blocks": 1, "unroll_rci": 8}
    pick = [task.space.config(span), task.space.config(exact)]
    assert [task.space.problem(c) for c in pick] == [None, None]
    backend = CpuBackend(min_repeat_ms=1.0)
    measured = InProcessMeasurer(backend, repeats=1).measure(task, [point, *pick])
    for config, res in zip([point, *pick], measured, strict=True):
        assert res.ok, (config.to_dict(), res.error, res.msg[-300:])
    # the exact tile reads a channels-last copy made at the root: other places are refused
    inline = task.space.config({**pick[1].to_dict(), "pad_at": "inline"})
    assert "pad_at 'inline'" in task.space.problem(inline)


GROUPED_AND_DILATED = {
    # blocks of 16 straddling groups of 38 -> 71 (a span of 4 of the 5 input blocks)
    "straddling groups": dict(c=80, o=144, groups=(2, 38, 71)),
    "groups aligned with the blocks": dict(c=64, o=64, groups=(4, 16, 16)),
    "groups within a block": dict(c=32, o=32, groups=(8, 4, 4)),
    "dilated": dict(c=32, o=48, dilations=(2, 2)),
    "dilated and grouped": dict(c=32, o=32, groups=(2, 16, 16), dilations=(2, 1)),
    "dilated depthwise": dict(c=32, o=32, depthwise=True, dilations=(2, 2)),
}


@pytest.mark.parametrize("name", sorted(GROUPED_AND_DILATED))
def test_grouped_and_dilated_layers_are_tuned_as_themselves(name):
    """A grouped or dilated layer's tasks stand for that layer (their arguments give its
    workload back), not the dense undilated conv of its shape, and its configs measure against
    a reference of the layer itself (a grouped conv's packed weights, dilated taps); an
    ordinary layer's task keeps the arguments it always had (logged records still match)."""
    from dataclasses import replace

    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload
    from pyvta.tuner.cpu_measure import CpuBackend

    spec = dict(GROUPED_AND_DILATED[name])
    groups = spec.pop("groups", None)
    dil = spec.pop("dilations", (1, 1))
    c, o = spec.pop("c"), spec.pop("o")
    wl = ConvWorkload(
        c, 9, 10, o, (3, 3), (1, 1), (2, 1, 2, 1), 16, 16, dilations=dil,
        groups=GroupSpan(*groups) if groups else None, **spec,
    )  # fmt: skip
    tasks = nchwc_conv_tasks(wl)
    plain = {t.name: t for t in nchwc_conv_tasks(replace(wl, dilations=(1, 1), groups=None))}
    for task in tasks:
        dense = plain.get(task.name)
        if dense is None:  # groups narrower than the block: the depthwise template too
            assert task.name == "cpu.depthwise_nchwc" and wl.group_width > 1
            continue
        assert task.key != dense.key
        assert len(dense.args) == (12 if wl.depthwise else 14)  # the keys logs always had
    assert len(tasks) == len(plain) + (wl.group_width not in (None, 1))
    from pyvta.tuner.cpu_depthwise import _depthwise_workload
    from pyvta.tuner.cpu_nchwc import nchwc_workload

    for task in tasks:
        read = _depthwise_workload if task.name == "cpu.depthwise_nchwc" else nchwc_workload
        assert read(*task.args) == wl
    backend = CpuBackend(min_repeat_ms=1.0)
    rng = np.random.default_rng(5)
    print("seed 5")
    for task in tasks:
        draws = (task.space.get(int(i)) for i in rng.permutation(task.space.size)[:400])
        valid = [cfg for cfg in draws if task.space.problem(cfg) is None][:2]
        assert valid, task.key
        for config in valid:
            (res,) = InProcessMeasurer(backend, repeats=1).measure(task, [config])
            assert res.ok, (task.key, config.to_dict(), res.error, res.msg[-300:])
