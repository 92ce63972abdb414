"""Tuning a network within a time budget: a task scheduler in the manner of Ansor's.

    tasks = [BudgetTask(task, weight=launches, initial=[default, *prior]) for ...]
    run = tune_with_budget(tasks, parse_duration("20m"), measurer, log="net.jsonl")
    run.latency_curve()     # [(tuning seconds, estimated network cost), ...]

Each round gives the next slice of trials (``slice_trials``) to the task with the largest
expected gain: its weight (launches per inference) times Ansor's gradient estimate, the mix of
the recent improvement rate of its best cost (over its last ``window`` trials) and the optimistic
rate ``best / trials`` (its best could keep falling as fast as it did on average); with
probability ``eps`` the task is drawn at random instead, so that no task starves. Before any
slice, a first pass measures every task's default (its first ``initial`` config: what the
compiler runs untuned) alone: the tasks the untuned network runs first, largest expected work
(``weight`` x ``flops``) first, so that the network's latency is known from the start; the
rest of ``initial`` opens the task's later slices. Tasks of one ``group`` are alternative
templates of one layer (a CPU conv's direct, Winograd, pointwise schedules): the network counts
the group's best only, and a task behind its group's best has its gain scaled by how far
behind it is.

The budget is wall time and holds within a slice: a slice is measured ``chunk_trials`` at a
time, none is started once the budget is spent, and a measurer that takes a deadline
(``LocalMeasurer``: its build and run timeouts cut to the time left) gets the budget's end; a
candidate that times out at that deadline is dropped (not logged, not shown to the tuner: a
later session may measure it), so a run ends about at its budget.

Resumable: every measurement goes to the JSONL tuning log as it is known (``tuner.log``), and
the tuning sessions' spans go to ``<log>.budget.json`` after each slice. Run again with the
same log and the records already there are fed to the tuners (never measured again), the time
already spent (the sessions' spans, extended to their last record) counts against the budget,
and the latency curve continues where it stopped.

The network's estimated cost at a moment is the sum over layers (groups) of their weight times
their best cost known then, the untuned schedule's counting from time 0 (the compiler has it
before any tuning): so the curve starts at 0 with the untuned network. A layer whose default
was not measured (the first pass cut by the budget, or it failed) counts an estimate: its
``flops`` at the median seconds per flop of the measured defaults; one whose space lacks the
compiler's untuned schedule counts the nearest point's cost, also an estimate
(``BudgetRun.baseline``).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyvta.cache import write_atomic
from pyvta.isa.errors import PyvtaError
from pyvta.tuner.log import TuningLog, make_record, read_records
from pyvta.tuner.task import Task
from pyvta.tuner.tuners import make_tuner

DURATION_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}
"""A ``--budget`` duration's unit suffix -> seconds per unit."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh])\s*$")


class BudgetError(PyvtaError, ValueError):
    """A time budget that cannot be understood or used."""


def parse_duration(text: str) -> float:
    """Seconds of ``"90s"``, ``"20m"``, ``"1.5h"`` (a positive number and one unit: s, m, h)."""
    m = _DURATION.match(str(text).lower())
    seconds = float(m.group(1)) * DURATION_UNITS_S[m.group(2)] if m else 0.0
    if not m or seconds <= 0:
        raise BudgetError(
            f"duration {text!r} not understood: a positive number followed by one unit,"
            f" s (seconds), m (minutes) or h (hours), e.g. 90s, 20m, 1.5h"
        )
    return seconds


IN_NETWORK_SHARE = 0.25
"""With ``--in-network K``, the share of a CPU network's ``--budget`` kept for its re-rankings in
the running network (``tuner.in_network``), the per-layer tuning getting the rest. ResNet-18 on
Zen 5 (``--budget 10m --in-network 3 --sweep 4``): the first pass took 67 s (as long as about
40 of the 263 configs the tuning measured in its 450 s), the second 42 s; MobileNet's first
32 s, the others 4-8 s (docs/measurements.md, "A budget that holds the re-rankings in the
network")."""


def sessions_path(log: str | os.PathLike) -> Path:
    """Where a budgeted run keeps its sessions' spans, next to its ``log``."""
    return Path(f"{log}.budget.json")


def plot_path(log: str | os.PathLike) -> Path:
    """The latency-over-time PNG's default place, next to ``log``."""
    p = Path(log)
    return p.with_name(p.stem + ".latency.png")


