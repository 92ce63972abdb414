"""Featurizers: config indices of a task -> ``float32 [n, width]`` feature rows.

- ``KnobFeaturizer``: the knobs' numeric descriptions (log2 split factors, axis positions,
  choice values); vectorised, microseconds per row. Same width for every task of a template.
- ``IRFeaturizer("curve" | "loop")``: features of the lowered loop IR (``tuner.irfeatures``),
  one lowering per config (milliseconds), cached per (task, index). ``"curve"`` has the same
  width for every workload (used for transfer across shapes and operators).
- ``ContextFeaturizer``: the template's ``context_fn`` (workload-relative tile fractions, buffer
  occupancy, DMA bytes per MAC, the analytic estimate, per-module cycle counts; ~0.1 ms per row,
  no lowering), cached per task. Same width for every workload of the template (for transfer
  between shapes of one template); ``"context+knob"`` appends the knob features.

A point that cannot be instantiated gets an all-zero row; a template without the function a
kind of features is computed from is refused by name (``feature_problem``).
"""

from __future__ import annotations

import numpy as np

from pyvta.tuner.task import InvalidConfig, Task


class Featurizer:
    name = "?"

    def __call__(self, task: Task, indices) -> np.ndarray:
        raise NotImplementedError


class KnobFeaturizer(Featurizer):
    name = "knob"

    def __call__(self, task, indices):
        return task.space.knob_features(task.space.to_choices(indices))


class IRFeaturizer(Featurizer):
    """``kind``: ``"curve"`` (fixed length) or ``"loop"`` (per loop, padded); ``with_knobs``
    appends the knob features (only for models used within one template)."""

    def __init__(self, kind: str = "curve", with_knobs: bool = False, max_cache: int = 200_000):
        from pyvta.tuner import irfeatures

        if kind not in ("curve", "loop"):
            raise ValueError(f"IR feature kind {kind!r} is not one of ('curve', 'loop')")
        self.kind, self.with_knobs = kind, with_knobs
        self.name = kind + ("+knob" if with_knobs else "")
        self._fn = irfeatures.curve_features if kind == "curve" else irfeatures.loop_features
        self._width = irfeatures.CURVE_LEN if kind == "curve" else irfeatures.LOOP_LEN
        self._cache: dict = {}
        self._max_cache = max_cache

    def _row(self, task, index: int) -> np.ndarray:
        key = (task.key, index)
        row = self._cache.get(key)
        if row is None:
            try:
                func = task.lower(task.space.get(index))
            except InvalidConfig:
                func = None
            except Exception:  # noqa: BLE001 - a point that fails to lower is scored as zeros
                func = None
            row = np.zeros(self._width, np.float32) if func is None else self._fn(func)
            if len(self._cache) < self._max_cache:
                self._cache[key] = row
        return row

    def __call__(self, task, indices):
        why = feature_problem(task, self.kind)
        if why:  # every row would be zeros: a model of nothing
            raise ValueError(why)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out = (
            np.stack([self._row(task, int(i)) for i in idx])
            if idx.size
            else np.zeros((0, self._width), np.float32)
        )
        if self.with_knobs:
            out = np.concatenate([out, KnobFeaturizer()(task, idx)], axis=1)
        return out


class ContextFeaturizer(Featurizer):
    """Rows of ``task.context`` (the template's ``context_fn``), computed once per (task, index)
    and kept in a per-task table (spaces up to ``max_table`` points; larger ones are computed
    per call). ``with_knobs`` appends the knob features. A ``ValueError`` names the templates
    that have a ``context_fn`` if the task's has none."""

    def __init__(self, with_knobs: bool = False, max_table: int = 1 << 20):
        self.with_knobs = with_knobs
        self.name = "context" + ("+knob" if with_knobs else "")
        self._max_table = max_table
        self._tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # key -> (rows, known)

    def _rows(self, task, idx: np.ndarray) -> np.ndarray:
        why = feature_problem(task, "context")
        if why:
            raise ValueError(why)

        def compute(todo) -> np.ndarray:
            return np.stack([task.context(task.space.get(int(i))) for i in todo]).astype(
                np.float32, copy=False
            )

        if task.space.size > self._max_table:
            return compute(idx)
        table = self._tables.get(task.key)
        if table is None:
            first = compute(idx[:1])
            rows = np.zeros((task.space.size, first.shape[1]), np.float32)
            known = np.zeros(task.space.size, bool)
            rows[idx[0]], known[idx[0]] = first[0], True
            table = self._tables[task.key] = (rows, known)
        rows, known = table
        todo = np.unique(idx[~known[idx]])
        if todo.size:
            rows[todo] = compute(todo)
            known[todo] = True
        return rows[idx]

    def __call__(self, task, indices):
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            out = np.zeros((0, self._rows(task, np.zeros(1, np.int64)).shape[1]), np.float32)
        else:
            out = self._rows(task, idx)
        if self.with_knobs:
            out = np.concatenate([out, KnobFeaturizer()(task, idx)], axis=1)
        return out


def fits(task: Task, indices, featurizer: Featurizer | None = None) -> np.ndarray:
    """``bool [n]``: which points fit, as the template's ``context_fn`` tells without lowering
    (an all-zero row: does not fit); all True for a template without one. ``featurizer``: a
    ``ContextFeaturizer`` whose table to reuse (a model's own)."""
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if task.template.context_fn is None:
        return np.ones(idx.size, bool)
    if not isinstance(featurizer, ContextFeaturizer):
        featurizer = ContextFeaturizer()  # no table kept: pass one to reuse across calls
    return featurizer._rows(task, idx).any(axis=1) if idx.size else np.zeros(0, bool)


# the template function a kind of features is computed from (``Template``'s field)
FEATURE_SOURCES = {"context": "context_fn", "curve": "lower_fn", "loop": "lower_fn"}


def feature_problem(task: Task, name: str) -> str | None:
    """Why the features ``name`` (``make_featurizer``'s) cannot describe ``task``'s points (its
    template lacks the function they are computed from: ``FEATURE_SOURCES``), naming the
    templates that have it; or None."""
    kind = name.partition("+")[0]
    source = FEATURE_SOURCES.get(kind)
    if source is None or getattr(task.template, source) is not None:
        return None
    return (
        f"template {task.name!r} has no {source}; the {kind} features need one"
        f" (templates with one: {', '.join(_templates_with(source)) or 'none'})"
    )


def _templates_with(source: str) -> list[str]:
    """Names of the tuner's templates whose ``source`` (a ``Template`` field) is set."""
    from pyvta.tuner.task import known_templates

    return [name for name, t in known_templates().items() if getattr(t, source) is not None]


def make_featurizer(name: str) -> Featurizer:
    """``"knob"``, ``"curve"``, ``"loop"``, ``"curve+knob"``, ``"loop+knob"``, ``"context"`` or
    ``"context+knob"`` (all but the first need a template with the function they are
    computed from: ``feature_problem``)."""
    if name == "knob":
        return KnobFeaturizer()
    if name in ("context", "context+knob"):
        return ContextFeaturizer(with_knobs=name == "context+knob")
    kind, _, extra = name.partition("+")
    if kind in ("curve", "loop") and extra in ("", "knob"):
        return IRFeaturizer(kind, with_knobs=extra == "knob")
    raise ValueError(
        f"unknown feature kind {name!r}"
        " (knob, curve, loop, curve+knob, loop+knob, context, context+knob)"
    )
