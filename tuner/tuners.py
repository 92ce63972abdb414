"""Tuners: which configs to measure next. One interface for all:

- ``next_batch(n) -> list[int]``: up to ``n`` indices never proposed before (empty when the
  space is exhausted);
- ``update(indices, results)``: the measured ``MeasureResult``s (failed ones included: an
  invalid point is remembered and never proposed again).

``RandomTuner`` and ``GATuner`` are baselines; ``ModelTuner`` is the AutoTVM loop: a cost
model retrained after every measured batch, parallel simulated annealing on its scores,
``eps`` of each batch picked at random, optional diversity-aware selection.
"""

from __future__ import annotations

import math

import numpy as np

from pyvta.tuner.model import CostModel, XGBCostModel, labels_of
from pyvta.tuner.search import SimulatedAnnealing
from pyvta.tuner.task import Task


class Tuner:
    def __init__(self, task: Task, seed: int = 0):
        self.task, self.seed = task, seed
        self.rng = np.random.default_rng(seed)
        self.visited: set[int] = set()
        self.refused: set[int] = set()  # points the space's cheap check refused (``_valid``)
        self.xs: list[int] = []
        self.costs: list[float] = []
        self.best_cost = float("inf")
        self.best_index: int | None = None

    def next_batch(self, n: int) -> list[int]:
        raise NotImplementedError

    def update(self, indices, results) -> None:
        for i, r in zip(indices, results, strict=True):
            i = int(i)
            self.visited.add(i)
            self.xs.append(i)
            self.costs.append(r.cost)
            if r.cost < self.best_cost:
                self.best_cost, self.best_index = r.cost, i
        self._after_update()

    def _after_update(self) -> None:
        pass

    def _random(self, n: int, extra_exclude=()) -> list[int]:
        """Up to ``n`` random points never proposed, valid as far as the space's cheap check
        tells (``_valid``)."""
        space = self.task.space
        out: list[int] = []
        tried = self.visited | self.refused | set(extra_exclude)
        for _ in range(64):  # a space of mostly invalid points takes a few rounds of draws
            draw = space.sample_unique(self.rng, n - len(out), tried)
            if not draw:
                break
            tried.update(draw)
            out += self._valid(draw)[: n - len(out)]
            if len(out) >= n:
                break
        return out

    def _valid(self, indices) -> list[int]:
        """Those of ``indices`` the space's cheap check (``ConfigSpace.problem``: no lowering,
        a fraction of a millisecond) does not refuse; the refused are kept in ``refused`` and
        never proposed. Every tuner skips them alike, so none spends trials on points known
        not to build (the direct NCHWc space: ~90% of uniform points)."""
        space = self.task.space
        if space.problem_fn is None:
            return list(indices)
        out = []
        for i in indices:
            if space.problem(space.get(int(i))) is None:
                out.append(int(i))
            else:
                self.refused.add(int(i))
        return out


class RandomTuner(Tuner):
    def next_batch(self, n):
        return self._random(n)


def random_hit_trials(n: int, k: int) -> tuple[float, int]:
    """(mean, median) trials random search needs for its first hit when it samples without
    replacement from ``n`` points of which ``k`` are hits (exact, as ``RandomTuner`` draws)."""
    if k <= 0:
        return math.inf, n + 1
    mean = (n + 1) / (k + 1)
    miss = 1.0  # P(no hit in the first t draws)
    for t in range(1, n - k + 2):
        miss *= (n - k - t + 1) / (n - t + 1)
        if miss <= 0.5:
            return mean, t
    return mean, n - k + 1


class GATuner(Tuner):
    """Genetic algorithm: a population of ``pop_size``; each generation keeps ``elite`` best,
    fills the rest by fitness-proportional parents, uniform crossover per knob and per-knob
    mutation with ``mutation_prob``; children already measured are replaced by random points."""

    def __init__(
        self, task, seed=0, pop_size: int = 64, elite: int = 4, mutation_prob: float = 0.1
    ):
        super().__init__(task, seed)
        self.pop_size, self.elite, self.mutation_prob = pop_size, elite, mutation_prob
        self._pending: list[int] = []
        self._gen_measured: list[tuple[int, float]] = []

    def next_batch(self, n):
        out: list[int] = []
        while len(out) < n:
            if not self._pending:
                self._pending = self._next_generation(set(out))
                if not self._pending:
                    break
            i = self._pending.pop()
            if i not in self.visited and i not in out:
                out.append(i)
        return out

    def _after_update(self) -> None:
        self._gen_measured = list(zip(self.xs, self.costs, strict=True))[-4 * self.pop_size :]

    def _next_generation(self, taken: set) -> list[int]:
        space = self.task.space
        pool = self._gen_measured
        if len(pool) < 2:
            return self._random(self.pop_size, taken)[::-1]
        idx = np.array([i for i, _ in pool], dtype=np.int64)
        fit = labels_of([c for _, c in pool]).astype(np.float64) ** 2 + 1e-6
        elite = idx[np.argsort(-fit)[: self.elite]]
        genes = space.to_choices(idx)
        p = fit / fit.sum()
        n_child = self.pop_size
        a = genes[self.rng.choice(len(idx), n_child, p=p)]
        b = genes[self.rng.choice(len(idx), n_child, p=p)]
        mask = self.rng.random(a.shape) < 0.5
        child = np.where(mask, a, b)
        mut = self.rng.random(child.shape) < self.mutation_prob
        rand = self.rng.integers(0, space.radix, size=child.shape)
        child = np.where(mut, rand, child)
        kids = [int(i) for i in space.to_index(child)]
        kids += [
            int(space.to_index(space.neighbours(space.to_choices([e]), self.rng))[0]) for e in elite
        ]
        seen = set(self.visited) | self.refused | taken
        out = []
        for k in kids:
            if k not in seen:
                seen.add(k)
                out.append(k)
        out = self._valid(out)
        out += self._random(self.pop_size - len(out), set(out) | taken)
        return out[::-1]


