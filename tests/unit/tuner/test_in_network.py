"""Re-ranking a tuning log's schedules inside the network (tuner.in_network): each layer's
default and top-k logged schedules timed in the running network, the fastest there chosen and
applied by cpu_schedules."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace

import onnx
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import run_onnxruntime
from pyvta.compiler.targets.cpu.kernels import default_conv_schedule
from pyvta.runtime.compiled_model import run_model
from pyvta.tuner.cpu_network import cpu_network_layers, cpu_schedules, tune_cpu_network
from pyvta.tuner.in_network import (
    InNetworkError,
    comparable,
    confirmed_layers,
    fastest,
    in_network_choices,
    in_network_path,
    paired_ratio,
    rerank_in_network,
    top_candidates,
)
from pyvta.tuner.measure import Backend, InProcessMeasurer


class SmallTilesFirst(Backend):
    """Builds nothing; logs the smallest register tiles as the fastest (the opposite of what
    they run like), so the log's isolated bests are poor schedules the re-ranking must see
    through."""

    def build(self, task, config):
        return None

    def run(self, task, config, artifact, repeats):
        p, k = config.to_dict()["tile"]
        return [1e-3 * p * k * (1 + 1e-4 * config.index)] * repeats  # no ties


@pytest.fixture(scope="module")
def small_net(tmp_path_factory):
    """A narrow ResNet-18 at 32x32 and a log of it whose bests are the smallest tiles."""
    folder = tmp_path_factory.mktemp("innet")
    path = folder / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=2), path)
    layers = cpu_network_layers(path)
    log = str(folder / "cpu.jsonl")
    measurer = InProcessMeasurer(SmallTilesFirst(), repeats=1)
    tune_cpu_network(
        layers, 4, log=log, tuner="random", measurer=measurer, progress=False, final_check=0
    )
    return path, layers, log


def test_top_candidates_are_the_default_then_the_logged_bests(small_net):
    _, layers, log = small_net
    for layer in layers:
        cands = top_candidates(log, layer, 2)
        assert cands[0].source == "default"
        assert cands[0].schedule == default_conv_schedule(layer.workload)
        assert 2 <= len(cands) <= 3
        alone = [c.alone_ms for c in cands[1:]]
        assert alone == sorted(alone)
        scheds = [json.dumps(c.schedule, sort_keys=True) for c in cands]
        assert len(set(scheds)) == len(scheds)


def test_top_candidates_rank_each_way_of_measuring_apart(small_net, tmp_path):
    """A log with records measured two ways (``Record.how``): the top-k of each, not the
    top-k of both mixed (B's costs all below A's would crowd A's out)."""
    from dataclasses import replace

    from pyvta.tuner.log import TuningLog, read_records

    _, layers, log = small_net
    layer = layers[1]
    recs = [r for r in read_records(log) if r.result.ok]
    mixed = tmp_path / "mixed.jsonl"
    with TuningLog(str(mixed)) as w:
        for r in recs:
            w.append(replace(r, how="A"))
            slow_first = replace(r.result, costs=(1e-6 / r.result.cost,))  # A's order reversed
            w.append(replace(r, how="B", result=slow_first))
    (default, *logged) = top_candidates(mixed, layer, 1)
    want = {how: min(ms for how2, ms in _costs(mixed, layer) if how2 == how) for how in "AB"}
    assert default.source == "default" and len(logged) == 2
    assert sorted(c.alone_ms for c in logged) == pytest.approx(sorted(want.values()))


def _costs(log, layer):
    """(how, ms) of every valid record of ``layer``'s tasks in ``log``."""
    from pyvta.tuner.cpu import nchwc_conv_tasks
    from pyvta.tuner.log import read_records

    return [
        (r.how, r.result.cost * 1e3)
        for t in nchwc_conv_tasks(layer.workload)
        for r in read_records(log, t)
        if r.result.ok
    ]


def test_rerank_chooses_by_the_time_in_the_network(small_net, seed):
    path, layers, log = small_net
    lines = []
    rr = rerank_in_network(
        path, log, top_k=1, rounds=5, threads=1, seed=seed, progress=lines.append
    )
    print(rr.summary())
    # the default variant and one of the logged bests; then, if any layer's fastest was a
    # logged one, each confirmation builds the default network again (its control) and its
    # own network, unless that is the logged bests' variant (every logged layer changed)
    built = [ln for ln in lines if ln.startswith("variant")]
    logged = {k for k, cands in rr.candidates.items() if len(cands) > 1}
    own = [set(c.layer_ms) != logged for c in rr.confirmations]
    assert len(built) == 2 + len(own) + sum(own), lines
    assert sum(ln.startswith("confirmation") for ln in lines) == len(rr.confirmations)
    assert set(rr.chosen) == {la.workload.key for la in layers}
    print(rr.table())
    for key, cands in rr.candidates.items():
        assert all(len(c.ms) == 5 and min(c.ms) > 0 for c in cands)  # every round timed
        ranked = min(cands, key=lambda c: c.median_ms).schedule  # one stage: all finalists
        assert rr.ranked(key).schedule == ranked
        kept = key in confirmed_layers(rr.confirmations)
        # the ranking's fastest, unless the confirmations did not bear it out
        assert rr.chosen[key] == (ranked if kept else cands[0].schedule)
    # the log's "best" 1-column tiles lose to the default in the network where the layer is
    # big enough to tell (the stem and the 32x32 layers: 16-32 columns per row)
    widest = max(layers, key=lambda la: la.workload.w * la.workload.o * la.count)
    default, logged = rr.candidates[widest.workload.key]
    assert logged.schedule["knobs"].get("ow_block", logged.schedule["knobs"].get("p_block")) <= 2
    assert default.median_ms < logged.median_ms
    # the choices are applied by cpu_schedules (and left out on request), and they compile
    assert cpu_schedules(log, layers) == rr.chosen
    assert cpu_schedules(log, layers, in_network=False) != rr.chosen
    cm = compile_model(path, "cpu", cpu_schedules=cpu_schedules(log, layers))
    x = zoo.sample_inputs(1, 32, seed)[0]
    got = run_model(cm, x)[0][0]
    want = run_onnxruntime(str(path), {"input": x})[0]
    assert abs(got - want).max() <= 1e-4 * abs(want).max()


def test_choices_file_is_checked(tmp_path):
    log = tmp_path / "cpu.jsonl"
    assert in_network_choices(log) == {}  # none made
    in_network_path(log).write_text(json.dumps({"v": 1, "machine": "arm64 other", "layers": {}}))
    assert in_network_choices(log) == {}  # made on another kind of host: not applied
    in_network_path(log).write_text(json.dumps({"v": 3, "hosts": {}}))
    with pytest.raises(InNetworkError, match="this reads 1 and 2"):
        in_network_choices(log)
    in_network_path(log).write_text("{not json")
    with pytest.raises(InNetworkError, match="not an in-network choices file"):
        in_network_choices(log)
    with pytest.raises(InNetworkError, match="rounds, screen_rounds and keep >= 1"):
        rerank_in_network(tmp_path / "m.onnx", log, confirm_rounds=-1)
    with pytest.raises(InNetworkError, match="rounds, screen_rounds and keep >= 1"):
        rerank_in_network(tmp_path / "m.onnx", log, rounds=0)
    with pytest.raises(InNetworkError, match="needs threads=1"):
        rerank_in_network(tmp_path / "m.onnx", log, threads=2, clock=time.thread_time)


def test_a_confirmation_bears_out_a_faster_network_of_faster_layers():
    """``Confirmation``: a layer is faster if it was in most rounds against the default timed
    in the same round (the host's speed halves every other round here: the medians of the
    times alone would not tell); borne out if the network is faster and every changed layer;
    the confirmation whose network was fastest decides (``confirmed_layers``)."""
    from pyvta.tuner.in_network import Confirmation

    slow = [1.0, 2.0, 1.0, 2.0, 1.0]  # the host's speed, round by round

    def times(ms, ratio=1.0):
        return [ms * s * ratio for s in slow]

    def pair(ms, ratio):
        return {"default": times(ms), "chosen": times(ms, ratio)}

    layers = {"faster": pair(5.0, 0.8), "slower": pair(2.0, 1.1), "even": pair(3.0, 1.0)}
    first = Confirmation(5, pair(20.0, 0.95), layers)
    assert first.speedup == pytest.approx(1 / 0.95)
    assert first.faster() == {"faster"} and not first.borne_out
    doc = json.loads(json.dumps(first.to_json()))
    assert {k: d["faster"] for k, d in doc["layers"].items()} == {
        "faster": True, "slower": False, "even": False
    }  # fmt: skip
    assert doc["speedup"] == pytest.approx(first.speedup)
    then = Confirmation(5, pair(20.0, 0.9), {"faster": pair(5.0, 0.8)})
    assert then.borne_out
    # the fastest network against the default decides, if faster at all
    assert confirmed_layers([first]) == set(layers)
    assert confirmed_layers([first, then]) == {"faster"}
    # the default network built again (the control) 1.04x the first: a gain of 1.03x is not
    # told from no change; with a control of 1.01x it is
    near = {**pair(20.0, 0.97), "control": times(20.0, 0.96)}
    assert Confirmation(5, near, {"faster": pair(5.0, 0.8)}).margin == pytest.approx(1 / 0.96 - 1)
    assert not Confirmation(5, near, {"faster": pair(5.0, 0.8)}).borne_out
    assert confirmed_layers([Confirmation(5, near, {"faster": pair(5.0, 0.8)})]) == set()
    near["control"] = times(20.0, 0.99)
    assert Confirmation(5, near, {"faster": pair(5.0, 0.8)}).borne_out
    assert json.loads(json.dumps(first.to_json()))["control"] is None  # none timed
    worse = Confirmation(5, pair(20.0, 1.01), {"faster": pair(5.0, 0.8)})
    assert worse.faster() == {"faster"} and not worse.borne_out  # the network decides too
    assert confirmed_layers([worse]) == set() and confirmed_layers([]) == set()
    assert confirmed_layers([worse, first]) == set(layers)
    # a confirmation timed while the host ran slower (its default network 1.4x the others')
    # is not compared with them: its 1.11x is the slow spell's, and 1.05x at the normal speed
    # is kept (the MobileNetV2 descent's two speeds, SAME_HOST_SPEED)
    normal = Confirmation(5, pair(20.0, 0.95), {"faster": pair(5.0, 0.8)})
    slower = Confirmation(5, pair(28.0, 0.9), {"faster": pair(7.0, 0.8)})
    assert slower.default_ms / normal.default_ms == pytest.approx(1.4)
    assert comparable([slower, normal]) == [normal] and fastest([slower, normal]) is normal
    assert fastest([slower]) is slower  # alone, it is its own speed
    # paired: a round's times against the same round's, not against the medians
    drift = {"default": [10.0, 20.0, 20.0], "chosen": [9.0, 18.0, 10.5]}
    assert statistics.median(drift["default"]) / statistics.median(drift["chosen"]) > 1.5
    assert paired_ratio(drift["default"], drift["chosen"]) == pytest.approx(10 / 9)
    with pytest.raises(InNetworkError, match="equal, non-zero counts"):
        paired_ratio([1.0], [1.0, 2.0])


def test_a_pass_keeps_its_start_unless_its_own_networks_beat_it_in_the_same_rounds():
    """A pass of the descent (``sweep_from``: the last pass's choices) times the network it
    started from beside the ranking's (``_confirm_incumbent``): where the ranking's networks
    are not borne out, the start is kept, not the defaults (a descent on MobileNet fell back
    to the defaults in 3 of its 23 passes); where one of them beats the start in the same
    rounds, it is kept. Networks faked: a layer's ms by its candidate, a round's host speed
    moving, the same for every network of the round."""
    from types import SimpleNamespace

    from pyvta.tuner.in_network import Candidate, _chosen, _confirm, _confirm_incumbent

    ms = {("a", 0): 5.0, ("a", 1): 4.0, ("a", 2): 5.5, ("b", 0): 3.0, ("b", 1): 2.9}
    speed = [1.0, 1.3, 0.9, 1.1, 1.2, 1.0]  # the host's, round by round
    tick = iter(range(10**6))

    class Variants:  # the network of a pick: one node per layer, timed from ms
        def get(self, pick):
            return self.fresh(pick)

        def fresh(self, pick):
            def run(x):
                k = next(tick) // 3  # the round (3 networks a round)
                rows = [SimpleNamespace(node=key, ms=ms[key, pick[key]] * speed[k % 6])
                        for key in ("a", "b")]  # fmt: skip
                return None, SimpleNamespace(rows=rows)

            return SimpleNamespace(run=run), {"a": "a", "b": "b"}, pick

    cands = {key: [Candidate(f"{key}{i}", {"knob": i}) for i in range(n)]
             for key, n in (("a", 3), ("b", 2))}  # fmt: skip
    best = {"a": 2, "b": 1}  # the ranking's: a's slower than its default, b's faster
    ranked = _confirm(Variants(), best, None, 6)
    assert ranked.pick == best and ranked.speedup < 1  # not borne out
    assert _chosen(cands, best, [ranked]) == {"a": {"knob": 0}, "b": {"knob": 0}}  # before
    start = {"a": {"knob": 1}, "b": {"knob": 0}}  # the last pass kept a's candidate 1
    [inc] = _confirm_incumbent(Variants(), cands, start, [ranked], None, 6, None)
    assert inc.incumbent and inc.pick == {"a": 1} and inc.speedup == pytest.approx(8 / 7)
    assert _chosen(cands, best, [ranked, inc]) == start  # kept, not the defaults
    ms["b", 1] = 1.0  # now the ranking's network beats the start's in the same rounds
    ms["a", 2] = 4.0
    ranked = _confirm(Variants(), best, None, 6)
    [inc] = _confirm_incumbent(Variants(), cands, start, [ranked], None, 6, None)
    assert ranked.speedup > inc.speedup > 1
    assert _chosen(cands, best, [ranked, inc]) == {"a": {"knob": 2}, "b": {"knob": 1}}
    assert json.loads(json.dumps(inc.to_json()))["incumbent"] is True
    # no start timed where it changes nothing, or is a network the ranking's confirmed
    none = {"a": {"knob": 0}, "b": {"knob": 0}}
    assert _confirm_incumbent(Variants(), cands, none, [ranked], None, 6, None) == []
    assert _confirm_incumbent(Variants(), cands, {"a": {"knob": 2}, "b": {"knob": 1}},
                              [ranked], None, 6, None) == []  # fmt: skip
    assert _chosen(cands, best, None) == {"a": {"knob": 2}, "b": {"knob": 1}}  # none confirmed


def test_the_confirmations_time_the_chosen_network_against_the_default(
    small_net, tmp_path, monkeypatch, seed
):
    """The ranking rigged to choose each layer's second candidate (a one-knob move): the
    confirmations then time the network of those against the defaults' for real, each after
    the first trying the layers the last one found faster, fewer each time; the layers of the
    one whose network was fastest keep their move (if it was faster), the rest run their
    default; the
    confirmations go into the choices file; the chosen network compiles and runs right."""
    import shutil

    from pyvta.tuner import in_network
    from pyvta.tuner.in_network import in_network_hosts

    def rigged(stage, cands, x, rounds):
        for _, _, pick in stage:
            for key, i in pick.items():
                cands[key][i].ms += [1.0 if i == 1 else 2.0] * rounds

    monkeypatch.setattr(in_network, "_time_rounds", rigged)
    path, layers, log = small_net
    mine = tmp_path / "cpu.jsonl"
    shutil.copy(log, mine)
    lines = []
    rr = rerank_in_network(path, mine, top_k=0, sweep=1, rounds=1, screen_rounds=1,
                           confirm_rounds=4, threads=1, seed=seed, progress=lines.append)  # fmt: skip
    print(rr.table())
    print(rr.confirmed())
    confs = rr.confirmations
    keys = [la.workload.key for la in layers]
    assert confs and set(confs[0].layer_ms) == set(keys)  # every layer's move tried first
    assert sum(ln.startswith("confirmation") for ln in lines) == len(confs)
    for conf, after in zip(confs, confs[1:] + [None], strict=True):
        assert set(conf.network_ms) == {"default", "chosen", "control"}  # the control timed
        assert all(len(v) == 4 and min(v) > 0 for v in conf.network_ms.values())
        assert all(len(t["default"]) == len(t["chosen"]) == 4 for t in conf.layer_ms.values())
        if after is not None:  # not borne out: the next tries the faster ones, fewer
            assert not conf.borne_out
            assert set(after.layer_ms) == conf.faster() < set(conf.layer_ms)
        else:  # the last: borne out, or every layer it tried faster, or none
            assert conf.borne_out or conf.faster() in (set(conf.layer_ms), set())
    kept = confirmed_layers(confs)
    fastest = max(confs, key=lambda c: c.speedup)
    assert kept == (set(fastest.layer_ms) if fastest.speedup > 1 + fastest.margin else set())
    for key in keys:
        cands = rr.candidates[key]
        assert rr.ranked(key) is cands[1]
        assert rr.chosen[key] == cands[1 if key in kept else 0].schedule
    (host,) = in_network_hosts(mine).values()
    assert [c["speedup"] for c in host["confirmations"]] == pytest.approx(
        [c.speedup for c in confs]
    )
    assert in_network_choices(mine) == rr.chosen
    cm = compile_model(path, "cpu", cpu_schedules=cpu_schedules(str(mine), layers))
    x = zoo.sample_inputs(1, 32, seed)[0]
    want = run_onnxruntime(str(path), {"input": x})[0]
    assert abs(run_model(cm, x)[0][0] - want).max() <= 1e-4 * abs(want).max()


def test_each_host_kinds_choices_are_kept_when_another_writes(tmp_path):
    """A choices file of version 1 (one host kind's) read; this host's choices written beside
    it (version 2), then rewritten: the other kind's stay, each kind reads its own."""
    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.in_network import Candidate, Rerank, _write, in_network_hosts

    log = tmp_path / "cpu.jsonl"
    theirs = {"k1": {"template": "direct", "knobs": {"ow_block": 4}}}
    v1 = {"v": 1, "machine": "arm64 other", "threads": 1, "rounds": 3,
          "layers": {k: {"chosen": s, "candidates": []} for k, s in theirs.items()}}  # fmt: skip
    in_network_path(log).write_text(json.dumps(v1))
    assert in_network_choices(log) == {}
    for ow in (5, 6):
        ours = {"k1": {"template": "direct", "knobs": {"ow_block": ow}}}
        cands = {"k1": [Candidate("default", ours["k1"], None, [1.0])]}
        _write(in_network_path(log), Rerank(cands, ours, rounds=2, threads=1), cpu_measured_on())
        assert in_network_choices(log) == ours
        hosts = in_network_hosts(log)
        assert set(hosts) == {"arm64 other", cpu_measured_on()}
        assert {k: d["chosen"] for k, d in hosts["arm64 other"]["layers"].items()} == theirs
        assert json.loads(in_network_path(log).read_text())["v"] == 2


def test_choices_say_when_the_code_they_were_timed_on_is_not_made_now(
    small_net, tmp_path, monkeypatch
):
    """The choices record the code of each layer they change and of its untuned schedule
    (``changed_code``: digests of the optimised LLVM IR, the same from the disk cache as
    freshly built). While the compiler makes that code nothing is said, whatever else changed
    in its sources; where a layer's code is other, ``pyvta compile --tuning-log`` says the
    choices may be stale and how to time them again, and still applies them. Choices that
    record no code (written before it was) are judged by the compiler version."""
    import shutil

    from pyvta.cli import main
    from pyvta.commands.network import cpu_tuned_schedules
    from pyvta.compiler.backend.llvm.cache import compiler_version
    from pyvta.compiler.targets.cpu import builds
    from pyvta.tuner import in_network
    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.in_network import Candidate, Rerank, _write, changed_code, stale_choices

    path, layers, fixture_log = small_net
    log = tmp_path / "cpu.jsonl"
    shutil.copy(fixture_log, log)
    assert stale_choices(log, path) is None  # no choices: nothing to be stale
    chosen = {la.workload.key: default_conv_schedule(la.workload) for la in layers}
    cands = {k: [Candidate("default", s, None, [1.0])] for k, s in chosen.items()}
    key = layers[0].workload.key
    chosen[key] = top_candidates(log, layers[0], 1)[1].schedule  # the log's best, not untuned
    assert chosen[key] != cands[key][0].schedule
    code = changed_code(path, chosen, 1)
    _write(in_network_path(log), Rerank(cands, chosen, 1, 1, code=code), cpu_measured_on())
    doc = json.loads(in_network_path(log).read_text())
    host = doc["hosts"][cpu_measured_on()]
    assert host["compiler"] == compiler_version()
    assert list(host["code"]) == [key]  # the one layer changed
    assert host["code"][key]["chosen"] != host["code"][key]["untuned"]
    monkeypatch.setattr(builds, "_MODULES", {})  # built again, from the disk cache
    assert changed_code(path, chosen, 1) == code
    lines = []
    assert cpu_tuned_schedules(path, log, log=lines.append) == chosen
    assert not any("may now run slower" in ln for ln in lines)
    later = "0123456789abcdef|llvm99.0.0"  # a change to the compiler's sources, say
    monkeypatch.setattr(in_network, "compiler_version", lambda: later)
    assert stale_choices(log, path) is None  # that changes no layer's code: nothing said
    foreign = json.loads(json.dumps(doc))  # and a layer of another network: not this one's
    wl = layers[0].workload
    other_key = replace(wl, c=wl.c + wl.ib, h=wl.h + 1).key
    foreign["hosts"][cpu_measured_on()]["code"][other_key] = {"chosen": "1" * 16, "untuned": "2"}
    in_network_path(log).write_text(json.dumps(foreign))
    assert stale_choices(log, path) is None
    in_network_path(log).write_text(json.dumps(doc))

    for which in ("chosen", "untuned"):  # timed on other code: of the choice, of the untuned
        other = json.loads(json.dumps(doc))
        other["hosts"][cpu_measured_on()]["code"][key][which] = "0" * 16
        in_network_path(log).write_text(json.dumps(other))
        lines.clear()
        assert cpu_tuned_schedules(path, log, log=lines.append) == chosen  # applied all the same
        (note,) = [ln for ln in lines if "may now run slower" in ln]
        print(note)
        assert f"1 of the 1 layers they change (first: {key})" in note
        assert f"--log {log} --trials 0 --in-network 3" in note
    # the command it names: no new trials, the log's bests re-ranked, the choices rewritten
    # with the code they are timed on now
    tune = ["tune", str(path), "--target", "cpu", "--log", str(log), "--no-progress"]
    assert main([*tune, "--trials", "0", "--in-network", "1"]) == 0
    assert stale_choices(log, path) is None
    assert (
        json.loads(in_network_path(log).read_text())["hosts"][cpu_measured_on()]["compiler"]
        == later
    )
    assert main([*tune, "--trials", "0"]) == 2  # no new trials and no re-ranking: nothing to do
    missing = ["--log", str(tmp_path / "none.jsonl")]
    assert main([*tune, *missing, "--trials", "0", "--in-network", "1"]) == 2

    del host["code"]  # a file written before the code was recorded: the compiler version
    in_network_path(log).write_text(json.dumps(doc))
    assert f"timed under compiler {compiler_version()}, this is {later}" in stale_choices(log, path)
    del host["compiler"]
    in_network_path(log).write_text(json.dumps(doc))
    assert "a compiler version they do not record" in stale_choices(log, path)
    doc["hosts"] = {"arm64 other": host}  # not this host's choices
    in_network_path(log).write_text(json.dumps(doc))
    assert stale_choices(log, path) is None


def test_a_schedule_compiled_to_the_same_code_is_not_its_own_rival(small_net):
    """A schedule that differs from the untuned one only in how it writes the same tile
    (``oc_tile`` 0, the whole output block, or the block's width) compiles to the same
    kernels: the re-ranking drops it before timing (``_distinct_code``), so it can be neither
    chosen nor counted as a change; a schedule of other code stays."""
    from pyvta.tuner.in_network import Candidate, _distinct_code

    path, layers, log = small_net
    layer = layers[0]
    default = default_conv_schedule(layer.workload)
    assert default["template"] == "direct" and default["knobs"]["oc_tile"] == 0
    same = {**default, "knobs": {**default["knobs"], "oc_tile": layer.workload.ob}}
    other = top_candidates(log, layer, 1)[1]
    key = layer.workload.key
    cands = {key: [Candidate("default", default), Candidate("start", same), other]}
    lines = []
    out = _distinct_code(path, cands, 1, lines.append)
    assert [c.source for c in out[key]] == ["default", other.source]
    assert lines == ["1 candidates dropped: the same code as an earlier one of their layer"]
    assert _distinct_code(path, out, 1, lines.append) == out and len(lines) == 1
    # more candidates (a sweep's moves), up to want of them: one of an earlier one's code
    # gives its place to the next
    rest = top_candidates(log, layer, 2)[1:]  # the 2 logged bests, of code of their own
    assert len(rest) == 2
    more = {key: [Candidate("same", same), *rest]}
    for want, kept in ((0, []), (1, rest[:1]), (2, rest[:2]), (9, rest)):
        lines.clear()
        got = _distinct_code(
            path, {key: [Candidate("default", default)]}, 1, lines.append, more, want
        )
        assert [c.source for c in got[key]] == ["default", *(c.source for c in kept)], want
        assert more[key][0].source == "same"  # the caller's lists are left as they were
        assert lines == (
            []
            if want == 0
            else ["1 candidates dropped: the same code as an earlier one of their layer"]
        )


def test_screening_stages_keep_the_faster_half_then_time_the_finalists(small_net, seed):
    """Default + 1 logged + 3 drawn from the spaces per layer: screening stages (2 rounds)
    keep each layer's faster half until 2 are left, which get the final rounds; a candidate
    dropped has only the rounds of the stages it ran in, every finalist beat every dropped one
    at the stage that dropped it, and the choice is the finalists' lowest median (if the confirmation bears it out)."""
    from pyvta.tuner.in_network import space_candidates

    path, layers, log = small_net
    top = top_candidates(log, layers[0], 1)
    extra = space_candidates(layers[0], 3, seed, top, log)
    scheds = [json.dumps(c.schedule, sort_keys=True) for c in top + extra]
    assert len(set(scheds)) == len(scheds) and all(c.alone_ms is None for c in extra)
    lines = []
    rr = rerank_in_network(path, log, top_k=1, explore=3, rounds=4, screen_rounds=2, keep=2,
                           threads=1, seed=seed, progress=lines.append, write=False)  # fmt: skip
    print(rr.summary())
    table = rr.table()
    print(table)
    assert len(table.splitlines()) == len(rr.candidates) + 2
    assert "all conv layers" in table.splitlines()[-1]
    assert sum("screened" in ln for ln in lines) == 2  # 5 -> 3 -> 2
    for key, cands in rr.candidates.items():
        n = sorted(len(c.ms) for c in cands)
        if len(cands) == 5:
            assert n == [2, 2, 4, 8, 8]  # dropped after 1 stage, after 2, the 2 finalists
            finalists = [c for c in cands if len(c.ms) == 8]
            fastest = min(finalists, key=lambda c: statistics.median(c.ms))
            assert rr.ranked(key) is fastest  # a finalist, not one dropped after fewer rounds
            kept = key in confirmed_layers(rr.confirmations)
            assert rr.chosen[key] == (fastest if kept else cands[0]).schedule  # or the default
            first = [c for c in cands if len(c.ms) == 2]
            assert max(statistics.median(c.ms[:2]) for c in finalists) <= min(
                statistics.median(c.ms) for c in first
            )
    # the rest lost candidates of the same code as an earlier one (_distinct_code); the
    # space offers every layer but one 5 distinct schedules
    short = sum(5 - len(c) for c in rr.candidates.values())
    said = [ln for ln in lines if "candidates dropped: the same code" in ln]
    assert short <= 4 or (said and int(said[0].split()[0]) >= short - 4)
    assert sum(len(c) == 5 for c in rr.candidates.values()) >= len(layers) // 2


def _task_of(layer, schedule):
    """The layer's task of ``schedule``'s template."""
    from pyvta.tuner.cpu import nchwc_conv_tasks, schedule_of

    (task,) = [
        t
        for t in nchwc_conv_tasks(layer.workload)
        if schedule_of(t, t.space.get(0))["template"] == schedule["template"]
    ]
    return task


def _moved(task, start: dict, schedule: dict) -> list[str]:
    """The knobs of ``task``'s space in which ``schedule`` differs from ``start``."""
    from pyvta.tuner.cpu import point_of_schedule

    base = point_of_schedule(task, start["knobs"]).to_dict()
    got = point_of_schedule(task, schedule["knobs"]).to_dict()
    return [k for k in base if got[k] != base[k]]


def test_a_sweep_moves_one_knob_of_its_start_every_knob_before_any_twice(small_net):
    """``sweep_candidates``: schedules of the layer's untuned template, each one valid point
    of its space away from the start (the default, then one of those moves), no duplicates,
    the ``fixed`` knobs never moved, every knob moved once before any moves twice."""
    from pyvta.tuner.cpu import point_of_schedule
    from pyvta.tuner.in_network import Candidate, sweep_candidates

    _, layers, _ = small_net
    for layer in layers:
        default = default_conv_schedule(layer.workload)
        task = _task_of(layer, default)
        taken = [Candidate("default", default)]
        start = None
        for _ in range(2):
            begin = start or default
            cands = sweep_candidates(layer, 10**6, taken, start, ("parallel_loops",))
            assert cands, layer.workload.key
            moved = []
            for c in cands:
                assert c.schedule["template"] == default["template"]
                assert task.space.problem(point_of_schedule(task, c.schedule["knobs"])) is None
                diff = _moved(task, begin, c.schedule)
                assert len(diff) == 1 and diff != ["parallel_loops"], (begin, c.schedule)
                moved.append(diff[0])
            knobs = set(moved)
            assert len(set(moved[: len(knobs)])) == len(knobs)
            scheds = [json.dumps(c.schedule, sort_keys=True) for c in cands + taken]
            assert len(set(scheds)) == len(scheds)
            assert len(sweep_candidates(layer, 3, taken, start)) == min(3, len(cands))
            start = cands[-1].schedule


def test_a_second_sweep_starts_from_the_first_ones_choices(small_net, seed):
    """``rerank_in_network(sweep=..., sweep_from=chosen)``: each layer's candidates are its
    default, the earlier choice (if not the default) and one-knob moves from that choice;
    the new choice is one of them. A move whose code is an earlier candidate's gives its
    place to the next (``_distinct_code``), as the progress says: every layer has a move."""
    path, layers, log = small_net
    lines = []
    kw = dict(top_k=0, rounds=1, screen_rounds=1, threads=1, seed=seed, progress=lines.append)
    first = rerank_in_network(path, log, sweep=1, write=False, **kw)
    lines.clear()
    second = rerank_in_network(path, log, sweep=1, sweep_from=first.chosen, write=False, **kw)
    no_move = 0
    for layer in layers:
        key = layer.workload.key
        cands, start = second.candidates[key], first.chosen[key]
        assert cands[0].source == "default"
        assert start in [c.schedule for c in cands]
        sweeps = [c for c in cands if c.source.startswith("sweep")]
        assert all(len(_moved(_task_of(layer, start), start, c.schedule)) == 1 for c in sweeps)
        no_move += not sweeps
        assert second.chosen[key] in [c.schedule for c in cands]
    said = [ln for ln in lines if "candidates dropped: the same code" in ln]
    print(f"{no_move} of {len(layers)} layers without a move: {said}")
    assert no_move == 0  # a move of its default's code gives its place to the next


def test_the_command_descends_in_passes_from_the_choices_beside_the_log(
    small_net, tmp_path, monkeypatch, capsys
):
    """``pyvta tune MODEL --target cpu --trials 0 --in-network 1 --sweep 1 --passes 2``: two
    re-rankings in the network, the first sweeping from the choices already beside the log
    for this host (a run stopped between passes goes on from the last written), the second
    from the first's choices; the last pass's choices are written, the passes drawn.
    ``--sweep`` or ``--passes`` without ``--in-network``, or out of range, is refused."""
    import shutil

    from pyvta.cli import main
    from pyvta.tuner import in_network
    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.in_network import Candidate, Rerank, _write, descent_path

    path, layers, fixture_log = small_net
    log = tmp_path / "cpu.jsonl"
    shutil.copy(fixture_log, log)
    chosen = {la.workload.key: default_conv_schedule(la.workload) for la in layers}
    key = layers[0].workload.key
    chosen[key] = top_candidates(log, layers[0], 1)[1].schedule  # not the default
    cands = {k: [Candidate("default", s, None, [1.0])] for k, s in chosen.items()}
    _write(in_network_path(log), Rerank(cands, chosen, 1, 1), cpu_measured_on())
    starts, real = [], in_network.rerank_in_network

    def recorded(*a, **kw):
        starts.append(kw["sweep_from"])
        rr = real(*a, **kw)
        starts.append(rr.chosen)
        return rr

    monkeypatch.setattr(in_network, "rerank_in_network", recorded)
    tune = ["tune", str(path), "--target", "cpu", "--log", str(log), "--no-progress"]
    assert main([*tune, "--trials", "0", "--in-network", "1", "--sweep", "1", "--passes", "2"]) == 0
    out = capsys.readouterr().out
    assert "in-network pass 1 of 2" in out and "in-network pass 2 of 2" in out
    assert "kept after pass 2: " in out  # what the last pass kept, in one line
    first_from, first_chose, second_from, second_chose = starts
    assert first_from == chosen  # the choices beside the log
    assert second_from == first_chose  # then the first pass's
    assert in_network_choices(log) == second_chose  # the last pass's, written
    doc = json.loads(in_network_path(log).read_text())["hosts"][cpu_measured_on()]
    sources = [c["source"] for d in doc["layers"].values() for c in d["candidates"]]
    assert any(s.startswith("sweep") for s in sources), sources
    png = descent_path(log)  # the passes' confirmations drawn
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in out

    def code(argv):  # the parser's own refusals exit
        try:
            return main(argv)
        except SystemExit as e:
            return e.code

    for bad in (["--sweep", "1"], ["--passes", "2"], ["--in-network", "1", "--sweep", "-1"],
                ["--in-network", "1", "--passes", "0"]):  # fmt: skip
        assert code([*tune, "--trials", "0", *bad]) == 2, bad
    capsys.readouterr()
    vta = [*tune[:2], "--target", "vta", *tune[4:], "--trials", "0", "--in-network", "1"]
    assert code(vta) == 2 and "--target cpu only, not vta" in capsys.readouterr().err


def test_the_descent_plot_marks_each_passes_kept_confirmation(tmp_path, monkeypatch):
    """``plot_descent``: per pass every confirmation and its control drawn, the kept one
    marked; a pass that kept nothing, or had no confirmation, draws no mark."""
    from pathlib import Path

    from matplotlib.axes import Axes

    from pyvta.tuner.in_network import Confirmation, Rerank
    from pyvta.tuner.plot import plot_descent

    def conf(ratio, control):
        net = {"default": [10.0] * 5, "chosen": [10.0 * ratio] * 5, "control": [10.0 * control] * 5}
        return Confirmation(5, net, {})

    passes = [[conf(0.9, 1.0), conf(0.95, 1.0)], [conf(1.0, 0.97)], []]  # kept, none, none
    reranks = [Rerank({}, {}, 1, 1, confirmations=c) for c in passes]
    drawn, real = [], Axes.scatter

    def scatter(ax, x, y, **kw):  # what is drawn, then drawn
        drawn.append((list(x), list(y), kw))
        return real(ax, x, y, **kw)

    monkeypatch.setattr(Axes, "scatter", scatter)
    path = plot_descent(reranks, str(tmp_path / "d.png"), "three passes")
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    kept = [(x, y) for x, y, kw in drawn if kw.get("s") == 80]
    assert kept == [([1], [pytest.approx(1 / 0.9)])]  # pass 1's faster confirmation only
    dots = [(x, y) for x, y, kw in drawn if kw.get("marker") is None and kw.get("s") == 12]
    assert [len(x) for x, _ in dots] == [2, 1, 0]


def test_a_budget_holds_the_passes_in_the_network_and_counts_their_time(
    small_net, tmp_path, monkeypatch, capsys
):
    """``pyvta tune MODEL --target cpu --budget 8s --in-network 1 --sweep 1``: the per-layer
    tuning gets ``1 - IN_NETWORK_SHARE`` of the budget, the passes in the network the rest (as
    many as it holds: none started with less time left than the last took); their time goes to
    the budget's sessions file, so the run resumed finds the whole budget spent, tunes nothing
    and keeps the choices written; the latency plot shades the passes' time, not counted as a
    session resumed. The per-layer costs are faked (``SmallTilesFirst``), each pass is a
    stand-in that takes 0.6 s and writes its choices, and the descent plot is not drawn, so only
    the budget's arithmetic is timed."""
    import shutil

    from pyvta.cli import main
    from pyvta.tuner import cpu_network, in_network, plot
    from pyvta.tuner.budget import IN_NETWORK_SHARE, sessions_path
    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.in_network import Candidate, Rerank, _write

    path, layers, fixture_log = small_net
    log = tmp_path / "cpu.jsonl"
    shutil.copy(fixture_log, log)
    monkeypatch.setattr(
        cpu_network, "network_measurer", lambda _: InProcessMeasurer(SmallTilesFirst(), repeats=1)
    )
    pass_s, passes = 0.6, []

    def a_pass(model, log, sweep, sweep_from, **kw):
        passes.append(time.time())
        time.sleep(pass_s)
        chosen = {la.workload.key: default_conv_schedule(la.workload) for la in layers}
        cands = {k: [Candidate("default", s, None, [1.0])] for k, s in chosen.items()}
        rr = Rerank(cands, chosen, 1, 1, seconds=pass_s)
        _write(in_network_path(log), rr, cpu_measured_on())
        return rr

    monkeypatch.setattr(in_network, "rerank_in_network", a_pass)
    drawn, real_plot = [], plot.plot_latency

    def plot_latency(run, path, **kw):
        drawn.append((run.budget_s, run.budget_total_s, run.in_network_s, run.session_starts_s))
        return real_plot(run, path, **kw)

    monkeypatch.setattr(plot, "plot_latency", plot_latency)
    # each pass's descent plot drawn in no time: the passes' count depends on the stand-in's
    # 0.6 s alone, not on how fast a loaded host draws (the budget counts the drawing too)
    monkeypatch.setattr(plot, "plot_descent", lambda *a, **kw: None)
    budget_s = 8.0
    argv = ["tune", str(path), "--target", "cpu", "--log", str(log), "--tuner", "random",
            "--budget", f"{budget_s:g}s", "--in-network", "1", "--sweep", "1"]  # fmt: skip
    t0 = time.time()
    assert main(argv) == 0
    wall = time.time() - t0
    out = capsys.readouterr().out
    spans = json.loads(sessions_path(log).read_text())["sessions"]
    spent = sum(b - a for a, b in spans)
    tuning_s = (1 - IN_NETWORK_SHARE) * budget_s
    print(f"{len(passes)} passes; spans {spans}; {spent:.2f} s counted of {wall:.2f} s wall")
    assert f"for {tuning_s:.0f} s of the {budget_s:.0f} s budget" in out
    assert len(spans) == 2  # the per-layer tuning's, the passes'
    assert tuning_s - 0.5 <= spans[0][1] - spans[0][0] <= tuning_s + 1.0
    assert spans[0][1] <= spans[1][0] <= passes[0] and spans[1][1] >= passes[-1] + pass_s
    left_s = budget_s - (spans[0][1] - spans[0][0])  # what the passes had: 2 s, about
    # passes go on while the time left holds another: floor(left / pass) of them, one fewer
    # where drawing each pass's plot ate into the last one's room
    assert len(passes) >= 2 and int(left_s / pass_s) - 1 <= len(passes) <= int(left_s / pass_s)
    assert f"stopped after {len(passes)}" in out
    assert f"kept after pass {len(passes)}: each layer's fastest in the ranking" in out
    assert budget_s - pass_s <= spent <= budget_s + pass_s and spent <= wall
    assert json.loads(sessions_path(log).read_text())["in_network"] == [spans[1][0]]
    [(share_s, total_s, ranked, starts)] = drawn
    assert (share_s, total_s, starts) == (tuning_s, budget_s, [0.0])
    [(a, b)] = ranked
    assert a == pytest.approx(spans[0][1] - spans[0][0], abs=0.05) and b - a >= len(passes) * pass_s

    n_passes = len(passes)
    assert main(argv) == 0  # resumed: nothing left to spend, no pass
    again = capsys.readouterr().out
    assert "none started" in again and "stand" in again and len(passes) == n_passes
    assert len(json.loads(sessions_path(log).read_text())["sessions"]) == 3  # its tuning's
    _, _, ranked_again, starts_again = drawn[1]  # the passes' span read back, not a session
    assert ranked_again == [pytest.approx((a, a + spans[1][1] - spans[1][0]), abs=0.05)]
    assert starts_again == [0.0, pytest.approx(spent, abs=0.05)]
    print(again[-300:])
