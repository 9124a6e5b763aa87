"""LightGBM: leaf-wise boosted trees, the first cheap start of a time-budgeted search."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml.families._base import (
    BOOST_REPORT_EVERY,
    CATEGORICAL,
    Build,
    Family,
    float_param,
    int_param,
)
from mlpilot.platform.ml.families._words import E, W

if TYPE_CHECKING:
    import optuna

#: study metric -> LightGBM's metric with the same direction (binary, multiclass)
_METRICS: dict[str, tuple[str | None, str | None]] = {
    "rmse": ("rmse", "rmse"),
    "mae": ("l1", "l1"),
    "log_loss": ("binary_logloss", "multi_logloss"),
    "roc_auc": ("auc", None),  # LightGBM's multiclass AUC (auc_mu) is a different measure
    "pr_auc": ("average_precision", None),
}


class LightGBM(Family):
    name = "lgbm"
    label = "LightGBM"
    words = (
        rf"{W}light ?gbm{E}",
        rf"{W}lgbm{E}",
        rf"{W}lgb{E}",
        rf"{W}light gradient boosting( machine)?{E}",
    )
    word_order = 10
    params = (
        int_param("n_estimators", 100, 800, log=True, limit=(1, 10_000)),
        float_param("learning_rate", 0.01, 0.3, log=True, limit=(1e-4, 1.0)),
        int_param("num_leaves", 8, 256, log=True, limit=(2, 4096)),
        int_param("min_child_samples", 5, 100, log=True, limit=(1, 10_000)),
        float_param("subsample", 0.5, 1.0, limit=(0.05, 1.0)),
        float_param("colsample_bytree", 0.4, 1.0, limit=(0.05, 1.0)),
        float_param("reg_lambda", 1e-3, 10, log=True, limit=(0.0, 1000.0)),
        CATEGORICAL,
    )
    auto_order = 3
    low_cost = MappingProxyType({"n_estimators": 100, "learning_rate": 0.1, "num_leaves": 15})
    priority = 0
    cost = 1.0
    rounds = "n_estimators"
    rate = "learning_rate"
    native_categorical = True
    tree = True

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from lightgbm import LGBMClassifier, LGBMRegressor

        base: dict[str, Any] = {
            "n_estimators": 400,
            "learning_rate": 0.05,
            "num_leaves": 31,
            "subsample": 0.8,
            "subsample_freq": 1,
            "colsample_bytree": 0.8,
            "random_state": build.seed,
            "n_jobs": build.n_jobs,
            "verbose": -1,
            "deterministic": True,
            "force_row_wise": True,
        }
        if build.classification:
            base["class_weight"] = "balanced" if build.imbalanced else None
            return LGBMClassifier(**{**base, **params})
        return LGBMRegressor(**{**base, **params})

    def booster_metric(self, metric: str, n_classes: int) -> str | None:
        binary, multi = _METRICS.get(metric, (None, None))
        return multi if n_classes > 2 else binary

    def fit_with_pruning(
        self, estimator: Any, fold: Any, trial: optuna.Trial, metric_name: str
    ) -> Any:
        from optuna_integration import LightGBMPruningCallback
        from sklearn.base import clone

        fitted = clone(estimator)
        callback = LightGBMPruningCallback(trial, metric_name, report_interval=BOOST_REPORT_EVERY)
        fitted.fit(
            fold.X_train,
            fold.y_train,
            eval_metric=metric_name,
            callbacks=[callback],
            **_eval_data(fitted, fold),
        )
        return fitted


def _eval_data(model: Any, fold: Any) -> dict[str, Any]:
    """Validation data as this LightGBM takes it (4.7 renamed eval_set to eval_X/eval_y).

    A classifier's validation labels go in the encoded form its booster trains on: 4.7's
    ``LGBMClassifier.fit`` encodes ``eval_set`` labels but passes ``eval_y`` through, so
    text labels ("No"/"Yes") there fail every trial.
    """
    import inspect

    import numpy as np

    y_valid = fold.y_valid
    if hasattr(model, "predict_proba"):
        classes = np.unique(np.asarray(fold.y_train))
        y_valid = np.searchsorted(classes, np.asarray(fold.y_valid))
    if "eval_X" in inspect.signature(model.fit).parameters:
        return {"eval_X": (fold.X_valid,), "eval_y": (y_valid,)}
    return {"eval_set": [(fold.X_valid, y_valid)]}