class ModelTuner(Tuner):
    """``model``: an XGB rank model on knob features by default. ``sa``: the search.
    ``eps``: share of each batch picked at random. ``diversity``: pick the batch greedily from
    ``3 n`` SA candidates, trading predicted score against knob values not yet in the batch.
    The first batch is random, unless the model has a trained ``base`` (transfer learning).
    ``skip_unfit``: never propose a point the template's ``context_fn`` says does not fit
    (``features.fits``: known without lowering or measuring), neither from the search nor at
    random; a template without a ``context_fn`` is unaffected."""

    def __init__(
        self,
        task,
        seed=0,
        model: CostModel | None = None,
        sa: SimulatedAnnealing | None = None,
        eps: float = 0.05,
        diversity: bool = False,
        diversity_weight: float = 0.5,
        skip_unfit: bool = True,
    ):
        super().__init__(task, seed)
        self.skip_unfit = skip_unfit and task.template.context_fn is not None
        self._fit_featurizer = None  # the model's own context features, else a table of ours
        self.model = model or XGBCostModel("rank", seed=seed)
        self.sa = sa or SimulatedAnnealing(seed=seed)
        self.eps, self.diversity, self.diversity_weight = eps, diversity, diversity_weight
        self.fit_s = self.search_s = 0.0
        # points of the model's picks the space's cheap check refused (``_valid``): trained on
        # as failed points; ``_seen_refused``: ``refused`` when last looked at
        self._model_refused: set[int] = set()
        self._seen_refused: set[int] = set()
        self._accepted_memo: dict[int, bool] = {}  # index -> the space's cheap check passed

    def _after_update(self) -> None:
        import time

        t0 = time.perf_counter()
        if any(np.isfinite(self.costs)):
            extra = sorted(self._model_refused)
            self.model.fit(self.task, self.xs + extra, self.costs + [math.inf] * len(extra))
        self.fit_s += time.perf_counter() - t0

    def next_batch(self, n):
        import time

        base = getattr(self.model, "base", None)
        if not (self.model.trained or (base is not None and base.trained)):
            return self._random_fit(n)
        n_rand = int(round(self.eps * n))
        n_model = n - n_rand
        t0 = time.perf_counter()
        k = 3 * n_model if self.diversity else n_model
        cands: list[int] = []
        for _ in range(4):  # the model's picks the space's cheap check refuses: search again
            found = self.sa.find_maximums(
                self.task, self._score, k - len(cands), self.visited | self.refused | set(cands)
            )
            n_refused = len(self.refused)
            cands += self._valid(found)
            self._model_refused.update(self.refused - self._seen_refused)
            self._seen_refused = set(self.refused)
            if len(cands) >= k or not found or len(self.refused) == n_refused:
                break
        if self._model_refused:  # the model learns them as failed points (no measurement)
            self._after_update()
        if self.diversity and cands:
            picked = self._diverse(cands, n_model)
        else:
            picked = cands[:n_model]
        self.search_s += time.perf_counter() - t0
        picked += self._random_fit(n - len(picked), picked)
        return picked

    def _score(self, idx) -> np.ndarray:
        score = np.asarray(self.model.predict(self.task, idx), dtype=np.float64)
        if self.task.space.problem_fn is not None:  # the search stays on points that build
            score = np.where(self._accepted(idx), score, -np.inf)
        if self.skip_unfit:
            from pyvta.tuner.features import fits

            score = np.where(fits(self.task, idx, self._context()), score, -np.inf)
        return score

    def _accepted(self, idx) -> np.ndarray:
        """``bool [n]``: which points the space's cheap check accepts (remembered per point:
        the search scores the same points again and again)."""
        space, known = self.task.space, self._accepted_memo
        idx = np.asarray(idx, dtype=np.int64).reshape(-1).tolist()
        new = list({i: None for i in idx if i not in known})
        for c in space.configs(new):  # the new points' configs in one go
            known[c.index] = space.problem(c) is None
        return np.fromiter((known[i] for i in idx), bool, len(idx))

    def _context(self):
        """The ``ContextFeaturizer`` whose table tells which points fit."""
        from pyvta.tuner.features import ContextFeaturizer

        if self._fit_featurizer is None:
            own = getattr(self.model, "featurizer", None)
            self._fit_featurizer = (
                own if isinstance(own, ContextFeaturizer) else ContextFeaturizer()
            )
        return self._fit_featurizer

    def _random_fit(self, n: int, extra_exclude=()) -> list[int]:
        """Up to ``n`` random unvisited points, only points that fit with ``skip_unfit`` (a few
        rounds of draws; then whatever fits, or random points if none did)."""
        if not self.skip_unfit:
            return self._random(n, extra_exclude)
        from pyvta.tuner.features import fits

        out: list[int] = []
        tried = set(extra_exclude)
        for _ in range(8):
            if len(out) >= n:
                break
            draw = self._random(4 * (n - len(out)), tried)
            if not draw:
                break
            tried.update(draw)
            ok = fits(self.task, draw, self._context())
            out += [i for i, f in zip(draw, ok, strict=True) if f][: n - len(out)]
        return out or self._random(n, extra_exclude)

    def _diverse(self, cands: list[int], n: int) -> list[int]:
        space = self.task.space
        ch = space.to_choices(cands)
        score = self.model.predict(self.task, cands).astype(np.float64)
        span = float(score.max() - score.min()) or 1.0
        score = (score - score.min()) / span
        covered = [set() for _ in space.knobs]
        chosen: list[int] = []
        free = np.ones(len(cands), bool)
        for _ in range(min(n, len(cands))):
            novelty = np.array(
                [sum(int(c[j]) not in covered[j] for j in range(ch.shape[1])) for c in ch],
                dtype=np.float64,
            ) / max(1, ch.shape[1])
            gain = np.where(free, score + self.diversity_weight * novelty, -np.inf)
            j = int(np.argmax(gain))
            free[j] = False
            chosen.append(cands[j])
            for kk in range(ch.shape[1]):
                covered[kk].add(int(ch[j, kk]))
        return chosen


