"""The tuning log: append-only JSON lines, one measurement per line, flushed (and fsynced)
per record, so a killed run loses at most the measurement in flight.

A record::

    {"v": 1, "task": "cpu.gemm[512, 512, 512]@llvm", "space": "<signature>",
     "index": 17, "config": {"bm": 8, ...}, "costs": [...], "cost": 0.0012,
     "error": null, "msg": "", "build_s": 0.3, "ts": 1764470000.0, "unit": "s",
     "target": "x86_64 avx2 haswell"}

``target`` (optional) names the machine the cost was measured on, where the task's template
says (``Template.measured_on_fn``; a CPU task: its ``CpuTarget.description``). A record of the
same task from another machine's space is still a valid schedule there, only its speed was not
measured here: :func:`closest_records` falls back to those.

``how`` (optional) says how the cost was measured, where the measurer says
(``Measurer.how``, a CPU backend's ``describe()``: threads, clock, warm or cold caches). Costs
measured otherwise do not compare (one thread's CPU time against two threads' wall time, a
warm cache against a cold one): ``read_records(..., how=H)`` leaves out records that name
another ``how`` (one warning per read, with their count), so a run resumes, reuses and ranks
only the records it could have measured itself. A record naming none (logged before records
said) is read as comparable.

``read_records`` skips (with one warning each, naming the line) lines that are not JSON (e.g. a
line cut short by a kill), that lack fields, have another format version or break the schema
(field types; a valid measurement's costs finite and > 0), and, read for a task, records whose
index is outside its space or whose config is not the one of their index: a bad record is never
reported as best. A record logged before its template gained knobs with defaults reads as the
same point of today's space, those knobs at their defaults (``Record.upgraded``). ``TuningLog`` never appends to a file that is not a tuning log. ``apply_best(log, task)`` is the
best valid config measured for ``task`` (same key and space signature; a config measured more
than once counts with the median of its records).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from pyvta.isa.errors import PyvtaError
from pyvta.tuner.measure import MeasureResult
from pyvta.tuner.space import Config
from pyvta.tuner.task import Task

VERSION = 1
_FIELDS = ("task", "space", "index", "config", "costs", "error")


class LogError(PyvtaError, ValueError):
    """A tuning log that cannot be read or written as asked."""


@dataclass(frozen=True)
class Record:
    task_key: str
    space_sig: str
    index: int
    config: dict
    result: MeasureResult
    unit: str = "s"
    target: str = ""  # the machine measured on ("" where the template does not say)
    how: str = ""  # how the cost was measured ("" where the measurer does not say)

    def to_json(self) -> str:
        r = self.result
        extra = {"target": self.target} if self.target else {}
        if self.how:
            extra["how"] = self.how
        return json.dumps(
            {
                "v": VERSION,
                "task": self.task_key,
                "space": self.space_sig,
                "index": self.index,
                "config": self.config,
                "costs": list(r.costs),
                "cost": r.cost if r.ok else None,
                "error": r.error,
                "msg": r.msg[-2000:],
                "build_s": round(r.build_s, 4),
                "ts": round(r.timestamp, 3),
                "unit": self.unit,
                **extra,
            }
        )

    @staticmethod
    def from_json(line: str) -> Record:
        """Parse one line; a line that breaks the schema raises ValueError saying how."""
        d = json.loads(line)
        if not isinstance(d, dict) or d.get("v") != VERSION:
            raise ValueError(f"not a version-{VERSION} tuning record")
        missing = [f for f in _FIELDS if f not in d]
        if missing:
            raise ValueError(f"record lacks fields {missing}")
        _check_schema(d)
        res = MeasureResult(
            costs=tuple(float(c) for c in d["costs"]),
            error=d["error"],
            msg=str(d.get("msg", "")),
            build_s=_number(d, "build_s"),
            timestamp=_number(d, "ts"),
        )
        target, how = d.get("target", ""), d.get("how", "")
        for name, value in (("target", target), ("how", how)):
            if not isinstance(value, str):
                raise ValueError(f"field {name!r} must be a string, got {value!r}")
        unit = str(d.get("unit", "s"))
        return Record(d["task"], d["space"], d["index"], d["config"], res, unit, target, how)

    def matches(self, task: Task) -> bool:
        return self.task_key == task.key and self.space_sig == task.space.signature()

    def upgraded(self, task: Task) -> Record | None:
        """This record of ``task`` logged in an older space of its template, one without
        knobs that have defaults (``ConfigSpace.legacies``): the same record in ``task``'s space,
        its config with the defaults and its index there; None if it is not one (another
        space, or its index does not name its config in the older space)."""
        if self.task_key != task.key:
            return None
        old = next(
            (s for s in task.space.legacies(self.config) if s.signature() == self.space_sig), None
        )
        if old is None or not 0 <= self.index < len(old):
            return None
        if _jsonable(self.config) != old.get(self.index).to_dict():
            return None
        cfg = task.space.config(self.config)
        return replace(
            self, space_sig=task.space.signature(), index=cfg.index, config=cfg.to_dict()
        )

    def problem(self, task: Task) -> str | None:
        """Why this record (already known to match ``task``) cannot be trusted, or None: its
        index must lie in the space and name the config it records."""
        size = len(task.space)
        if not 0 <= self.index < size:
            return f"index {self.index} is outside the space [0, {size})"
        expected = task.space.get(self.index).to_dict()
        if _jsonable(self.config) != expected:
            return f"config {self.config} is not the config {expected} of index {self.index}"
        return None


def _check_is_log(path: Path) -> None:
    """Refuse to append to a file that is not a tuning log (a model, a bundle, ...)."""
    if path.is_dir():
        raise LogError(f"tuning log {path} is a directory")
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    if not head.startswith(b'{"v": '):
        raise LogError(
            f"{path} exists and is not a tuning log (it does not start with a JSON record);"
            " not appending to it (give a new or a .jsonl log file)"
        )


def _check_schema(d: dict) -> None:
    """Types and ranges of a record's fields (ValueError names the first bad one)."""
    for key in ("task", "space"):
        if not isinstance(d[key], str):
            raise ValueError(f"field {key!r} must be a string, got {d[key]!r}")
    if isinstance(d["index"], bool) or not isinstance(d["index"], int):
        raise ValueError(f"field 'index' must be an integer, got {d['index']!r}")
    if not isinstance(d["config"], dict):
        raise ValueError(f"field 'config' must be an object, got {d['config']!r}")
    if d["error"] is not None and not isinstance(d["error"], str):
        raise ValueError(f"field 'error' must be null or a string, got {d['error']!r}")
    costs = d["costs"]
    if not isinstance(costs, list) or not all(
        isinstance(c, int | float) and not isinstance(c, bool) for c in costs
    ):
        raise ValueError(f"field 'costs' must be a list of numbers, got {costs!r}")
    if d["error"] is None and not all(math.isfinite(c) and c > 0 for c in costs):
        raise ValueError(f"costs {costs} of a valid measurement must be finite and > 0")


