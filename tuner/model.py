"""Cost models: predict a score (higher = faster) for configs of a task.

``XGBCostModel`` is gradient-boosted trees over a featurizer's rows, trained on
``label = best_cost / cost`` per task (1 for the task's best measured config, 0 for a failed one):

- ``loss="rank"``: ``rank:pairwise`` with one query group per task (only the order matters,
  the AutoTVM choice);
- ``loss="reg"``: squared-error regression on the same labels (for comparison).

Transfer learning (AutoTVM style): a *global* model fitted on measurements of other workloads
(``fit_tasks``) is passed as ``base`` to the local model; its raw margin is the local model's
``base_margin``, so the local trees learn a correction to the global prediction. The features
must have the same width across the tasks (``knob`` within one template, ``curve`` across
templates).
"""

from __future__ import annotations

import numpy as np

from pyvta.tuner.features import Featurizer, KnobFeaturizer
from pyvta.tuner.task import Task


def labels_of(costs) -> np.ndarray:
    """``best / cost`` in ``[0, 1]``; failed (``inf``) configs get 0."""
    c = np.asarray(costs, dtype=np.float64)
    ok = np.isfinite(c) & (c > 0)
    out = np.zeros(c.shape, np.float32)
    if ok.any():
        out[ok] = c[ok].min() / c[ok]
    return out


class LinearTrend:
    """Ridge regression of ``-ln(cost)`` (per task, less its mean) on standardised features,
    valid points only: a smooth trend that, unlike trees, extrapolates past the best point
    measured so far. ``XGBCostModel(trend=...)`` adds it to the trees' margin."""

    def __init__(self, ridge: float = 1.0):
        self.ridge = ridge
        self.mean = self.scale = self.w = None

    def fit(self, x: np.ndarray, costs: np.ndarray, qid: np.ndarray) -> None:
        c = np.asarray(costs, dtype=np.float64)
        ok = np.isfinite(c) & (c > 0)
        if ok.sum() < 2:
            self.w = None
            return
        y = -np.log(c[ok])
        for q in np.unique(qid[ok]):  # only the order within a task matters
            sel = qid[ok] == q
            y[sel] -= y[sel].mean()
        xs = x[ok].astype(np.float64)
        self.mean, self.scale = xs.mean(0), xs.std(0)
        self.scale[self.scale < 1e-9] = np.inf  # constant features carry nothing
        z = (xs - self.mean) / self.scale
        a = z.T @ z + self.ridge * np.eye(z.shape[1])
        self.w = np.linalg.solve(a, z.T @ y)

    def predict(self, x: np.ndarray) -> np.ndarray | None:
        if self.w is None:
            return None
        return (((x - self.mean) / self.scale) @ self.w).astype(np.float32)


class CostModel:
    def fit(self, task: Task, indices, costs) -> None:
        raise NotImplementedError

    def predict(self, task: Task, indices) -> np.ndarray:
        raise NotImplementedError

    @property
    def trained(self) -> bool:
        return False


class XGBCostModel(CostModel):
    """``featurizer`` defaults to knob features; ``nthread=1`` suits a busy 2-core machine."""

    def __init__(
        self,
        loss: str = "rank",
        featurizer: Featurizer | None = None,
        num_rounds: int = 80,
        max_depth: int = 4,
        seed: int = 0,
        nthread: int = 1,
        base: XGBCostModel | None = None,
        trend: float = 0.0,
    ):
        if loss not in ("rank", "reg"):
            raise ValueError(f"loss {loss!r} is not one of ('rank', 'reg')")
        self.loss, self.featurizer = loss, featurizer or KnobFeaturizer()
        self.num_rounds, self.base = num_rounds, base
        self.trend_weight = trend
        self._trend = LinearTrend() if trend else None
        self.params = {
            "max_depth": max_depth,
            "eta": 0.3,
            "gamma": 1e-4,
            "min_child_weight": 1,
            "subsample": 1.0,
            "lambda": 1.0,
            "nthread": nthread,
            "seed": seed,
            "verbosity": 0,
            "objective": "rank:pairwise" if loss == "rank" else "reg:squarederror",
        }
        if loss == "rank":
            self.params["lambdarank_pair_method"] = "mean"
            self.params["lambdarank_num_pair_per_sample"] = 8
        self._booster = None

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def _margin(self, task, x, indices) -> np.ndarray | None:
        out = None
        if self.base is not None and self.base.trained:
            same = self.base.featurizer.name == self.featurizer.name
            out = self.base.predict(task, indices, output_margin=True, features=x if same else None)
        t = self._trend.predict(x) if self._trend is not None else None
        if t is not None:
            out = self.trend_weight * t if out is None else out + self.trend_weight * t
        return out

    def fit_tasks(self, data) -> None:
        """Fit on ``[(task, indices, costs), ...]`` (one query group per task)."""
        import xgboost as xgb

        data = [(t, np.asarray(i, dtype=np.int64), c) for t, i, c in data if len(i)]
        if not data:
            return
        feats = [self.featurizer(task, idx) for task, idx, _ in data]
        if self._trend is not None:
            self._trend.fit(
                np.concatenate(feats),
                np.concatenate([np.asarray(c, np.float64) for _, _, c in data]),
                np.concatenate([np.full(len(i), q) for q, (_, i, _) in enumerate(data)]),
            )
        xs, ys, qids, margins = [], [], [], []
        for q, ((task, idx, costs), x) in enumerate(zip(data, feats, strict=True)):
            xs.append(x)
            ys.append(labels_of(costs))
            qids.append(np.full(idx.size, q, dtype=np.int64))
            m = self._margin(task, x, idx)
            if m is not None:
                margins.append(m)
        x, y, qid = np.concatenate(xs), np.concatenate(ys), np.concatenate(qids)
        kw = {"base_margin": np.concatenate(margins)} if margins else {}
        if self.loss == "rank":
            kw["qid"] = qid
        dtrain = xgb.DMatrix(x, label=y, nthread=self.params["nthread"], **kw)
        self._booster = xgb.train(self.params, dtrain, self.num_rounds)

    def fit(self, task, indices, costs) -> None:
        self.fit_tasks([(task, indices, costs)])

    def predict(self, task, indices, output_margin: bool = False, features=None) -> np.ndarray:
        """Scores ``float32 [n]`` (higher is better); zeros before the first fit."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        x = self.featurizer(task, idx) if features is None else features
        if self._booster is None:
            m = self._margin(task, x, idx)
            return np.zeros(idx.size, np.float32) if m is None else m
        m = self._margin(task, x, idx)
        kind = "margin" if output_margin else "value"
        # inplace_predict: no DMatrix construction (which costs ~10 ms per call on busy cores)
        return self._booster.inplace_predict(x, predict_type=kind, base_margin=m)


def global_model(data, loss: str = "rank", featurizer: Featurizer | None = None, **kw):
    """A model fitted on other workloads' ``[(task, indices, costs), ...]`` (e.g. from logs via
    ``tuner.log.training_data``), to pass as ``base`` to a local ``XGBCostModel``."""
    m = XGBCostModel(loss, featurizer, **kw)
    m.fit_tasks(data)
    return m
