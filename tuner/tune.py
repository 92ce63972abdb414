"""``tune(task, n_trials, ...)``: the tuning loop.

Each round the tuner proposes a batch, the measurer measures it, every result is appended to
the log as soon as it is known, and the tuner (its cost model) is updated. With
``resume=True`` the log's records of this task count as trials already done: they are fed to
the tuner and never measured again, so a killed run continues where it stopped.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from dataclasses import dataclass, field

from pyvta.compiler.targets.gpu.devices import NAMES as GPU_DEVICES
from pyvta.isa.errors import PyvtaError
from pyvta.tuner.log import TuningLog, make_record, read_records
from pyvta.tuner.measure import Measurer, MeasureResult
from pyvta.tuner.task import Task
from pyvta.tuner.tuners import Tuner, make_tuner


@dataclass
class TuneResult:
    """``history``: ``(trial, index, cost)`` per measurement in order (``inf`` = failed);
    ``best_curve[i]``: best cost after ``i + 1`` trials. After a final check (``tune``'s
    ``final_check``) ``best_index`` / ``best_cost`` are its pick and median, and ``rechecked``
    holds every median measured of the configs it re-measured, the trial's own first."""

    task: Task
    best_index: int | None
    best_cost: float
    history: list = field(default_factory=list)
    n_resumed: int = 0
    n_errors: int = 0
    wall_s: float = 0.0
    rechecked: dict = field(default_factory=dict)  # index -> its medians (final check)

    @property
    def best_config(self):
        return None if self.best_index is None else self.task.space.get(self.best_index)

    @property
    def best_curve(self) -> list[float]:
        return judged_curve(self.history)


def judged_costs(history, cost=None) -> list[float]:
    """Each trial's cost in a run's ``history`` (``TuneResult.history``), each measured config's
    given by ``cost(index)`` (None: the history's own, the costs the search saw); a failed
    trial stays failed (``inf``)."""
    if cost is None:
        return [c for _, _, c in history]
    return [cost(index) if math.isfinite(c) else c for _, index, c in history]


def judged_curve(history, cost=None) -> list[float]:
    """The best-so-far curve of :func:`judged_costs`."""
    return list(itertools.accumulate(judged_costs(history, cost), min))


def trials_to_reach(curve, target: float) -> int | None:
    """Trials a best-so-far ``curve`` (``TuneResult.best_curve``) needs to reach a cost of
    ``target`` or less; None if it never does."""
    for i, c in enumerate(curve):
        if c <= target:
            return i + 1
    return None


@dataclass(frozen=True)
class EqualQuality:
    """Trials to one level of quality, per method: ``level`` is the median over runs of the
    reference method's best at its last trial; ``hits[name]`` each run's trials to reach it
    (None: never); ``median[name]`` their median, a miss counted as ``trials + 1``."""

    reference: str
    level: float
    trials: int
    hits: dict
    median: dict

    def ratio(self, name: str) -> float:
        """The speed-up at equal quality: the reference's median trials / ``name``'s."""
        return self.median[self.reference] / self.median[name]


def equal_quality(curves: dict, reference: str, trials: int) -> EqualQuality:
    """Trials each method (``curves``: name -> best-so-far curves, one per run) needs to
    reach the reference's median best at trial ``trials``: the speed-up at equal quality,
    defined where a fixed share of the best (95%) is out of the budget's reach."""
    import numpy as np

    level = float(np.median([c[min(trials, len(c)) - 1] for c in curves[reference]]))
    hits = {
        name: [trials_to_reach(c[:trials], level) for c in runs] for name, runs in curves.items()
    }
    median = {
        name: float(np.median([h if h is not None else trials + 1 for h in hs]))
        for name, hs in hits.items()
    }
    return EqualQuality(reference, level, trials, hits, median)


def _cpu_measurer() -> Measurer:
    from pyvta.tuner.cpu_measure import CpuBackend
    from pyvta.tuner.measure import LocalMeasurer

    return LocalMeasurer(CpuBackend())


def vta_cycle_measurer(
    build_timeout_s: float = 30.0, run_timeout_s: float = 120.0, run_workers: int = 2
) -> Measurer:
    """The VTA cycle model's ``LocalMeasurer``: one repeat (the cost is deterministic), two run
    workers by default (load does not change cycles); ``build_timeout_s`` bounds one candidate's lowering
    (its time grows with the instruction count: tiny-tile configs far from the optimum take
    10-30 s), ``run_timeout_s`` its cycle count."""
    from pyvta.tuner.measure import LocalMeasurer
    from pyvta.tuner.vta import VtaCycleBackend

    return LocalMeasurer(
        VtaCycleBackend(),
        repeats=1,
        n_run_workers=run_workers,
        build_timeout_s=build_timeout_s,
        run_timeout_s=run_timeout_s,
    )


