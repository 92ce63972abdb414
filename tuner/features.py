"""Featurizers: config indices of a task -> ``float32 [n, width]`` feature rows.

- ``KnobFeaturizer``: the knobs' numeric descriptions (log2 split factors, axis positions,
  choice values); vectorised, microseconds per row. Same width for every task of a template.
- ``IRFeaturizer("curve" | "loop")``: features of the lowered loop IR (``tuner.irfeatures``),
  one lowering per config (milliseconds), cached per (task, index). ``"curve"`` has the same
  width for every workload (used for transfer across shapes and operators).

A point that cannot be instantiated gets an all-zero row.
"""

from __future__ import annotations

import numpy as np

from tuner.task import InvalidConfig, Task


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
        from tuner import irfeatures

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
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out = (
            np.stack([self._row(task, int(i)) for i in idx])
            if idx.size
            else np.zeros((0, self._width), np.float32)
        )
        if self.with_knobs:
            out = np.concatenate([out, KnobFeaturizer()(task, idx)], axis=1)
        return out


def make_featurizer(name: str) -> Featurizer:
    """``"knob"``, ``"curve"``, ``"loop"``, ``"curve+knob"`` or ``"loop+knob"``."""
    if name == "knob":
        return KnobFeaturizer()
    kind, _, extra = name.partition("+")
    if kind in ("curve", "loop") and extra in ("", "knob"):
        return IRFeaturizer(kind, with_knobs=extra == "knob")
    raise ValueError(f"unknown feature kind {name!r} (knob, curve, loop, curve+knob, loop+knob)")