# weight of the linear trend (``model.LinearTrend``) in the XGB tuners' margin: on the VTA C10
# census (20 seeds, batch 8) median trials to 95% 17 -> 9 and the mean 12.4 -> 7.2 (weights 1, 3,
# 10 alike); the trees alone rank nothing above the best point measured so far
TREND = 3.0


def default_trend(task: Task) -> float:
    """The linear trend's weight for ``task``: its template's (``Template.trend``), else
    ``TREND``."""
    return TREND if task.template.trend is None else task.template.trend


def default_features(task: Task) -> str:
    """``"context"`` for a template with a ``context_fn`` (workload-aware, cheap; they also
    transfer between workloads), else ``"knob"``."""
    return "context" if task.template.context_fn is not None else "knob"


def make_tuner(name: str, task: Task, seed: int = 0, batch_size: int | None = None, **kw) -> Tuner:
    """``"xgb"`` (rank + SA), ``"xgb-reg"``, ``"random"`` or ``"ga"``. For the XGB tuners,
    ``features`` names the featurizer (default ``default_features(task)``: ``context`` or
    ``knob``; also ``curve``, ``loop``, ``curve+knob``, ...),
    ``base`` a global model for transfer learning, ``trend`` the linear trend's weight (0:
    trees alone; default ``default_trend(task)``); other keywords go to ``ModelTuner``.
    ``batch_size`` sets the GA's population (one generation per measured batch)."""
    if name == "random":
        return RandomTuner(task, seed)
    if name == "ga":
        kw.setdefault("pop_size", batch_size or 64)
        return GATuner(task, seed, **kw)
    if name in ("xgb", "xgb-rank", "xgb-reg"):
        from pyvta.tuner.features import make_featurizer

        loss = "reg" if name == "xgb-reg" else "rank"
        feats = kw.pop("features", None) or default_features(task)
        featurizer = kw.pop("featurizer", None) or make_featurizer(feats)
        model = kw.pop("model", None) or XGBCostModel(
            loss,
            featurizer,
            seed=seed,
            base=kw.pop("base", None),
            trend=kw.pop("trend", default_trend(task)),
        )
        return ModelTuner(task, seed, model=model, **kw)
    raise ValueError(f"unknown tuner {name!r} (xgb, xgb-reg, random, ga)")