def _gpu_measurer() -> Measurer:
    from pyvta.tuner.cuda import GpuBackend
    from pyvta.tuner.measure import LocalMeasurer

    return LocalMeasurer(GpuBackend(), repeats=1, build_timeout_s=120, run_timeout_s=300)


@dataclass(frozen=True)
class TaskBackend:
    """What tuning does for the tasks of one backend (a template's ``target``): its default
    ``measurer``; ``timed``: wall-clock costs on this machine (``pyvta tune``'s ``--repeats``
    and a final check of 8 by default apply); ``on_devices``: candidates can be measured on
    ``driver.open`` devices (``--device``)."""

    measurer: object  # () -> Measurer
    timed: bool = False
    on_devices: bool = False


TASK_BACKENDS: dict[str, TaskBackend] = {
    "llvm": TaskBackend(_cpu_measurer, timed=True),
    "vta-sim": TaskBackend(vta_cycle_measurer, on_devices=True),
    **{name: TaskBackend(_gpu_measurer) for name in GPU_DEVICES},
}
"""Template target (the backend a task is written for) -> what tuning does for it."""


def task_backend(task: Task) -> TaskBackend:
    """The :class:`TaskBackend` of ``task``'s template target."""
    backend = TASK_BACKENDS.get(task.target)
    if backend is None:
        raise ValueError(
            f"no default measurer for target {task.target!r} (known: {', '.join(TASK_BACKENDS)}):"
            " pass measurer="
        )
    return backend


def default_measurer(task: Task) -> Measurer:
    """An isolated ``LocalMeasurer`` for the task's target: ``llvm`` (wall time on this CPU),
    ``vta-sim`` (the cycle model; runs in parallel since load does not change cycles) or
    ``cuda`` / ``cuda-emulated`` (the GPU's kernels)."""
    return task_backend(task).measurer()


def _fmt(cost: float, unit: str) -> str:
    if not math.isfinite(cost):
        return "-"
    if unit == "s":
        return f"{cost * 1e3:.4g} ms"
    return f"{cost:.4g} {unit}"


class TuneError(PyvtaError, ValueError):
    """A tuning request with arguments out of range."""


