"""XGBoost: boosted trees that train on the GPU with its own CUDA build."""

from __future__ import annotations

import json
import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml.families._base import (
    AUTO_GPU,
    BOOST_REPORT_EVERY,
    CATEGORICAL,
    Build,
    Family,
    GpuSupport,
    float_param,
    int_param,
)
from mlpilot.platform.ml.families._words import E, W

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

#: study metric -> XGBoost's metric with the same direction (binary, multiclass)
_METRICS: dict[str, tuple[str | None, str | None]] = {
    "rmse": ("rmse", "rmse"),
    "mae": ("mae", "mae"),
    "log_loss": ("logloss", "mlogloss"),
    "roc_auc": ("auc", "auc"),
    "pr_auc": ("aucpr", None),
}


class XGBoost(Family):
    name = "xgb"
    label = "XGBoost"
    words = (rf"{W}xg ?boost{E}", rf"{W}xgb{E}", rf"{W}extreme gradient boosting{E}")
    generic_words = (rf"{W}boosted (decision )?trees?{E}", rf"{W}gradient[ -]boosted trees?{E}")
    word_order = 20
    params = (
        int_param("n_estimators", 100, 800, log=True, limit=(1, 10_000)),
        float_param("learning_rate", 0.01, 0.3, log=True, limit=(1e-4, 1.0)),
        int_param("max_depth", 3, 10, limit=(1, 20)),
        float_param("subsample", 0.5, 1.0, limit=(0.05, 1.0)),
        float_param("colsample_bytree", 0.4, 1.0, limit=(0.05, 1.0)),
        float_param("min_child_weight", 0.5, 20, log=True, limit=(0.0, 1000.0)),
        float_param("reg_lambda", 1e-3, 10, log=True, limit=(0.0, 1000.0)),
        CATEGORICAL,
    )
    auto_order = 2
    low_cost = MappingProxyType({"n_estimators": 100, "learning_rate": 0.1, "max_depth": 4})
    priority = 2
    cost = 1.6
    rounds = "n_estimators"
    rate = "learning_rate"
    native_categorical = True
    tree = True
    gpu = GpuSupport("native", "xgboost", "2.0")
    # HistGradientBoosting has no GPU path, XGBoost does
    default_for = frozenset({AUTO_GPU})

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from xgboost import XGBClassifier, XGBRegressor

        base: dict[str, Any] = {
            "n_estimators": 400,
            "learning_rate": 0.05,
            "max_depth": 6,
            "subsample": 0.8,
            "colsample_bytree": 0.8,
            "tree_method": "hist",
            "device": "cuda" if build.device == "gpu" else "cpu",
            "random_state": build.seed,
            "n_jobs": build.n_jobs,
        }
        if build.native:
            base["enable_categorical"] = True
        if build.classification:
            from mlpilot.platform.ml.transformers import LabelEncodedClassifier

            return LabelEncodedClassifier(XGBClassifier(**{**base, **params}))
        return XGBRegressor(**{**base, **params})

    def booster_metric(self, metric: str, n_classes: int) -> str | None:
        binary, multi = _METRICS.get(metric, (None, None))
        return multi if n_classes > 2 else binary

    def fit_with_pruning(
        self, estimator: Any, fold: Any, trial: optuna.Trial, metric_name: str
    ) -> Any:
        from sklearn.base import clone

        fitted = clone(estimator)
        callback = _callback(trial, f"validation_0-{metric_name}")
        inner = getattr(fitted, "estimator", None)
        if inner is None:  # a regressor
            fitted.set_params(eval_metric=metric_name, callbacks=[callback])
            fitted.fit(
                fold.X_train, fold.y_train, eval_set=[(fold.X_valid, fold.y_valid)], verbose=False
            )
            return fitted
        # A classifier wrapped in LabelEncodedClassifier: fit the booster on encoded labels
        # here (the wrapper would deep-copy the callback, trial and storage with it) and fill
        # the wrapper's fitted attributes the way its own fit() does.
        from sklearn.preprocessing import LabelEncoder

        encoder = LabelEncoder().fit(fold.y_train)
        booster = clone(inner).set_params(eval_metric=metric_name, callbacks=[callback])
        booster.fit(
            fold.X_train,
            encoder.transform(fold.y_train),
            eval_set=[(fold.X_valid, encoder.transform(fold.y_valid))],
            verbose=False,
        )
        fitted.encoder_, fitted.classes_, fitted.estimator_ = encoder, encoder.classes_, booster
        return fitted

    def owns(self, estimator: Any) -> bool:
        return type(estimator).__module__.split(".")[0] == "xgboost"

    def fitted_device(self, estimator: Any) -> str | None:
        """Where the booster says it trained (its saved configuration's ``device``)."""
        try:
            config = json.loads(estimator.get_booster().save_config())
        except Exception as exc:  # not fitted, or not XGBoost: no evidence either way
            logger.debug("no booster configuration to read: %s", exc)
            return None
        device = str(config.get("learner", {}).get("generic_param", {}).get("device", "cpu"))
        return "gpu" if device.startswith(("cuda", "gpu")) else "cpu"


def _callback(trial: optuna.Trial, observation_key: str) -> Any:
    from optuna_integration import XGBoostPruningCallback

    class EveryFewRounds(XGBoostPruningCallback):
        """optuna-integration's callback, consulted every ``BOOST_REPORT_EVERY`` rounds."""

        def after_iteration(self, model: Any, epoch: int, evals_log: dict) -> bool:
            if (epoch + 1) % BOOST_REPORT_EVERY:
                return False
            return bool(super().after_iteration(model, epoch, evals_log))

    return EveryFewRounds(trial, observation_key)