def _number(d: dict, key: str) -> float:
    v = d.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"field {key!r} must be a finite number, got {v!r}")
    return float(v)


def _jsonable(config: dict) -> dict:
    """A config as JSON reads it back (tuples become lists)."""
    return json.loads(json.dumps(config))


def make_record(task: Task, config: Config, result: MeasureResult, how: str = "") -> Record:
    """``task``'s record of ``config`` measured as ``how`` (``Measurer.how``)."""
    return Record(
        task.key,
        task.space.signature(),
        config.index,
        config.to_dict(),
        result,
        task.cost_unit,
        task.measured_on(),
        how,
    )


class TuningLog:
    """Appends records to ``path`` (created with its folder if missing)."""

    def __init__(self, path: str | os.PathLike, fsync: bool = True):
        self.path = Path(path)
        _check_is_log(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._f = open(self.path, "a+b")  # noqa: SIM115 - kept open for appends
        self._f.seek(0, os.SEEK_END)
        if self._f.tell() > 0:  # a kill may have left a partial last line: start a fresh one
            self._f.seek(-1, os.SEEK_END)
            if self._f.read(1) != b"\n":
                self._f.write(b"\n")
        self._f.seek(0, os.SEEK_END)

    def append(self, record: Record) -> None:
        self._f.write(record.to_json().encode() + b"\n")
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_records(path: str | os.PathLike, task: Task | None = None, how: str = "") -> list[Record]:
    """Records of ``path`` (only those of ``task`` if given, checked against its space); bad
    lines are skipped with a warning naming the line. A missing file has no records. With
    ``how`` (a measurer's ``Measurer.how``), records measured otherwise (naming another
    ``how``) are left out, with one warning saying how many and how they were measured."""
    out = _read_records(path, task)
    if not how:
        return out
    other = [r for r in out if r.how and r.how != how]
    if other:
        kinds = "; ".join(sorted({r.how for r in other}))
        what = f"records of {task.key}" if task is not None else "records"
        warnings.warn(
            f"{path}: left out {len(other)} {what} measured otherwise ({kinds}), not as"
            f" this run measures ({how})",
            stacklevel=2,
        )
    return [r for r in out if not r.how or r.how == how]


def _read_records(path: str | os.PathLike, task: Task | None) -> list[Record]:
    p = Path(path)
    if not p.exists():
        return []
    if not p.is_file():
        raise LogError(f"tuning log {p} is not a file")
    out = []
    with open(p, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = Record.from_json(line)
            except (ValueError, TypeError, KeyError, RecursionError) as e:
                warnings.warn(f"{p}:{lineno}: skipped line ({e})", stacklevel=3)
                continue
            if task is None:
                out.append(rec)
            elif (up := rec.upgraded(task)) is not None:
                out.append(up)
            elif rec.matches(task):
                why = rec.problem(task)
                if why is None:
                    out.append(rec)
                else:
                    warnings.warn(
                        f"{p}:{lineno}: skipped record of {task.key} ({why})", stacklevel=3
                    )
    return out


def check_log_to_read(path: str | os.PathLike, flag: str) -> None:
    """A log given to read from (``flag``: the option that named it) is a file with at least one
    record; ``LogError`` naming the option otherwise (a folder, a missing file, garbage)."""
    p = Path(path)
    if not p.is_file():
        what = "is a directory" if p.is_dir() else "does not exist"
        raise LogError(f"{flag} {p} {what}; give a JSON-lines log that `pyvta tune --log` wrote")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every line of a garbage file would warn
        found = read_records(p)
    if not found:
        raise LogError(
            f"{flag} {p}: no tuning record in it (a log is JSON lines written by"
            " `pyvta tune --log`)"
        )


def best_record(records) -> Record | None:
    """The valid record of the config with the lowest median cost over all its records (a
    config measured again, e.g. by ``tune``'s final check, is judged by all its measurements,
    not its luckiest one); of that config's records, the one nearest that median."""
    groups: dict[int, list[Record]] = {}
    for r in records:
        if r.result.ok:
            groups.setdefault(r.index, []).append(r)
    if not groups:
        return None

    def median(rs):
        return statistics.median(r.result.cost for r in rs)

    rs = min(groups.values(), key=median)
    m = median(rs)
    return min(rs, key=lambda r: abs(r.result.cost - m))


def write_best(src: str | os.PathLike, dst: str | os.PathLike) -> int:
    """Write the best valid record of every task (and space) in ``src`` to ``dst``, one line
    each, in the order the tasks first appear: a small log to ship beside a model, which
    ``apply_best`` reads like any other. Returns the number of records written."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in read_records(src):
        groups.setdefault((r.task_key, r.space_sig), []).append(r)
    best = {k: b for k, rs in groups.items() if (b := best_record(rs)) is not None}
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(f"{dst}.tmp")
    tmp.write_text("".join(r.to_json() + "\n" for r in best.values()), encoding="utf-8")
    tmp.replace(dst)
    return len(best)


def closest_records(
    path: str | os.PathLike, task: Task, valid, here: str = ""
) -> tuple[list[Record], str]:
    """The records of ``task`` in ``path`` measured in its space (on a machine like this one),
    and ``""``: with ``here`` (this machine's name, as records name theirs) those measured on it
    (or naming none) if there are some, else the space's others and their machines' names; if
    the space has none, those of the same task measured in another space (another host's: a
    schedule valid on any host of the target, its speed measured elsewhere) whose config
    ``valid(config dict)`` accepts, from the machine nearest this one (``Task.nearness``), and
    that machine's name (``"another machine"`` if unrecorded)."""
    own = read_records(path, task)
    if any(r.result.ok for r in own):
        if not here:
            return own, ""
        mine = [r for r in own if not r.target or r.target == here]
        if any(r.result.ok for r in mine):
            return mine, ""
        return own, ", ".join(sorted({r.target for r in own if r.result.ok}))
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in read_records(path):
        other = r.task_key == task.key and r.space_sig != task.space.signature()
        if other and r.result.ok and valid(r.config):
            groups.setdefault((r.space_sig, r.target), []).append(r)
    if not groups:
        return own, ""
    (_, target), recs = max(groups.items(), key=lambda kv: task.nearness(kv[0][1]))
    return recs, target or "another machine"


def apply_best(log: str | os.PathLike, task: Task) -> Config | None:
    """The best valid config of ``task`` in ``log`` (None if it has no valid record)."""
    rec = best_record(read_records(log, task))
    return None if rec is None else task.space.config(rec.config)


def training_data(log: str | os.PathLike, tasks) -> list[tuple[Task, list[int], list[float]]]:
    """``[(task, indices, costs), ...]`` for each of ``tasks`` with records in ``log`` (for a
    global transfer-learning model, ``tuner.model.global_model``)."""
    out = []
    for t in tasks:
        mine = read_records(log, t)
        if mine:
            out.append((t, [r.index for r in mine], [r.result.cost for r in mine]))
    return out


def tasks_in_log(log: str | os.PathLike, templates: dict, exclude: Task | None = None) -> list:
    """The tasks recorded in ``log`` whose template is in ``templates`` (name -> ``Template``),
    rebuilt from their keys; ``exclude`` (e.g. the task being tuned) is left out."""
    out, seen = [], set()
    for r in read_records(log):
        if r.task_key in seen:
            continue
        seen.add(r.task_key)
        name, _, rest = r.task_key.partition("[")
        if name not in templates:
            continue
        try:
            args = json.loads("[" + rest.rsplit("@", 1)[0])
            t = templates[name].task(*args)
        except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as e:
            warnings.warn(
                f"{log}: skipped task {r.task_key!r} (not rebuildable: {e})", stacklevel=2
            )
            continue
        if t.key == r.task_key and (exclude is None or t.key != exclude.key):
            out.append(t)
    return out
