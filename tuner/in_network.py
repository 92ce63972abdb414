"""Re-ranking a network's tuned CPU conv schedules where they run: inside the network.

    rerank = rerank_in_network("resnet18.onnx", "resnet18_cpu.jsonl", top_k=3)
    rerank.chosen                 # {workload key: schedule}, also in LOG.network.json
    compile_model("resnet18.onnx", "cpu", cpu_schedules=tuned_schedules(model, log))

A tuning log's per-layer bests are measured alone (``tuner.cpu_measure.CpuBackend``: one kernel called
back to back on the same arrays, its weights and input warm in the caches). Inside the network
a layer reads what the previous one just wrote, its weights come cold from memory, and
(ResNet-18 224, AVX2) the isolated bests ran 1-8% slower there than the compiler's defaults.

:func:`rerank_in_network` takes each layer's ``top_k`` schedules of the log (the best record of
each distinct schedule over the layer's templates) and the compiler's default, and builds the
network ``k + 1`` times: variant ``v`` runs each layer's ``v``-th candidate (a layer with fewer
candidates runs them again in turn). The variants run interleaved, one inference each per
round (in a seeded random order, ``round_order``), for ``rounds`` rounds, every node timed by
the executor (its timing table), so each candidate is timed in the layout, cache state and
threads the network gives it, under the same load as its rivals. Per layer the candidate with
the lowest median time per inference (all its launches added) wins.

A search in the network: ``explore`` more candidates per layer, local steps in its templates'
spaces from the default and the log's bests (no isolated measurement vouches for them:
:func:`space_candidates`) and screening stages in the manner of
successive halving: while a layer has more than ``keep`` candidates, a stage of a few rounds
keeps the faster half of each layer's; the finalists get the full ``rounds``.

Confirmations last (``confirm_rounds``): the network with the changed layers' choices against
the network of every layer's default, and that built again (the control: what the timing says
for no change), interleaved, timed afresh (:class:`Confirmation`). While
the network (beyond the control's distance from 1) or some changed layer is not faster (the
median of its per-round paired ratios), the next confirmation tries only the layers that were
faster, until all are and the network is, or none is left. The layers of the confirmation
whose network was fastest against the default keep their choice (none if no network was
faster by more than its control strayed); the rest run their default. A
ranking made while the host's speed moved (a 2-core Zen 1 host: the same network 55.8 ms, then
34.2 ms, half an hour apart) can keep a schedule that loses, and the user compares exactly
these two networks.

The choices go to ``<log>.network.json`` (:func:`in_network_path`), by the kind of host they
were made on (each kind's kept when another's are written); ``tuner.cpu_network.
cpu_schedules`` takes them over the isolated bests on a host of the same kind. Each kind's
choices record the code they were timed on (:func:`changed_code`: per layer they change, a
digest of its kernels' optimised LLVM IR and of its untuned schedule's), so a later compiler
that makes other code for them says they may be stale (:func:`stale_choices`), and one that
changes only other code says nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyvta.cache import write_atomic
from pyvta.compiler.backend.llvm.cache import compiler_version
from pyvta.tuner.host_load import LoadMeter
from pyvta.tuner.in_network_candidates import (
    Candidate,
    space_candidates,
    sweep_candidates,
    top_candidates,
)
from pyvta.tuner.in_network_code import _distinct_code, changed_code, conv_keys, plan_network
from pyvta.tuner.in_network_confirm import (
    Confirmation,
    InNetworkError,
    comparable,
    confirmed_layers,
    fastest,
    paired_ratio,
    round_order,
)

# 2: {"v": 2, "hosts": {machine: one host's choices}}, each host kind's kept when another
# writes its own; 1 (still read): one host's choices at the top level, with its "machine"
IN_NETWORK_VERSION = 2
MAX_REL_ERR = 1e-4  # a variant's output against the default variant's


def in_network_path(log: str | os.PathLike) -> Path:
    """Where :func:`rerank_in_network` keeps its choices, next to the tuning ``log``."""
    return Path(f"{log}.network.json")


def descent_path(log: str | os.PathLike) -> Path:
    """Where ``pyvta tune --in-network K --sweep N`` draws its passes (:func:`descend_in_network`,
    ``tuner.plot.plot_descent``), next to the tuning ``log``."""
    return Path(f"{log}.descent.png")


@dataclass
class Rerank:
    """Per layer (workload key) its candidates, and the schedule chosen (the ranking's
    fastest, or the default where the confirmations did not bear it out)."""

    candidates: dict  # key -> [Candidate]
    chosen: dict  # key -> schedule
    rounds: int
    threads: int
    confirmations: list = field(default_factory=list)  # [Confirmation]: none, none needed
    ranked_index: dict = field(default_factory=dict)  # key -> its fastest finalist's index
    code: dict = field(default_factory=dict)  # key -> the code timed: changed_code's
    seconds: float | None = None  # wall seconds the re-ranking took (a budget's next pass)

    def ranked(self, key: str) -> Candidate:
        """The layer's fastest candidate by the ranking (of those timed in the last stage)."""
        return self.candidates[key][self.ranked_index[key]]

    def summary(self) -> str:
        lines = [f"{'layer':<62} {'candidate':<44} {'alone ms':>8} {'in net ms':>9}"]
        for key, cands in self.candidates.items():
            for c in cands:
                mark = "*" if c.schedule == self.chosen[key] else " "
                alone = "-" if c.alone_ms is None else f"{c.alone_ms:.3f}"
                src = c.source.split("[")[0] + "#" + c.source.rpartition("#")[2]
                src = c.source if c.source.startswith(("default", "sweep", "start")) else src
                lines.append(f"{key[:62]:<62} {mark}{src[:43]:<43} {alone:>8} {c.median_ms:9.3f}")
        return "\n".join(lines)

    def table(self) -> str:
        """Per layer the default's and the chosen schedule's median ms per inference in the
        network (all launches), their ratio and the chosen one's template; the sums last."""
        lines = [f"{'layer':<62} {'default ms':>10} {'chosen ms':>9} {'ratio':>6}  chosen"]
        tot_d = tot_c = 0.0
        for key, cands in self.candidates.items():
            d = cands[0].median_ms  # the default is every layer's first candidate
            c = next(c for c in cands if c.schedule == self.chosen[key])
            tot_d, tot_c = tot_d + d, tot_c + c.median_ms
            what = "default" if c is cands[0] else c.schedule["template"]
            lines.append(
                f"{key[:62]:<62} {d:10.3f} {c.median_ms:9.3f} {d / c.median_ms:6.3f}  {what}"
            )
        lines.append(f"{'all conv layers':<62} {tot_d:10.3f} {tot_c:9.3f} {tot_d / tot_c:6.3f}")
        return "\n".join(lines)

    def kept(self) -> tuple[int, Confirmation, str] | None:
        """The confirmation whose network is kept (:func:`fastest`): its number (from 1), it,
        and ", the pass's start" where it timed the pass's start; None where none was kept."""
        best = fastest(self.confirmations)
        if best is None:
            return None
        start = ", the pass's start" if best.incumbent else ""
        return 1 + self.confirmations.index(best), best, start

    def confirmed(self) -> str:
        """Each :class:`Confirmation`: both networks' median ms and the paired speed-up, per
        changed layer its paired speed-up; then the layers that keep their choice."""
        if not self.confirmations:
            return "confirmation: none (every layer's choice is its ranked fastest)"
        lines, same = [], {id(c) for c in comparable(self.confirmations)}
        for n, conf in enumerate(self.confirmations, 1):
            med = {k: statistics.median(v) for k, v in conf.network_ms.items()}
            start = " (the pass's start)" if conf.incumbent else ""
            aside = "" if id(conf) in same else "; set aside: the host ran slower (SAME_HOST_SPEED)"
            lines.append(
                f"confirmation {n}{start}, {conf.rounds} rounds, {len(conf.layer_ms)} layers"
                " changed:"
                f" default network {med['default']:.3f} ms, changed {med['chosen']:.3f} ms,"
                f" paired {conf.speedup:.3f}x"
                + ("" if conf.control is None else f"; the default built again {conf.control:.3f}x")
                + ("" if conf.host is None else f"; host: {conf.host}")
                + aside
            )
            for key, t in conf.layer_ms.items():
                r = paired_ratio(t["default"], t["chosen"])
                lines.append(f"  {key[:60]:<60} paired {r:6.3f}x")
        kept = self.kept()
        if kept is not None:
            n, best, start = kept
            lines.append(f"kept: the {len(best.layer_ms)} changed layers of confirmation {n} (its"
                         f" network the fastest{start}); the rest run their default")  # fmt: skip
        else:
            lines.append("kept: none (no network faster than the default's by more than its"
                         " control strayed)")  # fmt: skip
        return "\n".join(lines)


