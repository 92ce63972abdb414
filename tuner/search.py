"""Model-guided search over a config space: parallel simulated annealing.

``SimulatedAnnealing.find_maximums(task, score_fn, n, exclude)`` returns up to ``n`` distinct
indices with the highest scores seen, none in ``exclude``. All chains move together: one
vectorised neighbour move per chain per step (``ConfigSpace.neighbours``), one batched
``score_fn`` call per step, Metropolis acceptance ``exp((new - old) / (T * scale))`` with the
temperature falling linearly from ``t0`` to 0 and ``scale`` the spread of the chains' scores at
the start.
Chains persist between calls (the next round starts where the last ended). The search stops
early once the top ``n`` has not changed for ``early_stop`` steps.

Defaults follow the AutoTVM paper: 128 chains, up to 500 steps. A space of at most
``exhaustive_below`` points is scored whole instead (one batched model call, the model's exact
top ``n``; 128 chains x 500 steps would score more points than such a space has).
"""

from __future__ import annotations

import numpy as np

from pyvta.tuner.task import Task


class SimulatedAnnealing:
    def __init__(
        self,
        n_chains: int = 128,
        n_steps: int = 500,
        early_stop: int = 50,
        t0: float = 1.0,
        seed: int = 0,
        persistent: bool = True,
        exhaustive_below: int = 8192,
    ):
        self.n_chains, self.n_steps, self.early_stop = n_chains, n_steps, early_stop
        self.exhaustive_below = exhaustive_below
        self.t0, self.persistent = t0, persistent
        self.rng = np.random.default_rng(seed)
        self._points: np.ndarray | None = None
        self.last_steps = 0

    def find_maximums(self, task: Task, score_fn, n: int, exclude=()) -> list[int]:
        space = task.space
        exclude = set(exclude)
        if space.size <= self.exhaustive_below:  # cheaper than the chains, and exact
            idx = np.array([i for i in range(space.size) if i not in exclude], dtype=np.int64)
            if not idx.size:
                return []
            score = np.asarray(score_fn(idx), dtype=np.float64)
            self.last_steps = 0
            return [int(i) for i in idx[np.argsort(-score, kind="stable")[:n]]]
        if self._points is None or not self.persistent:
            self._points = space.to_choices(space.sample(self.rng, self.n_chains))
        pts = self._points
        cur_idx = space.to_index(pts)
        cur = np.asarray(score_fn(cur_idx), dtype=np.float64)
        top: dict[int, float] = {}
        self._merge(top, cur_idx, cur, exclude, n)
        finite = cur[np.isfinite(cur)]  # -inf: a point the score function rules out
        scale = (float(np.std(finite)) if finite.size > 1 else 0.0) or 1.0  # the scores' spread
        still = 0
        step = 0
        for step in range(1, self.n_steps + 1):
            temp = self.t0 * (1.0 - (step - 1) / self.n_steps)
            new = space.neighbours(pts, self.rng)
            new_idx = space.to_index(new)
            score = np.asarray(score_fn(new_idx), dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                # from a ruled-out point (-inf) to any other: always; to a ruled-out one: never
                prob = np.exp(np.minimum(0.0, (score - cur) / (temp * scale + 1e-12)))
            prob = np.where(np.isneginf(cur) & np.isfinite(score), 1.0, np.nan_to_num(prob))
            accept = self.rng.random(prob.shape) < prob
            pts[accept] = new[accept]
            cur[accept] = score[accept]
            changed = self._merge(top, new_idx, score, exclude, n)
            still = 0 if changed or len(top) < n else still + 1
            if still >= self.early_stop:
                break
        self.last_steps = step
        self._points = pts
        return [i for i, _ in sorted(top.items(), key=lambda kv: -kv[1])]

    @staticmethod
    def _merge(top: dict, idx: np.ndarray, score: np.ndarray, exclude: set, n: int) -> bool:
        floor = min(top.values()) if len(top) >= n else -np.inf
        changed = False
        order = np.argsort(-score)
        for j in order:
            s = float(score[j])
            if s <= floor:
                break
            i = int(idx[j])
            if i in exclude or i in top:
                continue
            top[i] = s
            changed = True
            if len(top) > n:
                worst = min(top, key=top.get)
                del top[worst]
                floor = min(top.values())
        return changed
