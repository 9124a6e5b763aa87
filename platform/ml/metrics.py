"""Metrics per task: names, directions, defaults and how to compute them."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from mlpilot.tracking import vocab

# names, tasks and directions live in the vocabulary; this module computes them
LOWER_IS_BETTER = vocab.LOWER_IS_BETTER
CLASSIFICATION = vocab.CLASSIFICATION_METRICS
REGRESSION = vocab.REGRESSION_METRICS
default_metric = vocab.default_metric
direction = vocab.direction


#: text labels that name the positive class of a binary problem (compared case-insensitively)
POSITIVE_WORDS = frozenset({"1", "true", "yes", "y", "t", "positive", "pos", "是", "真", "阳性"})


def positive_label(classes: np.ndarray, counts: dict[Any, int] | None = None) -> Any:
    """The class that counts as positive in a binary problem.

    The rule, in order: the number 1; ``True``; a text label that says yes (``yes``,
    ``true``, ``positive``, ``1``, …, any case); else the minority class (by ``counts``,
    the training labels' frequencies), else the last class in sorted order.
    """
    labels = list(classes)
    for label in labels:  # 1 == True in Python: look at the type too
        is_int = isinstance(label, (int, np.integer)) and not isinstance(label, (bool, np.bool_))
        if is_int and label == 1:
            return label
    for label in labels:
        if isinstance(label, (bool, np.bool_)) and bool(label):
            return label
    for label in labels:
        if isinstance(label, str) and label.strip().lower() in POSITIVE_WORDS:
            return label
    if counts:
        return min(labels, key=lambda c: (counts.get(c, 0), -labels.index(c)))
    return labels[-1]


def sklearn_scorer(
    metric: str, task: str, classes: np.ndarray | None = None, pos_label: Any = None
) -> Any:
    """A scorer for cross_validate / permutation_importance (greater is better).

    ``pos_label`` is the positive class of a binary problem (default: ``positive_label``).
    """
    from sklearn.metrics import make_scorer

    if task == "regression":
        return {
            "rmse": "neg_root_mean_squared_error",
            "mae": "neg_mean_absolute_error",
            "r2": "r2",
        }[metric]
    binary = classes is not None and len(classes) == 2
    if binary and pos_label is None:
        pos_label = positive_label(classes)
    if metric in ("accuracy", "balanced_accuracy"):
        return metric
    if metric in ("f1", "precision", "recall"):
        from sklearn import metrics as m

        func = {"f1": m.f1_score, "precision": m.precision_score, "recall": m.recall_score}[metric]
        if binary:
            return make_scorer(func, pos_label=pos_label, zero_division=0)
        return make_scorer(func, average="weighted", zero_division=0)
    if metric == "roc_auc":
        if not binary:
            return "roc_auc_ovr_weighted"
        return make_scorer(
            _binary_auc(classes, pos_label), response_method=("predict_proba", "decision_function")
        )
    if metric == "pr_auc":
        if not binary:
            raise ValueError("pr_auc is defined for binary classification only")
        return make_scorer(
            _binary_ap(classes, pos_label), response_method=("predict_proba", "decision_function")
        )
    if metric == "log_loss":
        return "neg_log_loss"
    raise ValueError(f"unknown metric {metric!r}")


def _binary_auc(classes: np.ndarray, pos: Any) -> Any:
    from sklearn.metrics import roc_auc_score

    def score(y_true: Any, y_score: Any) -> float:
        return float(roc_auc_score(np.asarray(y_true) == pos, _pos_column(y_score, classes, pos)))

    return score


def _binary_ap(classes: np.ndarray, pos: Any) -> Any:
    from sklearn.metrics import average_precision_score

    def score(y_true: Any, y_score: Any) -> float:
        return float(
            average_precision_score(np.asarray(y_true) == pos, _pos_column(y_score, classes, pos))
        )

    return score


def _pos_column(y_score: Any, classes: np.ndarray, pos: Any) -> np.ndarray:
    y_score = np.asarray(y_score)
    if y_score.ndim == 2:
        return y_score[:, list(classes).index(pos)]
    # decision_function scores are for classes[1]
    return y_score if list(classes).index(pos) == 1 else -y_score


def scores(
    task: str,
    y_true: Any,
    y_pred: Any,
    y_score: Any = None,
    classes: np.ndarray | None = None,
    pos_label: Any = None,
) -> dict[str, float]:
    """Every metric of the task that can be computed from the predictions."""
    from sklearn import metrics as m

    if task == "regression":
        return {
            "rmse": float(np.sqrt(m.mean_squared_error(y_true, y_pred))),
            "mae": float(m.mean_absolute_error(y_true, y_pred)),
            "r2": float(m.r2_score(y_true, y_pred)),
        }
    out = {
        "accuracy": float(m.accuracy_score(y_true, y_pred)),
        "balanced_accuracy": float(m.balanced_accuracy_score(y_true, y_pred)),
    }
    binary = classes is not None and len(classes) == 2
    if binary and pos_label is None:
        pos_label = positive_label(classes)
    kwargs: dict[str, Any] = {"pos_label": pos_label} if binary else {"average": "weighted"}
    out["f1"] = float(m.f1_score(y_true, y_pred, zero_division=0, **kwargs))
    out["precision"] = float(m.precision_score(y_true, y_pred, zero_division=0, **kwargs))
    out["recall"] = float(m.recall_score(y_true, y_pred, zero_division=0, **kwargs))
    if y_score is not None and classes is not None:
        y_score = np.asarray(y_score)
        present = len(np.unique(y_true)) > 1
        if binary and present:
            col = _pos_column(y_score, classes, pos_label)
            out["roc_auc"] = float(m.roc_auc_score(np.asarray(y_true) == pos_label, col))
            out["pr_auc"] = float(m.average_precision_score(np.asarray(y_true) == pos_label, col))
        elif y_score.ndim == 2 and present:
            with contextlib.suppress(ValueError):
                out["roc_auc"] = float(
                    m.roc_auc_score(
                        y_true, y_score, multi_class="ovr", average="weighted", labels=classes
                    )
                )
        if y_score.ndim == 2:
            out["log_loss"] = float(
                m.log_loss(y_true, np.clip(y_score, 1e-15, 1 - 1e-15), labels=classes)
            )
    return out