@dataclass
class BudgetTask:
    """One task of a network: ``weight``: its launches per inference; ``initial``: configs (or
    indices) measured first (the compiler's default first: the first pass measures it alone);
    ``name``: for the progress lines; ``group``: tasks of one group (non-empty) are one layer's
    templates, the network counting the best of them (one weight for the group); ``untuned``:
    the untuned network runs this task's default (in a group, the template the compiler
    picks); ``stand_in``: its default is the space's point nearest the compiler's untuned
    schedule, not that schedule (the untuned cost it gives is an estimate); ``flops``: the
    work of one launch (0: unknown), for the first pass's order and the estimate of a default
    not measured."""

    task: Task
    weight: float = 1.0
    initial: list = field(default_factory=list)
    name: str = ""
    group: str = ""
    untuned: bool = True
    stand_in: bool = False
    flops: float = 0.0


@dataclass
class _State:
    spec: BudgetTask
    tuner: object
    initial: list  # indices still to measure first
    curve: list = field(default_factory=list)  # best-so-far cost after each trial
    times: list = field(default_factory=list)  # (tuning seconds, cost) per trial
    default: int | None = None  # the index of its default (``initial[0]``)
    default_cost: float | None = None  # once measured
    default_t: float | None = None  # the tuning time it was measured

    @property
    def best(self) -> float:
        return self.curve[-1] if self.curve else math.inf

    @property
    def n(self) -> int:
        return len(self.curve)

    def note(self, t: float, cost: float, index: int | None = None) -> None:
        self.curve.append(min(self.best, cost))
        self.times.append((t, cost))
        if index is not None and index == self.default:
            self.default_cost, self.default_t = cost, t


@dataclass
class BudgetRun:
    """A budgeted run: per task its trials' ``(tuning seconds, cost)``; ``spent_s``: tuning
    time in all (resumed sessions included); ``n_resumed``: records read back from the log;
    ``n_measured``: measured in this session; ``n_cut``: candidates dropped at the budget's end
    (not started, or timed out under a bound cut to the time left); ``picks``: the task index
    of each slice; ``default_costs``: per task its default's measured cost (None: not
    measured); ``first_pass_s``: the tuning time the first pass ended (None: not ended);
    ``in_network_s``: the spans of time the re-rankings in the network took (``counted_span``),
    ``budget_total_s`` the budget they shared with the tuning (``budget_s``: its share)."""

    tasks: list
    trials: list  # per task: [(t, cost), ...] in order
    spent_s: float
    budget_s: float
    n_resumed: int = 0
    n_measured: int = 0
    n_cut: int = 0
    picks: list = field(default_factory=list)
    session_starts_s: list = field(default_factory=list)  # tuning time each session began
    in_network_s: list = field(default_factory=list)  # (start, end): re-rankings in the network
    budget_total_s: float | None = None  # the whole budget, where the tuning had a share of it
    default_costs: list = field(default_factory=list)
    first_pass_s: float | None = None

    def best(self, i: int) -> float:
        return min((c for _, c in self.trials[i]), default=math.inf)

    def groups(self) -> list[list[int]]:
        """Task indices per layer: a group's tasks together, an ungrouped task alone."""
        return _groups(self.tasks)

    def baseline(self) -> tuple[list[float], int]:
        """Per group (``groups``) the cost of one launch of the untuned network's schedule: its
        untuned task's measured default (an estimate if that is a ``stand_in``), else an
        estimate (its ``flops`` x the median seconds per flop of the exact ones), else inf;
        and how many groups are estimates."""
        groups = self.groups()
        known, near = [None] * len(groups), [False] * len(groups)
        for k, g in enumerate(groups):
            costs = [
                (self.tasks[i].stand_in, c)
                for i in g
                if self.tasks[i].untuned
                and i < len(self.default_costs)
                and (c := self.default_costs[i]) is not None
                and math.isfinite(c)
            ]
            if costs:
                near[k], known[k] = min(costs)  # an exact one first
        rates = [c / self.tasks[g[0]].flops for c, g, n in zip(known, groups, near, strict=True)
                 if c is not None and not n and self.tasks[g[0]].flops > 0]  # fmt: skip
        rate = float(np.median(rates)) if rates else None
        out, n_est = [], sum(near)
        for c, g in zip(known, groups, strict=True):
            if c is None and rate is not None and self.tasks[g[0]].flops > 0:
                c = rate * self.tasks[g[0]].flops
                n_est += 1
            out.append(math.inf if c is None else c)
        return out, n_est

    def latency(self) -> float:
        base, _ = self.baseline()
        return sum(
            min(base[k], *(self.best(i) for i in g)) * self.tasks[g[0]].weight
            for k, g in enumerate(self.groups())
        )

    def latency_curve(self) -> list[tuple[float, float]]:
        """``(tuning seconds, estimated network cost)``: at 0 the untuned network's (where
        ``baseline`` knows every layer), then after every trial once every layer has a cost."""
        events = sorted((t, i, c) for i, tr in enumerate(self.trials) for t, c in tr)
        base, _ = self.baseline()
        groups = self.groups()
        of = {i: k for k, g in enumerate(groups) for i in g}
        now = list(base)  # per group: its best known cost
        weight = [self.tasks[g[0]].weight for g in groups]
        out = []
        if all(math.isfinite(b) for b in now):
            out.append((0.0, sum(b * w for b, w in zip(now, weight, strict=True))))
        for t, i, c in events:
            now[of[i]] = min(now[of[i]], c)
            if all(math.isfinite(b) for b in now):
                out.append((t, sum(b * w for b, w in zip(now, weight, strict=True))))
        return out


