"""A greedy weighted ensemble over the search's out-of-fold predictions.

Caruana et al. (2004), as AutoGluon's ``WeightedEnsemble``: start empty; each round add
(with replacement) the trial whose out-of-fold predictions most improve the blend's score
on the search's own folds; the weights are how often each trial was picked, at the round
where the blend scored best. The blend is kept only when it beats the best single trial
on those same folds — the caller decides, with ``Selection.gain``.

``WeightedEnsemble`` is the logged model: a scikit-learn estimator over whole member
pipelines (each takes the raw columns), so ``predict``, the registry and the model's
digests treat it like any other model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, clone

from mlpilot.platform.ml import metrics as M

if TYPE_CHECKING:
    from mlpilot.platform.ml.context import PipelineRun

logger = logging.getLogger(__name__)

#: greedy rounds (the blend's weights are multiples of 1/rounds)
ENSEMBLE_ROUNDS = 25
#: the blend draws from the search's kept trials: twice this many at most, and at most
#: ``objective.KEEP_PER_FAMILY`` of one family (different models blend better)
ENSEMBLE_CANDIDATES = 10
#: the blend must beat the best single trial by more than this (in the metric's units)
MIN_GAIN = 1e-4


class WeightedEnsemble(BaseEstimator):
    """The weighted mean of its members' probabilities (classification) or predictions."""

    def __init__(self, members: list[Any] | None = None, weights: list[float] | None = None):
        self.members = members
        self.weights = weights

    def fit(self, X: Any, y: Any) -> WeightedEnsemble:
        self.members_ = [clone(m).fit(X, y) for m in self.members or []]
        return self

    def _fitted(self) -> list[Any]:
        return getattr(self, "members_", None) or list(self.members or [])

    @property
    def classes_(self) -> Any:
        # a regressor may still carry an empty ``classes_`` (CatBoost's does): not labels
        classes = getattr(self._fitted()[0], "classes_", None)
        return None if classes is None or len(classes) == 0 else classes

    def _blend(self, X: Any, method: str) -> np.ndarray:
        weights = np.asarray(self.weights, dtype=float)
        parts = [np.asarray(getattr(m, method)(X), dtype=float) for m in self._fitted()]
        return sum(w * p for w, p in zip(weights / weights.sum(), parts, strict=True))

    def predict_proba(self, X: Any) -> np.ndarray:
        return self._blend(X, "predict_proba")

    def predict(self, X: Any) -> np.ndarray:
        if self.classes_ is None:
            return self._blend(X, "predict")
        return np.asarray(self.classes_)[np.argmax(self.predict_proba(X), axis=1)]


def metric_value(
    metric: str, task: str, y: np.ndarray, out: np.ndarray, classes: Any, pos_label: Any
) -> float:
    """``metric`` of out-of-fold output ``out`` (probabilities, or regression predictions),
    in its natural direction, computed as ``metrics.scores`` computes it."""
    from sklearn import metrics as m

    if task == "regression":
        return {
            "rmse": lambda: float(np.sqrt(m.mean_squared_error(y, out))),
            "mae": lambda: float(m.mean_absolute_error(y, out)),
            "r2": lambda: float(m.r2_score(y, out)),
        }[metric]()
    classes = list(classes)
    if metric == "log_loss":
        return float(m.log_loss(y, np.clip(out, 1e-15, 1 - 1e-15), labels=classes))
    if metric in ("roc_auc", "pr_auc") and len(classes) == 2:
        pos = pos_label if pos_label is not None else M.positive_label(np.asarray(classes))
        column = out[:, classes.index(pos)]
        func = m.roc_auc_score if metric == "roc_auc" else m.average_precision_score
        return float(func(y == pos, column))
    if metric == "roc_auc":
        return float(m.roc_auc_score(y, out, multi_class="ovr", average="weighted", labels=classes))
    predicted = np.asarray(classes)[np.argmax(out, axis=1)]
    if metric == "accuracy":
        return float(np.mean(predicted == y))
    return M.scores("classification", y, predicted, None, np.asarray(classes), pos_label)[metric]


@dataclass
class SearchOutput:
    """What the search leaves for the ensemble: its best trials' out-of-fold output (the
    run's own trials, and those workers stored in the study: ``hpo.oof_store``)."""

    oof: dict[int, np.ndarray]
    values: dict[int, float]
    configs: dict[int, tuple[str, dict[str, Any]]]
    fit_s: dict[int, float]
    y: np.ndarray
    splits: list[Any]
    maximize: bool
    best_number: int


