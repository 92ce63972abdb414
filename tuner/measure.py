"""Measurement: turn configs into costs.

A ``Backend`` says how to build and run one candidate (module-level, picklable):

- ``build(task, config) -> artifact``: instantiate and compile (runs in a build worker);
- ``run(task, config, artifact, repeats) -> list[float]``: measure ``repeats`` costs in
  ``task.cost_unit`` (runs in the single run worker).

Measurers drive a backend:

- ``LocalMeasurer``: builds in parallel in ``n_build_workers`` processes, then runs the built
  candidates one at a time in a separate process, so timings see an idle machine; a crash, an
  exception or a timeout in either stage becomes a ``MeasureResult`` with ``error`` set.
- ``InProcessMeasurer``: builds and runs in this process (cheap synthetic or simulated costs).

The CPU backend is ``tuner.cpu_measure.CpuBackend``; a VTA backend returning cycle counts from the
simulator plugs in behind the same two functions.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
import traceback
from dataclasses import dataclass, field

from pyvta.tuner.space import Config
from pyvta.tuner.task import InvalidConfig, Task, WrongAnswer
from pyvta.workers import WorkerPool

ERRORS = ("invalid", "build", "build_timeout", "run", "run_timeout", "crash", "wrong_answer")


@dataclass(frozen=True)
class MeasureResult:
    """``costs``: one per repeat (empty on error); ``error``: None or one of ``ERRORS``."""

    costs: tuple = ()
    error: str | None = None
    msg: str = ""
    build_s: float = 0.0
    timestamp: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error is None and len(self.costs) > 0

    @property
    def cost(self) -> float:
        """Median cost, ``inf`` for a failed candidate."""
        return statistics.median(self.costs) if self.ok else float("inf")


class Backend:
    """Interface (see the module docstring)."""

    def build(self, task: Task, config: Config):
        raise NotImplementedError

    def run(self, task: Task, config: Config, artifact, repeats: int) -> list[float]:
        raise NotImplementedError

    def describe(self) -> str:
        """How a cost is measured ("" if nothing beyond the task says: a cycle model)."""
        return ""


def _build_job(backend: Backend, task: Task, config: Config):
    t0 = time.perf_counter()
    why = task.space.problem(config)  # refused before the backend builds anything
    if why is not None:
        return ("invalid", why, time.perf_counter() - t0)
    try:
        artifact = backend.build(task, config)
    except InvalidConfig as e:
        return ("invalid", str(e), time.perf_counter() - t0)
    return ("ok", artifact, time.perf_counter() - t0)


def _run_job(backend: Backend, task: Task, config: Config, artifact, repeats: int):
    return [float(c) for c in backend.run(task, config, artifact, repeats)]


class Measurer:
    """``measure(task, configs, callback)`` -> list of ``MeasureResult`` in order; ``callback(
    position, result)`` is called as each result is known (the tuner logs it at once)."""

    def measure(self, task: Task, configs, callback=None) -> list[MeasureResult]:
        raise NotImplementedError

    @property
    def how(self) -> str:
        """How this measurer's costs are made (its backend's ``describe()``), as its tuning
        records say (``tuner.log``: records of another ``how`` do not compare with these)."""
        return ""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class InProcessMeasurer(Measurer):
    def __init__(self, backend: Backend, repeats: int = 3):
        self.backend, self.repeats = backend, repeats

    @property
    def how(self) -> str:
        return self.backend.describe()

    def measure(self, task, configs, callback=None):
        out = []
        for pos, cfg in enumerate(configs):
            status, value, build_s = _build_job(self.backend, task, cfg)
            if status == "invalid":
                res = MeasureResult(error="invalid", msg=value, build_s=build_s)
            else:
                try:
                    costs = _run_job(self.backend, task, cfg, value, self.repeats)
                    res = MeasureResult(costs=tuple(costs), build_s=build_s)
                except InvalidConfig as e:
                    res = MeasureResult(error="invalid", msg=str(e), build_s=build_s)
                except WrongAnswer as e:
                    res = MeasureResult(error="wrong_answer", msg=str(e), build_s=build_s)
                except Exception:  # noqa: BLE001 - recorded, tuning goes on
                    res = MeasureResult(error="run", msg=traceback.format_exc(limit=4))
            out.append(res)
            if callback is not None:
                callback(pos, res)
        return out


class LocalMeasurer(Measurer):
    """Isolated measurement on this machine: parallel builds, one run at a time.

    ``build_timeout_s`` / ``run_timeout_s`` bound one candidate's build / run (a hanging
    candidate is killed and recorded as ``build_timeout`` / ``run_timeout``).
    ``n_run_workers``: 1 for wall-clock timing (runs alone); more when the cost does not depend
    on machine load (a cycle model). ``deadline`` (a ``time.monotonic()`` time, or None): no
    build or run goes on past it (each stage's timeout cut to the time left; a time budget,
    ``tuner.budget``, sets it)."""

    def __init__(
        self,
        backend: Backend,
        repeats: int = 5,
        n_build_workers: int = 2,
        build_timeout_s: float = 30.0,
        run_timeout_s: float = 10.0,
        n_run_workers: int = 1,
    ):
        self.backend, self.repeats = backend, repeats
        self.build_timeout_s, self.run_timeout_s = build_timeout_s, run_timeout_s
        self._builders = WorkerPool(n_build_workers)
        self._runner = WorkerPool(n_run_workers)
        self.deadline: float | None = None

    @property
    def how(self) -> str:
        return self.backend.describe()

    def _timeout(self, bound_s: float) -> float:
        """``bound_s``, cut to the time left before ``deadline`` (at least 0.1 s)."""
        if self.deadline is None:
            return bound_s
        return max(0.1, min(bound_s, self.deadline - time.monotonic()))

    def measure(self, task, configs, callback=None):
        configs = list(configs)
        results: list[MeasureResult | None] = [None] * len(configs)
        built: dict[int, tuple] = {}

        def done(pos, res):
            results[pos] = res
            if callback is not None:
                callback(pos, res)

        jobs = [(_build_job, (self.backend, task, c)) for c in configs]
        for pos, status, value in self._builders.map(jobs, self._timeout(self.build_timeout_s)):
            if status == "ok" and value[0] == "ok":
                built[pos] = (value[1], value[2])
            elif status == "ok":
                done(pos, MeasureResult(error="invalid", msg=value[1], build_s=value[2]))
            elif status == "error":
                done(pos, MeasureResult(error="build", msg=value))
            elif status == "timeout":
                done(pos, MeasureResult(error="build_timeout", msg=value))
            else:
                done(pos, MeasureResult(error="crash", msg="build: " + value))

        order = sorted(built)
        run_jobs = [
            (_run_job, (self.backend, task, configs[p], built[p][0], self.repeats)) for p in order
        ]
        for i, status, value in self._runner.map(run_jobs, self._timeout(self.run_timeout_s)):
            pos = order[i]
            build_s = built[pos][1]
            if status == "ok":
                done(pos, MeasureResult(costs=tuple(value), build_s=build_s))
            elif status == "error":
                err = "run"
                if "InvalidConfig" in value:
                    err = "invalid"
                elif "WrongAnswer" in value:
                    err = "wrong_answer"
                done(pos, MeasureResult(error=err, msg=value, build_s=build_s))
            elif status == "timeout":
                done(pos, MeasureResult(error="run_timeout", msg=value, build_s=build_s))
            else:
                done(pos, MeasureResult(error="crash", msg="run: " + value, build_s=build_s))
        return results

    def close(self) -> None:
        self._builders.close()
        self._runner.close()


class CachedMeasurer(Measurer):
    """Measures each (task, config) once through ``inner``; later requests reuse the result
    (for deterministic costs, or to give every tuner of a comparison the same measurements).
    With ``log`` (a JSON-lines tuning log) the measurements are appended there and those
    already in it are reused; crashed or timed-out records are measured again, unless
    ``keep_timeouts`` (a benchmark that bounds builds on purpose: a candidate whose lowering
    outlasts the bound stays a failure in later runs too)."""

    def __init__(self, inner: Measurer, log: str | None = None, keep_timeouts: bool = False):
        from pyvta.tuner.log import TuningLog

        self.inner, self.cache, self.n_measured = inner, {}, 0
        self.log = log
        self._kept = (None, "invalid") + (("build_timeout",) if keep_timeouts else ())
        self._preloaded: set[str] = set()
        self._writer = TuningLog(log) if log else None

    def _preload(self, task: Task) -> None:
        from pyvta.tuner.log import read_records

        if self.log is None or task.key in self._preloaded:
            return
        self._preloaded.add(task.key)
        for r in read_records(self.log, task, how=self.inner.how):
            if r.result.error in self._kept:
                self.cache.setdefault((task.key, r.index), r.result)

    def measure(self, task, configs, callback=None):
        from pyvta.tuner.log import make_record

        self._preload(task)
        todo = [c for c in configs if (task.key, c.index) not in self.cache]
        todo = list({c.index: c for c in todo}.values())
        if todo:
            for c, r in zip(todo, self.inner.measure(task, todo), strict=True):
                self.cache[(task.key, c.index)] = r
                if self._writer is not None:
                    self._writer.append(make_record(task, c, r, self.inner.how))
            self.n_measured += len(todo)
        out = [self.cache[(task.key, c.index)] for c in configs]
        if callback is not None:
            for pos, r in enumerate(out):
                callback(pos, r)
        return out

    @property
    def how(self) -> str:
        return self.inner.how

    def costs(self, task: Task) -> dict[int, float]:
        """index -> cost (``inf`` if invalid or failed) of every point of ``task`` known."""
        self._preload(task)
        return {i: r.cost for (k, i), r in self.cache.items() if k == task.key}

    def close(self):
        if self._writer is not None:
            self._writer.close()
        self.inner.close()


def repeat_stat(meas, task: Task, stat: str):
    """``index -> cost`` of each config of ``task`` that ``meas`` (a ``CachedMeasurer`` or
    ``MinOfRepeats``) has measured, by ``stat`` of its repeats: ``"median"``
    (``MeasureResult.cost``) or ``"min"`` (the fastest); ``inf`` for a failed one. For judging a
    search by other costs than it saw: the fastest of a few repeats can be one taken in a
    moment the host ran faster (Zen 1 C6, 2 run workers: one config's repeats 1.14, 1.00 and
    1.15 of its fastest)."""
    _check_stat(stat)  # before any config is asked for
    return lambda index: result_stat(meas.cache[(task.key, index)], stat)


REPEAT_STATS = ("median", "min")  # the statistics of a measurement's repeats a cost can be


def _check_stat(stat: str) -> None:
    if stat not in REPEAT_STATS:
        raise ValueError(f"repeat statistic {stat!r}: one of {', '.join(REPEAT_STATS)}")


def result_stat(result: MeasureResult, stat: str) -> float:
    """One measurement's cost by ``stat`` of its repeats: ``"median"`` (``result.cost``) or
    ``"min"`` (the fastest); ``inf`` for a failed one."""
    _check_stat(stat)
    return min(result.costs) if stat == "min" and result.ok else result.cost


class MinOfRepeats(Measurer):
    """A ``CachedMeasurer`` seen through the fastest of each config's repeats instead of their
    median: on a loaded machine contention only adds time (C12 on 2 cores at load 13: repeats
    of one config from 2.3 to 72 ms, medians decided by luck), so the minimum is the steadier
    estimate of the kernel's own time. The cache and its log keep every repeat."""

    def __init__(self, cached: CachedMeasurer):
        self.cached = cached

    @staticmethod
    def _min(r: MeasureResult) -> MeasureResult:
        return dataclasses.replace(r, costs=(min(r.costs),)) if r.ok else r

    @property
    def n_measured(self) -> int:
        return self.cached.n_measured

    @property
    def how(self) -> str:
        return self.cached.how

    @property
    def inner(self) -> Measurer:
        """The measurer under the cache (one that measures again)."""
        return self.cached.inner

    @property
    def cache(self) -> dict:
        """The ``CachedMeasurer``'s results (every repeat)."""
        return self.cached.cache

    def measure(self, task, configs, callback=None):
        out = [self._min(r) for r in self.cached.measure(task, configs)]
        if callback is not None:
            for pos, r in enumerate(out):
                callback(pos, r)
        return out

    def costs(self, task) -> dict[int, float]:
        self.cached.costs(task)  # loads the log
        return {i: self._min(r).cost for (k, i), r in self.cached.cache.items() if k == task.key}

    def close(self) -> None:
        self.cached.close()
