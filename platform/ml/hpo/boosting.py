"""Pruning inside XGBoost and LightGBM: the booster's validation score, every few rounds.

optuna-integration's callbacks report the booster's own evaluation metric, so pruning is only
used where that metric points the same way as the study's (``booster_metric``); other metrics
fall back to per-fold pruning. Reports are thinned to every ``BOOST_REPORT_EVERY`` rounds:
each report is a storage write, and a write per round would cost more than the round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import optuna

BOOSTED = frozenset({"xgb", "lgbm"})
BOOST_REPORT_EVERY = 25

#: study metric -> the booster's metric with the same direction (binary, multiclass)
_XGB_METRICS: dict[str, tuple[str | None, str | None]] = {
    "rmse": ("rmse", "rmse"),
    "mae": ("mae", "mae"),
    "log_loss": ("logloss", "mlogloss"),
    "roc_auc": ("auc", "auc"),
    "pr_auc": ("aucpr", None),
}
_LGBM_METRICS: dict[str, tuple[str | None, str | None]] = {
    "rmse": ("rmse", "rmse"),
    "mae": ("l1", "l1"),
    "log_loss": ("binary_logloss", "multi_logloss"),
    "roc_auc": ("auc", None),  # LightGBM's multiclass AUC (auc_mu) is a different measure
    "pr_auc": ("average_precision", None),
}


def booster_metric(family: str, metric: str, n_classes: int) -> str | None:
    """The booster's evaluation metric that ranks trials like ``metric``, if there is one."""
    table = {"xgb": _XGB_METRICS, "lgbm": _LGBM_METRICS}.get(family, {})
    binary, multi = table.get(metric, (None, None))
    return multi if n_classes > 2 else binary


def fit_with_pruning(
    estimator: Any,
    fold: Any,
    trial: optuna.Trial,
    family: str,
    metric_name: str,
) -> Any:
    """Fit a fresh XGBoost/LightGBM ``estimator`` on the fold, reporting to ``trial`` as it boosts."""
    from sklearn.base import clone

    fitted = clone(estimator)
    if family == "lgbm":
        from optuna_integration import LightGBMPruningCallback

        callback = LightGBMPruningCallback(trial, metric_name, report_interval=BOOST_REPORT_EVERY)
        fitted.fit(
            fold.X_train,
            fold.y_train,
            eval_metric=metric_name,
            callbacks=[callback],
            **_lgbm_eval_data(fitted, fold),
        )
        return fitted
    xgb_callback = _xgb_callback(trial, f"validation_0-{metric_name}")
    inner = getattr(fitted, "estimator", None)
    if inner is None:  # a regressor
        fitted.set_params(eval_metric=metric_name, callbacks=[xgb_callback])
        fitted.fit(
            fold.X_train, fold.y_train, eval_set=[(fold.X_valid, fold.y_valid)], verbose=False
        )
        return fitted
    # A classifier wrapped in LabelEncodedClassifier: fit the booster on encoded labels here
    # (the wrapper would deep-copy the callback, trial and storage with it) and fill the
    # wrapper's fitted attributes the way its own fit() does.
    from sklearn.preprocessing import LabelEncoder

    encoder = LabelEncoder().fit(fold.y_train)
    booster = clone(inner).set_params(eval_metric=metric_name, callbacks=[xgb_callback])
    booster.fit(
        fold.X_train,
        encoder.transform(fold.y_train),
        eval_set=[(fold.X_valid, encoder.transform(fold.y_valid))],
        verbose=False,
    )
    fitted.encoder_, fitted.classes_, fitted.estimator_ = encoder, encoder.classes_, booster
    return fitted


def _lgbm_eval_data(model: Any, fold: Any) -> dict[str, Any]:
    """Validation data as this LightGBM takes it (4.7 renamed eval_set to eval_X/eval_y).

    A classifier's validation labels go in the encoded form its booster trains on: 4.7's
    ``LGBMClassifier.fit`` encodes ``eval_set`` labels but passes ``eval_y`` through, so
    text labels ("No"/"Yes") there fail every trial.
    """
    import inspect

    y_valid = fold.y_valid
    if hasattr(model, "predict_proba"):
        classes = np.unique(np.asarray(fold.y_train))
        y_valid = np.searchsorted(classes, np.asarray(fold.y_valid))
    if "eval_X" in inspect.signature(model.fit).parameters:
        return {"eval_X": (fold.X_valid,), "eval_y": (y_valid,)}
    return {"eval_set": [(fold.X_valid, y_valid)]}


def _xgb_callback(trial: optuna.Trial, observation_key: str) -> Any:
    from optuna_integration import XGBoostPruningCallback

    class EveryFewRounds(XGBoostPruningCallback):
        """optuna-integration's callback, consulted every ``BOOST_REPORT_EVERY`` rounds."""

        def after_iteration(self, model: Any, epoch: int, evals_log: dict) -> bool:
            if (epoch + 1) % BOOST_REPORT_EVERY:
                return False
            return bool(super().after_iteration(model, epoch, evals_log))

    return EveryFewRounds(trial, observation_key)