@dataclass
class Selection:
    """The chosen blend: trial number → weight, its score and the best single score."""

    weights: dict[int, float]
    score: float
    single: float
    maximize: bool

    @property
    def gain(self) -> float:
        """How much the blend beats the best single trial (in the metric's direction)."""
        return (self.score - self.single) if self.maximize else (self.single - self.score)


def caruana(
    oof: dict[int, np.ndarray],
    score: Callable[[np.ndarray], float],
    maximize: bool,
    rounds: int = ENSEMBLE_ROUNDS,
) -> Selection:
    """Greedy forward selection with replacement over ``oof`` (trial → out-of-fold output)."""
    numbers = list(oof)
    single_scores = {n: score(oof[n]) for n in numbers}
    pick = max if maximize else min
    single = pick(single_scores.values())
    total: np.ndarray | None = None
    counts: dict[int, int] = {}
    best_score, best_counts = None, {}
    for size in range(1, rounds + 1):
        trial_scores = {}
        for n in numbers:
            candidate = oof[n] if total is None else total + oof[n]
            trial_scores[n] = score(candidate / size)
        chosen = pick(trial_scores, key=trial_scores.__getitem__)
        total = oof[chosen].copy() if total is None else total + oof[chosen]
        counts[chosen] = counts.get(chosen, 0) + 1
        value = trial_scores[chosen]
        if best_score is None or (value > best_score if maximize else value < best_score):
            best_score, best_counts = value, dict(counts)
    used = sum(best_counts.values())
    weights = {n: c / used for n, c in best_counts.items()}
    return Selection(weights, float(best_score), float(single), maximize)


# -- in a pipeline ------------------------------------------------------------------------------
def build_ensemble(
    run: PipelineRun, best: Any, reserve_s: float
) -> tuple[WeightedEnsemble, dict[str, Any]] | None:
    """The weighted ensemble of the search's best trials, refitted on every training row,
    when it beats the best single model (``best``, already refitted) on the search's folds
    and its refits fit in the time left less ``reserve_s``; else None, with a note."""
    search: SearchOutput | None = run.search
    if search is None:
        return None
    metric, data = str(run.model.main_metric), run.data
    ranked = sorted(search.oof, key=search.values.__getitem__, reverse=search.maximize)
    pool = {n: search.oof[n] for n in ranked[: 2 * ENSEMBLE_CANDIDATES]}

    def score(out: np.ndarray) -> float:
        return metric_value(
            metric, str(data.task), search.y, out, data.classes, data.positive_class
        )

    selection = caruana(pool, score, search.maximize)
    if len(selection.weights) < 2 or selection.gain <= MIN_GAIN:
        run.note(
            f"ensemble: the best blend of {len(pool)} trials ({metric} "
            f"{selection.score:.5g}) does not beat the best single model ({selection.single:.5g}) "
            "on the search's folds: kept the single model"
        )
        return None
    refits = [n for n in selection.weights if n != search.best_number]
    cost = sum(2.0 * search.fit_s.get(n, 0.0) for n in refits)
    left = run.time_left()
    if left is not None and cost + reserve_s > left:
        run.note(
            f"ensemble: {metric} {selection.score:.5g} against {selection.single:.5g}, but its "
            f"refits need about {cost:.0f} s and {max(left - reserve_s, 0):.0f} s are free: "
            "kept the single model"
        )
        return None
    return _refit(run, search, selection, best)


def _refit(
    run: PipelineRun, search: SearchOutput, selection: Selection, best: Any
) -> tuple[WeightedEnsemble, dict[str, Any]]:
    X_train, y_train = run.data.train()
    members, weights, parts = [], [], []
    for number, weight in sorted(selection.weights.items(), key=lambda kv: -kv[1]):
        family, params = search.configs[number]
        if number == search.best_number and best is not None:
            member = best
        else:
            member = run.build_pipeline(family, params).fit(X_train, y_train)
        members.append(member)
        weights.append(weight)
        parts.append(f"{family}#{number}:{weight:.2f}")
    model = WeightedEnsemble(members, weights)
    model.members_ = members
    blend = sum(w * search.oof[n] for n, w in selection.weights.items())
    folds = [
        metric_value(
            str(run.model.main_metric),
            str(run.data.task),
            search.y[valid],
            blend[valid],
            run.data.classes,
            run.data.positive_class,
        )
        for _, valid in search.splits
    ]
    if run.result.study is not None:
        run.result.study["best_fold_values"] = folds
        run.result.study["ensemble"] = {"members": parts, "score": selection.score}
    run.note(
        f"ensemble of {len(members)} trials ({', '.join(parts)}): {run.model.main_metric} "
        f"{selection.score:.5g} on the search's folds against {selection.single:.5g} for the "
        "best single model"
    )
    return model, {"ensemble": ", ".join(parts)}