def _groups(tasks) -> list[list[int]]:
    out: dict = {}
    for i, t in enumerate(tasks):
        out.setdefault(t.group or ("", i), []).append(i)
    return list(out.values())


def expected_gain(curve, weight: float, window: int = 16, alpha: float = 0.5) -> float:
    """Ansor's gradient estimate of how fast ``weight`` x this task's best cost falls per trial:
    ``alpha`` x the recent rate (the best's drop over its last ``window`` trials) plus
    ``1 - alpha`` x the optimistic rate ``best / trials`` (Ansor weighs the recent rate 0.2; at
    0.2 a task whose best stays flat outranks one still falling at equal trials, since the
    optimistic rate favours the larger best, so the recent rate gets half here). Infinite before any trial, 0 while
    every trial failed (the task then gets only the random ``eps`` slices)."""
    if not curve:
        return math.inf
    if not math.isfinite(curve[-1]):
        return 0.0  # every trial failed: left to the eps draws
    n = len(curve)
    past = curve[max(0, n - 1 - window)]
    recent = (past - curve[-1]) / min(window, n) if math.isfinite(past) else curve[-1] / n
    return weight * (alpha * recent + (1 - alpha) * curve[-1] / n)


@contextmanager
def _deadline(measurer, seconds: float):
    """``measurer`` (or the one it wraps, ``.inner``) with no build or run past ``seconds``
    from now while inside, where it takes a ``deadline`` (``LocalMeasurer``); yields a
    callable telling, after a measurement, whether the deadline was reached (so a timeout then
    was the budget's, not the candidate's)."""
    m = measurer
    while m is not None and not hasattr(m, "deadline"):
        m = getattr(m, "inner", None)
    if m is None:
        yield lambda: False
        return
    end = time.monotonic() + seconds
    saved, m.deadline = m.deadline, end
    try:
        yield lambda: time.monotonic() >= end - 0.05
    finally:
        m.deadline = saved


def _read_doc(path: Path) -> tuple[list[list[float]], list[float]]:
    """The sessions file's ``[start, end]`` wall-clock spans, and the starts of those the
    re-rankings in the network took (``counted_span``)."""
    if not path.exists():
        return [], []
    try:
        doc = json.loads(path.read_text())
        spans = [[float(a), float(b)] for a, b in doc["sessions"]]
        return spans, [float(a) for a in doc.get("in_network", [])]
    except (ValueError, KeyError, TypeError) as e:
        raise BudgetError(
            f"{path} is not a budget sessions file ({e}); remove it to restart"
        ) from e


def _write_sessions(path: Path, spans, in_network: list | None = None) -> None:
    """The spans written (``in_network``: the starts of the re-rankings' spans; None: those
    already in the file kept)."""
    if in_network is None:
        in_network = _read_doc(path)[1]
    write_atomic(path, json.dumps({"sessions": spans, "in_network": in_network}).encode())


@contextmanager
def counted_span(log: str | os.PathLike):
    """Time spent on a budgeted run's ``log`` outside ``tune_with_budget`` (the re-rankings in
    the network) counted against its budget: a span appended to ``<log>.budget.json`` (so a
    session resumed later finds it spent); the yielded callable writes the span's end as of
    now (call it after each step: a run killed in a step loses that step's time only)."""
    path = sessions_path(log)
    spans, starts = _read_doc(path)
    spans.append([time.time(), time.time()])
    starts.append(spans[-1][0])

    def mark() -> None:
        spans[-1][1] = time.time()
        _write_sessions(path, spans, starts)

    mark()
    try:
        yield mark
    finally:
        mark()


