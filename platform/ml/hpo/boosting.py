"""Pruning inside boosters (XGBoost, LightGBM, CatBoost): their validation score, every few rounds.

optuna-integration's callbacks report the booster's own evaluation metric, so pruning is only
used where that metric points the same way as the study's (``booster_metric``: each family
says which of its metrics that is, ``Family.booster_metric``); other metrics and families
fall back to per-fold pruning. Reports are thinned to every ``BOOST_REPORT_EVERY`` rounds:
each report is a storage write, and a write per round would cost more than the round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml import families
from mlpilot.platform.ml.families import BOOST_REPORT_EVERY

if TYPE_CHECKING:
    import optuna

__all__ = ["BOOST_REPORT_EVERY", "booster_metric", "fit_with_pruning"]


def booster_metric(family: str, metric: str, n_classes: int) -> str | None:
    """The booster's evaluation metric that ranks trials like ``metric``, if there is one."""
    return families.get(family).booster_metric(metric, n_classes)


def fit_with_pruning(
    estimator: Any,
    fold: Any,
    trial: optuna.Trial,
    family: str,
    metric_name: str,
) -> Any:
    """Fit a fresh booster ``estimator`` on the fold, reporting to ``trial`` as it boosts."""
    return families.get(family).fit_with_pruning(estimator, fold, trial, metric_name)