def tune(
    task: Task,
    n_trials: int,
    measurer: Measurer | None = None,
    tuner: str | Tuner = "xgb",
    batch_size: int = 64,
    log: str | None = None,
    resume: bool = False,
    seed: int = 0,
    progress: bool = True,
    plot: str | None = None,
    early_stopping: int | None = None,
    initial=(),
    desc: str | None = None,
    final_check: int = 0,
    final_rounds: int = 3,
    **tuner_kw,
) -> TuneResult:
    """Measure up to ``n_trials`` configs of ``task`` (including those resumed from ``log``).

    ``measurer``: defaults to ``default_measurer(task)`` (CPU or VTA cycle model);
    ``tuner``: a ``Tuner`` or a name for ``make_tuner`` (``xgb``, ``xgb-reg``, ``random``,
    ``ga``), with ``tuner_kw`` passed on (``features``, ``base`` for transfer learning, ``sa``,
    ``eps``, ``diversity``); ``log``: JSON-lines path appended to (and read back with
    ``resume``); ``plot``: PNG path for the tuning curve; ``early_stopping``: stop after this
    many trials without improvement; ``initial``: configs (or indices) measured first, e.g. a
    backend's default, so the result is never worse than it; ``desc``: the progress bar's
    label (default: the task's key); ``final_check``: for a noisy cost (wall time), after the
    trials re-measure the ``final_check`` best configs ``final_rounds`` times in turns and pick
    the one with the lowest median of its measurements, so that a config measured once in a
    lucky moment is not chosen over a steadier one (logged; not counted as trials)."""
    for name, value in (("n_trials", n_trials), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TuneError(f"{name} must be a positive integer, got {value!r}")
    t_start = time.perf_counter()
    tn = (
        tuner if isinstance(tuner, Tuner) else make_tuner(tuner, task, seed, batch_size, **tuner_kw)
    )
    own_measurer = measurer is None
    if own_measurer:
        measurer = default_measurer(task)
    result = TuneResult(task, None, math.inf)

    def note(index: int, res: MeasureResult) -> None:
        result.history.append((len(result.history), index, res.cost))
        if res.error is not None:
            result.n_errors += 1
        if res.cost < result.best_cost:
            result.best_cost, result.best_index = res.cost, index

    if resume and log is not None:
        old = read_records(log, task, how=measurer.how)
        seen: dict[int, MeasureResult] = {}
        for r in old:
            seen.setdefault(r.index, r.result)
        if seen:
            tn.update(list(seen), list(seen.values()))
            for i, r in seen.items():
                note(i, r)
            result.n_resumed = len(seen)

    writer = TuningLog(log) if log is not None else None
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=n_trials,
            initial=min(result.n_resumed, n_trials),
            desc=desc or task.key,
            unit="trial",
            dynamic_ncols=True,
        )
    last_improved = len(result.history)
    live = {"best": result.best_cost, "errors": result.n_errors}
    initial_indices = list(dict.fromkeys(int(getattr(c, "index", c)) for c in initial))
    first = [i for i in initial_indices if i not in tn.visited]
    first = first[: max(0, n_trials - len(result.history))]
    try:
        while len(result.history) < n_trials:
            if early_stopping is not None and len(result.history) - last_improved >= early_stopping:
                break
            if first:
                batch, first = first, []
            else:
                batch = tn.next_batch(min(batch_size, n_trials - len(result.history)))
            if not batch:
                break  # the space is exhausted
            configs = [task.space.get(i) for i in batch]

            def on_result(pos, res, configs=configs):
                if writer is not None:
                    writer.append(make_record(task, configs[pos], res, measurer.how))
                if bar is not None:  # live: one tick per measured candidate
                    live["best"] = min(live["best"], res.cost)
                    live["errors"] += res.error is not None
                    bar.update(1)
                    bar.set_postfix(
                        best=_fmt(live["best"], task.cost_unit),
                        errors=live["errors"],
                        refresh=False,
                    )

            results = measurer.measure(task, configs, on_result)
            before = result.best_cost
            for cfg, res in zip(configs, results, strict=True):
                note(cfg.index, res)
                if res.cost < before:
                    last_improved = len(result.history)
                    before = res.cost
            tn.update(batch, results)
        if final_check > 1:
            if bar is not None:
                bar.set_description(f"{desc or task.key}: final check of the {final_check} best")
            _final_check(task, measurer, result, final_check, final_rounds, writer, initial_indices)
    finally:
        if bar is not None:
            bar.close()
        if writer is not None:
            writer.close()
        if own_measurer:
            measurer.close()
    result.wall_s = time.perf_counter() - t_start
    if plot is not None:
        from pyvta.tuner.plot import plot_curves

        plot_curves(
            {str(tuner if isinstance(tuner, str) else type(tuner).__name__): [result.best_curve]},
            plot,
            title=task.key,
            unit=task.cost_unit,
        )
    return result


def _final_check(
    task, measurer, result: TuneResult, k: int, rounds: int, writer, initial=()
) -> None:
    """Re-measure the ``k`` best distinct configs of ``result`` ``rounds`` times
    (:func:`remeasure`); set the best to the lowest median of each config's medians, its first
    trial's included. The ``initial`` configs (a backend's default) are always among them, so
    the pick never lost to the default side by side."""
    first: dict[int, float] = {}
    for _, i, c in result.history:
        if math.isfinite(c) and i not in first:
            first[i] = c
    top = sorted(first, key=first.get)[:k]
    top += [i for i in initial if i in first and i not in top]
    if len(top) < 2:
        return
    again = remeasure(task, measurer, top, rounds, writer)
    seen = {i: [first[i]] + [r.cost for r in again[i]] for i in top}  # inf: failed this time
    pick = min(top, key=lambda i: statistics.median(seen[i]))
    result.rechecked = seen
    result.best_index, result.best_cost = pick, statistics.median(seen[pick])


def remeasure(task, measurer, indices, rounds: int, writer=None) -> dict[int, list]:
    """Measure the configs ``indices`` of ``task`` ``rounds`` times through ``measurer`` (one
    that measures, not a cache), all of them in each round, so that they see the same machine
    state; ``index -> [MeasureResult per round]``, each appended to ``writer`` if given."""
    configs = [task.space.get(i) for i in indices]
    out: dict[int, list] = {i: [] for i in indices}
    for _ in range(rounds):
        for cfg, res in zip(configs, measurer.measure(task, configs), strict=True):
            if writer is not None:
                writer.append(make_record(task, cfg, res, measurer.how))
            out[cfg.index].append(res)
    return out