def _extend_spans(spans, stamps) -> list[list[float]]:
    """The sessions' ``[start, end]`` spans in order, each end extended to the last of the
    wall-clock ``stamps`` (records' timestamps) in its session (a killed session wrote its span
    before its last slice)."""
    spans = sorted(spans)
    out = []
    for k, (a, b) in enumerate(spans):
        nxt = spans[k + 1][0] if k + 1 < len(spans) else math.inf
        out.append([a, max([b, *(s for s in stamps if a <= s < nxt)])])
    return out


def _tuning_clock(spans, stamps) -> tuple[list[float], list[float]]:
    """Tuning seconds of each wall-clock ``stamps`` (records' timestamps) given the sessions'
    ``[start, end]`` spans, and of each session's start, the time spent in all last; a
    session's end is extended to its last record (``_extend_spans``)."""
    spans = _extend_spans(spans, stamps)
    ends = [b for _, b in spans]
    offsets = np.concatenate(
        [[0.0], np.cumsum([e - a for (a, _), e in zip(spans, ends, strict=True)])]
    )
    out = []
    for s in stamps:
        k = max([j for j, (a, _) in enumerate(spans) if a <= s], default=None)
        out.append(0.0 if k is None else float(offsets[k] + s - spans[k][0]))
    return out, [float(o) for o in offsets]


def tune_with_budget(
    tasks: list[BudgetTask],
    budget_s: float,
    measurer,
    log: str | os.PathLike | None = None,
    tuner: str = "xgb",
    seed: int = 0,
    slice_trials: int = 8,
    eps: float = 0.05,
    window: int = 16,
    progress=print,
    unit: str = "cycles",
    chunk_trials: int = 2,
) -> BudgetRun:
    """Tune ``tasks`` until ``budget_s`` seconds of tuning (this and earlier sessions of the
    same ``log``) are spent, ``slice_trials`` trials at a time to the task the scheduler picks,
    measured ``chunk_trials`` at a time (see the module docstring); ``progress``: a
    ``print``-like callable for one line per slice, or None. Returns the run, resumed records
    included."""
    if not tasks:
        raise BudgetError("no tasks to tune")
    if not budget_s > 0:
        raise BudgetError(f"budget must be > 0 seconds, got {budget_s}")
    if slice_trials < 1 or chunk_trials < 1:
        raise BudgetError(
            f"slice_trials and chunk_trials must be >= 1, got {slice_trials} and {chunk_trials}"
        )
    rng = np.random.default_rng(seed)
    spans, in_network = _read_doc(sessions_path(log)) if log is not None else ([], [])
    states = []
    resumed = []  # per task: [(ts, cost)]
    for k, spec in enumerate(tasks):
        tn = make_tuner(tuner, spec.task, seed + k, slice_trials)
        seen = {}
        if log is not None and Path(log).exists():
            for r in read_records(log, spec.task, how=measurer.how):
                seen.setdefault(r.index, r.result)
        if seen:
            tn.update(list(seen), list(seen.values()))
        first = list(dict.fromkeys(int(getattr(c, "index", c)) for c in spec.initial))
        st = _State(spec, tn, [i for i in first if i not in seen], default=(first or [None])[0])
        states.append(st)
        resumed.append(sorted((r.timestamp, i, r.cost) for i, r in seen.items()))
    stamps = [ts for rs in resumed for ts, _, _ in rs]
    spans = _extend_spans(spans, stamps)  # written back so: the time counted is the time shown
    clock, starts = _tuning_clock(spans, stamps)
    spent0 = starts.pop()
    marks = set(in_network)
    ranked = [k for k, (a, _) in enumerate(spans) if a in marks]
    pos = 0
    for st, rs in zip(states, resumed, strict=True):
        for _ts, index, cost in rs:
            st.note(clock[pos], cost, index)
            pos += 1
    n_resumed = pos
    run = BudgetRun([s.spec for s in states], [s.times for s in states], spent0, budget_s)
    run.n_resumed = n_resumed
    run.session_starts_s = [t for k, t in enumerate(starts) if k not in ranked] + [spent0]
    run.in_network_s = [(starts[k], starts[k] + spans[k][1] - spans[k][0]) for k in ranked]
    # the first pass: every default not measured yet, alone; the untuned network's first
    first_pass = [
        k for k, s in enumerate(states) if s.default is not None and s.initial[:1] == [s.default]
    ]
    first_pass.sort(key=lambda k: (not tasks[k].untuned, -tasks[k].weight * (tasks[k].flops or 1)))
    run.default_costs = [s.default_cost for s in states]
    if not first_pass:
        run.first_pass_s = _first_pass_end(states)
    if progress and n_resumed:
        progress(
            f"resumed {n_resumed} records from {log}; {spent0:.1f} s already spent (this"
            f" tuning's budget: {budget_s:.0f} s)"
        )
    t_start = time.time()
    spans.append([t_start, t_start])
    writer = TuningLog(log) if log is not None else None

    def now() -> float:
        return spent0 + time.time() - t_start

    def fmt(c: float) -> str:
        if not math.isfinite(c):
            return "-"
        return f"{c * 1e3:.4g} ms" if unit == "s" else f"{c:.6g} {unit}"

    done: set[int] = set()  # tasks whose space is exhausted
    try:
        while now() < budget_s:
            st = states[first_pass[0]] if first_pass else None
            if st is not None:
                k = first_pass.pop(0)
                how = "first pass: its default"
                batch, st.initial = st.initial[:1], st.initial[1:]
            elif rng.random() < eps:
                k = int(rng.choice([j for j in range(len(states)) if j not in done]))
                how = "random (eps)"
            else:
                gains = [
                    -math.inf if j in done else _gain(states, j, window) for j in range(len(states))
                ]
                k = int(np.argmax(gains))
                how = f"gain {gains[k]:.3g}/trial"
            if st is None:
                st = states[k]
                batch, st.initial = st.initial[:slice_trials], st.initial[slice_trials:]
                if len(batch) < slice_trials:
                    more = st.tuner.next_batch(slice_trials - len(batch))
                    batch += [i for i in more if i not in batch]
            if not batch:  # its space is exhausted: never pick it again
                done.add(k)
                if len(done) == len(states):
                    break
                continue
            before = st.best
            kept, cut = _measure_slice(
                measurer, st.spec.task, batch, chunk_trials, lambda: budget_s - now(), writer
            )
            for i, res in kept:
                st.note(spent0 + res.timestamp - t_start, res.cost, i)
            run.default_costs = [s.default_cost for s in states]
            if run.first_pass_s is None and not first_pass:
                run.first_pass_s = _first_pass_end(states)
            if kept:
                st.tuner.update([i for i, _ in kept], [r for _, r in kept])
            run.n_measured += len(kept)
            run.n_cut += cut
            run.picks.append(k)
            spans[-1][1] = time.time()
            if log is not None:
                _write_sessions(sessions_path(log), spans)
            if progress:
                total = run.latency()
                cut_txt = f", {cut} cut at the budget" if cut else ""
                progress(
                    f"[{now():7.1f}/{budget_s:.0f} s] {st.spec.name or st.spec.task.key}"
                    f" x{st.spec.weight:g}: {len(kept)} trials ({how}{cut_txt}), best"
                    f" {fmt(before)} -> {fmt(st.best)}; network {fmt(total)}"
                )
    finally:
        if writer is not None:
            writer.close()
        spans[-1][1] = time.time()
        if log is not None:
            _write_sessions(sessions_path(log), spans)
    run.spent_s = now()
    return run