def _inputs(graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        v = graph.values[name]
        out[name] = rng.standard_normal(v.shape).astype(v.dtype)
    return out


class _Variants:
    """The network built with one candidate per layer (``pick``: {workload key: candidate
    index}), each build kept while its picks may run again."""

    def __init__(self, model, cands: dict, threads: int, clock, progress):
        self.model, self.cands, self.threads, self.clock = model, cands, threads, clock
        self.progress, self.built, self.n_built = progress, {}, 0

    def get(self, pick: dict):
        """The network of ``pick``, built once while kept (:meth:`keep_only`)."""
        tag = tuple(sorted(pick.items()))
        if tag not in self.built:
            self.built[tag] = self.fresh(pick)
        return self.built[tag]

    def fresh(self, pick: dict):
        """The network of ``pick`` built anew (its own plan, weights and arena; the kernels
        are the process's), not kept."""
        from pyvta.compiler.targets.cpu.kernels import CpuKernels
        from pyvta.runtime.executor import Executor

        graph = plan_network(self.model, {k: self.cands[k][i].schedule for k, i in pick.items()})
        keys = conv_keys(graph)
        for n in graph.nodes:  # the plan runs what was asked (it could refuse a schedule)
            want = self.cands[keys[n.name]][pick[keys[n.name]]].schedule if n.name in keys else None
            if want is not None and n.attrs["schedule"] != want:
                raise InNetworkError(f"{n.name}: the plan runs {n.attrs['schedule']}, not {want}")
        t0 = time.perf_counter()
        executor = Executor(graph, None, {"cpu": CpuKernels(graph, self.threads)}, self.clock)
        self.n_built += 1
        if self.progress:
            self.progress(f"variant {self.n_built}: built in {time.perf_counter() - t0:.0f} s")
        return executor, keys, pick

    def keep_only(self, tags: list) -> None:
        self.built = {t: v for t, v in self.built.items() if t in tags}


def rerank_in_network(
    model: str | os.PathLike,
    log: str | os.PathLike,
    top_k: int = 3,
    rounds: int = 15,
    threads: int | None = None,
    seed: int = 0,
    progress=print,
    write: bool = True,
    clock=time.perf_counter,
    explore: int = 0,
    screen_rounds: int = 4,
    keep: int = 2,
    sweep: int = 0,
    sweep_from: dict | None = None,
    confirm_rounds: int = 20,
) -> Rerank:
    """Time each conv layer's default, ``top_k`` best logged schedules and ``explore``
    steps from them in its spaces (:func:`space_candidates`) inside ``model`` (an ONNX
    path) on ``threads`` threads (default: all cores), and choose per layer the fastest there
    (see the module docstring); with ``write`` the choices go to :func:`in_network_path` of
    ``log``; ``sweep`` more per layer change one knob of the default, or of
    ``sweep_from``'s schedule for the layer ({workload key: schedule}, itself a candidate;
    :func:`sweep_candidates`), each compiled to code no earlier candidate of the layer has
    (as many as its moves allow). While a layer has more than ``keep`` candidates, a
    screening stage of ``screen_rounds`` rounds keeps the faster half (at least ``keep``) of each layer's (by
    median, every stage's times counted); the last stage runs ``rounds`` rounds; then
    confirmations of ``confirm_rounds`` rounds each keep the choices borne out in the network
    (:func:`_confirm_all`; 0: none, every ranked choice kept). Every
    variant's output must match the default's (else ``InNetworkError``). ``clock`` times each
    node (``time.thread_time`` with ``threads=1``: the CPU time of the calling thread, which
    leaves out the time it waited for a core on a shared machine; the kernels then run on the
    calling thread only)."""
    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.cpu_network import cpu_network_layers

    if min(top_k, explore, sweep, confirm_rounds) < 0 or min(rounds, screen_rounds, keep) < 1:
        raise InNetworkError(
            f"top_k, explore, sweep and confirm_rounds must be >= 0, rounds, screen_rounds and"
            f" keep >= 1; got {top_k}, {explore}, {sweep}, {confirm_rounds}, {rounds},"
            f" {screen_rounds}, {keep}"
        )
    if top_k + explore + sweep < 1:
        raise InNetworkError(
            "top_k, explore and sweep must be >= 1 together (the default's rivals)"
        )
    if clock is time.thread_time and threads != 1:
        raise InNetworkError("clock time.thread_time times the calling thread: needs threads=1")
    threads = threads or os.cpu_count() or 1
    t0 = time.perf_counter()
    cands, moves = {}, {}
    for k, layer in enumerate(cpu_network_layers(str(model))):
        c = top_candidates(log, layer, top_k)
        start = (sweep_from or {}).get(layer.workload.key)
        if start is not None and c[0].schedule != start:
            # first after the default, so that where a logged one compiles to its code the
            # start is the one kept (``_distinct_code``), and the pass can confirm it
            logged = [x for x in c[1:] if x.schedule == start] or [Candidate("start", start)]
            c = [c[0], *logged, *(x for x in c[1:] if x.schedule != start)]
        # one thread runs a parallel loop as any other: no move of the threads' split
        fixed = ("parallel_loops",) if threads == 1 else ()
        # every move, in order: one of an earlier candidate's code gives its place to the next
        moves[layer.workload.key] = sweep_candidates(layer, None, c, start, fixed) if sweep else []
        taken = c + moves[layer.workload.key]
        cands[layer.workload.key] = c + space_candidates(layer, explore, seed + k, taken, log)
    cands = _distinct_code(model, cands, threads, progress, moves, sweep)
    variants = _Variants(model, cands, threads, clock, progress)
    alive = {key: list(range(len(c))) for key, c in cands.items()}
    executor = variants.get({key: 0 for key in cands})[0]  # every layer's default
    x = _inputs(executor.graph, seed)
    ref = executor.run(x)[0][0]
    while True:
        n_var = max(len(a) for a in alive.values())
        final = n_var <= keep
        stage = [variants.get({k: a[v % len(a)] for k, a in alive.items()}) for v in range(n_var)]
        variants.keep_only([tuple(sorted(p.items())) for _, _, p in stage])
        for executor, _, _ in stage:
            out = executor.run(x)[0][0]
            err = float(np.abs(out - ref).max() / (np.abs(ref).max() + 1e-30))
            if not err < MAX_REL_ERR:
                raise InNetworkError(f"a variant's output differs from the default's ({err:.3g})")
        _time_rounds(stage, cands, x, rounds if final else screen_rounds)
        if final:
            break
        alive = {
            k: sorted(a, key=lambda i, k=k: cands[k][i].median_ms)[: max(keep, -(-len(a) // 2))]
            for k, a in alive.items()
        }
        if progress:
            progress(f"screened: {sum(map(len, alive.values()))} candidates left")
    # each layer's fastest finalist (one dropped early has fewer, earlier rounds)
    best = {key: min(a, key=lambda i, k=key: cands[k][i].median_ms) for key, a in alive.items()}
    confs = _confirm_all(variants, best, x, confirm_rounds, progress) if confirm_rounds else []
    if confirm_rounds and sweep_from:  # the pass's start timed beside the ranking's networks
        confs += _confirm_incumbent(variants, cands, sweep_from, confs, x, confirm_rounds, progress)
    chosen = _chosen(cands, best, confs if confirm_rounds else None)
    code = changed_code(model, chosen, threads)
    out = Rerank(cands, chosen, rounds, threads, confs, best, code, time.perf_counter() - t0)
    if write:
        _write(in_network_path(log), out, cpu_measured_on())
    return out


def descend_in_network(model, log, passes: int | None, sweep: int, start: dict | None = None, **kw):
    """A coordinate descent in the network: ``passes`` calls of :func:`rerank_in_network`
    (``kw`` its other arguments; None: until the caller stops asking), each with ``sweep``
    one-knob moves per layer from the last one's choices (the first from ``start``: {workload
    key: schedule}, e.g. :func:`in_network_choices` of ``log``; else the defaults). Yields each
    pass's :class:`Rerank` as it ends (written beside ``log`` unless ``write=False``)."""
    chosen = start
    for _ in itertools.count() if passes is None else range(passes):
        rr = rerank_in_network(model, log, sweep=sweep, sweep_from=chosen, **kw)
        chosen = rr.chosen
        yield rr


def _timed(executor, keys, x) -> tuple[float, dict[str, float]]:
    """One inference: its ms (all nodes) and each conv layer's (all its launches)."""
    total, per_key = 0.0, {}
    for row in executor.run(x)[1].rows:
        total += row.ms
        if row.node in keys:
            per_key[keys[row.node]] = per_key.get(keys[row.node], 0.0) + row.ms
    return total, per_key


def _confirm(variants: _Variants, pick: dict, x, rounds: int) -> Confirmation:
    """The network of ``pick`` (workload key -> candidate index) against every layer's default
    (0) and against the default network built again (the control), interleaved (each round in
    a seeded random order: rotated, each followed the same one in most rounds), ``rounds``
    rounds."""
    default = {k: 0 for k in pick}
    built = {"default": variants.get(default), "chosen": variants.get(pick)}
    built["control"] = variants.fresh(default)
    changed = [k for k, i in pick.items() if i]
    net = {name: [] for name in built}
    per_layer = {k: {name: [] for name in ("default", "chosen")} for k in changed}
    names = list(built)
    with LoadMeter() as meter:
        for r in range(rounds):
            for name in round_order(names, r):
                executor, keys, _ = built[name]
                total, per_key = _timed(executor, keys, x)
                net[name].append(total)
                for k in per_layer if name != "control" else ():
                    per_layer[k][name].append(per_key[k])
    picked = {k: pick[k] for k in changed}
    return Confirmation(rounds, net, per_layer, picked, host=meter.load)


def _confirm_all(variants: _Variants, best: dict, x, rounds: int, progress) -> list:
    """Confirmations of ``best`` (workload key -> its ranked candidate's index), each trying
    the layers the last found faster, until one is borne out or no layer is left to try."""
    trying = {k for k, i in best.items() if i}
    out = []
    while trying:
        conf = _confirm(variants, {k: best[k] if k in trying else 0 for k in best}, x, rounds)
        out.append(conf)
        if progress:
            progress(
                f"confirmation {len(out)}: {len(trying)} layers changed, {conf.speedup:.3f}x"
                f" the defaults (paired; the defaults built again: {conf.control:.3f}x),"
                f" {len(conf.faster())} of them faster"
            )
        if conf.borne_out or conf.faster() == trying:
            break  # kept; or every layer faster but not the network: none kept
        trying = conf.faster()
    return out


def _chosen(cands: dict, best: dict, confs: list | None) -> dict:
    """Per layer the schedule kept: that of the confirmation whose network was the fastest
    (:func:`fastest`; the ranking's fastest, ``best``, or the pass's start), the default where
    it changes nothing or none was borne out; with ``confs`` None (no confirmations), ``best``."""
    kept = set(best) if confs is None else confirmed_layers(confs)
    win = fastest(confs or [])
    index = win.pick if win is not None and win.incumbent else best
    return {key: c[index[key] if key in kept else 0].schedule for key, c in cands.items()}


def _confirm_incumbent(variants, cands, start: dict, confs, x, rounds: int, progress) -> list:
    """The network the pass started from (``start``: {workload key: schedule}, the last pass's
    choices) confirmed as the ranking's networks are, where it changes a layer and none of
    them is it: so a pass whose own networks are not borne out keeps the choices it started
    from where they are (a descent on MobileNet fell back to the defaults in 3 of 23 passes),
    and one of the ranking's is kept only where it beat them in the same pass."""
    pick = {}
    for key, c in cands.items():  # its candidate: the start (before the logged), else 0
        pick[key] = next((i for i, x in enumerate(c) if x.schedule == start.get(key)), 0)
    if not any(pick.values()) or any(c.pick == {k: i for k, i in pick.items() if i} for c in confs):
        return []
    conf = _confirm(variants, pick, x, rounds)
    conf.incumbent = True
    if progress:
        progress(
            f"confirmation {len(confs) + 1} (the pass's start): {len(conf.layer_ms)} layers"
            f" changed, {conf.speedup:.3f}x the defaults (paired; the defaults built again:"
            f" {conf.control:.3f}x)"
        )
    return [conf]


def _time_rounds(stage, cands, x, rounds: int) -> None:
    """Run the ``stage``'s variants interleaved, one inference each per round (in a seeded
    random order), adding each conv node's time (summed per layer) to its candidate's."""
    for r in range(rounds):
        for v in round_order(range(len(stage)), r):
            executor, keys, pick = stage[v]
            for key, ms in _timed(executor, keys, x)[1].items():
                if pick[key] in (p[key] for _, _, p in stage[:v]):
                    continue  # a candidate that runs in two variants of a stage: timed once
                cands[key][pick[key]].ms.append(ms)


def _write(path: Path, rerank: Rerank, machine: str) -> None:
    """The choices of ``machine`` into ``path``, beside those of other host kinds there, with
    the code they were timed on (``rerank.code``)."""
    hosts = _read_hosts(path) if path.exists() else {}
    hosts[machine] = {
        "compiler": compiler_version(),
        "code": rerank.code,
        "threads": rerank.threads,
        "rounds": rerank.rounds,
        "ts": time.time(),
        "layers": {
            key: {
                "chosen": rerank.chosen[key],
                "candidates": [
                    {
                        "source": c.source,
                        "schedule": c.schedule,
                        "alone_ms": c.alone_ms,
                        "in_network_ms": c.ms,
                    }
                    for c in cands
                ],  # fmt: skip
            }
            for key, cands in rerank.candidates.items()
        },
    }
    if rerank.confirmations:
        hosts[machine]["confirmations"] = [c.to_json() for c in rerank.confirmations]
    if rerank.seconds is not None:
        hosts[machine]["seconds"] = rerank.seconds
    doc = {"v": IN_NETWORK_VERSION, "hosts": dict(sorted(hosts.items()))}
    write_atomic(path, json.dumps(doc, indent=1).encode())


def _read_hosts(path: Path) -> dict[str, dict]:
    """``{machine: its choices}`` of a choices file (version 1 or 2)."""
    try:
        doc = json.loads(path.read_text())
        if doc["v"] == 1:
            hosts = {doc["machine"]: doc}
        elif doc["v"] == IN_NETWORK_VERSION:
            hosts = doc["hosts"]
        else:
            raise KeyError(f"version {doc['v']} (this reads 1 and {IN_NETWORK_VERSION})")
        for entry in hosts.values():
            if not isinstance(entry["layers"], dict):
                raise TypeError("layers must be an object")
        return dict(hosts)
    except (ValueError, KeyError, TypeError) as e:
        raise InNetworkError(f"{path} is not an in-network choices file ({e})") from e


def in_network_hosts(log: str | os.PathLike) -> dict[str, dict]:
    """``{machine: {"threads", "rounds", "ts", "seconds", "layers": {workload key: {"chosen",
    "candidates"}}}}``: the in-network choices beside ``log`` by the kind of host they were
    made on (``tuner.cpu_measure.cpu_measured_on``; ``seconds``: how long the re-ranking
    that made them took, where it was recorded); ``{}`` if there are none."""
    path = in_network_path(log)
    return _read_hosts(path) if path.exists() else {}


def stale_choices(log: str | os.PathLike, model: str | os.PathLike) -> str | None:
    """Why this kind of host's in-network choices beside ``log`` may no longer be its fastest
    schedules for ``model`` (an ONNX path): the code of a layer they change, or of its
    untuned schedule, is not the code they were timed on (:func:`changed_code`; a change to
    the code generator ran the old MobileNet choices at 0.97x the untuned schedules). Choices
    that record no code (written before it was) are judged by the ``compiler_version`` they
    were timed under, or by its absence. None where they were timed on today's code, there
    are none for this host, or those with code are of layers ``model`` does not have. They are
    applied either way."""
    from pyvta.tuner.cpu_measure import cpu_measured_on

    here = in_network_hosts(log).get(cpu_measured_on())
    if here is None:
        return None
    where = f"the in-network choices for this CPU in {in_network_path(log)}"
    again = (
        f"To time them again: pyvta tune MODEL --target cpu --log {log} --trials 0 --in-network 3"
    )
    if "code" in here:
        from pyvta.tuner.in_network_code import conv_keys, plan_network

        chosen = {key: d["chosen"] for key, d in here["layers"].items()}
        # another network's layers (a log applied to a model it was not made for) say nothing
        untuned = plan_network(model, {})
        mine = set(conv_keys(untuned).values())
        now = changed_code(model, chosen, here["threads"], untuned)
        then = {k: v for k, v in here["code"].items() if k in mine}
        moved = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
        if not moved:
            return None
        return (
            f"{where} were timed on other code than this compiler makes for {len(moved)} of the"
            f" {len(set(now) | set(then))} layers they change (first: {moved[0]}): they may now"
            f" run slower than the untuned schedules. {again}"
        )
    made, now = here.get("compiler"), compiler_version()
    if made == now:
        return None
    made = f"compiler {made}" if made else "a compiler version they do not record"
    return (
        f"{where} were timed under {made}, this is {now}: they may now run slower than the"
        f" untuned schedules. {again}"
    )


def in_network_choices(log: str | os.PathLike) -> dict[str, dict]:
    """``{workload key: schedule}`` chosen in the network for ``log`` (:func:`in_network_path`),
    if choices were made on this kind of host; else ``{}``."""
    from pyvta.tuner.cpu_measure import cpu_measured_on

    here = in_network_hosts(log).get(cpu_measured_on())
    return {} if here is None else {key: d["chosen"] for key, d in here["layers"].items()}