def _first_pass_end(states) -> float | None:
    """The tuning time the last default was measured, or None while one is not."""
    ends = [st.default_t for st in states if st.default is not None]
    return None if None in ends else max(ends, default=0.0)


def _gain(states, j: int, window: int) -> float:
    """``expected_gain`` of task ``j``; behind the best of its group (another template of its
    layer), scaled by the group's best / its best (its trials lower the network's cost only
    once it catches up)."""
    st = states[j]
    gain = expected_gain(st.curve, st.spec.weight, window)
    if st.spec.group and math.isfinite(st.best) and gain > 0:
        lead = min(s.best for s in states if s.spec.group == st.spec.group)
        gain *= lead / st.best
    return gain


TIMEOUTS = ("build_timeout", "run_timeout")


def _measure_slice(measurer, task, batch, chunk_trials: int, left_s, writer):
    """Measure the indices ``batch`` of ``task``, ``chunk_trials`` at a time while ``left_s()``
    (seconds of budget left) is positive, each chunk under a deadline there (``_deadline``).
    Returns the kept ``[(index, result)]`` (logged chunk by chunk) and how many were cut: not
    started, or timed out under a cut bound."""
    kept = []
    for start in range(0, len(batch), chunk_trials):
        left = left_s()
        if left <= 0:
            break
        chunk = batch[start : start + chunk_trials]
        configs = [task.space.get(i) for i in chunk]
        with _deadline(measurer, left) as reached:
            results = measurer.measure(task, configs)
            cut_short = reached()
        for i, cfg, res in zip(chunk, configs, results, strict=True):
            if cut_short and res.error in TIMEOUTS:
                continue
            if writer is not None:
                writer.append(make_record(task, cfg, res, measurer.how))
            kept.append((i, res))
    return kept, len(batch) - len(kept)
