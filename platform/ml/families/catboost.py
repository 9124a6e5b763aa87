"""CatBoost: oblivious boosted trees with ordered target statistics for categories.

Its categorical columns reach it as whole-number codes (``transformers.CategoryCodes``:
CatBoost refuses float and missing categories), named in ``cat_features``; it chooses ordered
boosting itself where that fits (small data on the CPU), stops early inside a search on
the fold's validation rows, runs ``thread_count`` threads, and trains with
``task_type="GPU"`` under the GPU engine, where the fitted model says which device it used.
The search space follows CatBoost's parameter tuning guide and AutoGluon's
``CatBoostModel`` (learning rate 5e-3…0.2 on a log scale, depth about 6, ``l2_leaf_reg``
1…10), with FLAML's cost relative to LightGBM.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml.families._base import (
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

#: study metric -> CatBoost's metric with the same direction (binary, multiclass)
_METRICS: dict[str, tuple[str | None, str | None]] = {
    "rmse": ("RMSE", "RMSE"),
    "mae": ("MAE", "MAE"),
    "log_loss": ("Logloss", "MultiClass"),
    "roc_auc": ("AUC", None),  # CatBoost's multiclass AUC averages pairs: another measure
    "pr_auc": ("PRAUC", None),
}
#: rounds without improvement on the validation rows after which a search's fit stops
EARLY_STOPPING_ROUNDS = 50


class CatBoost(Family):
    name = "catboost"
    label = "CatBoost"
    words = (rf"{W}cat ?boost(ing)?{E}",)
    word_order = 25
    params = (
        int_param("iterations", 100, 1000, log=True, limit=(1, 20_000)),
        float_param("learning_rate", 5e-3, 0.2, log=True, limit=(1e-4, 1.0)),
        int_param("depth", 4, 10, limit=(1, 16)),
        float_param("l2_leaf_reg", 1.0, 10.0, log=True, limit=(0.0, 1000.0)),
        float_param("random_strength", 0.1, 10.0, log=True, limit=(0.0, 100.0)),
        CATEGORICAL,
    )
    auto_order = 6
    low_cost = MappingProxyType({"iterations": 100, "learning_rate": 0.1, "depth": 6})
    # FLAML counts a CatBoost fit as 15 LightGBM fits: its cheap start comes last
    priority = 6
    cost = 15.0
    rounds = "iterations"
    rate = "learning_rate"
    native_categorical = True
    tree = True
    gpu = GpuSupport("native", "catboost", "1.2")

    def categories_step(self, n: int) -> Any:
        from mlpilot.platform.ml.transformers import CategoryCodes

        return CategoryCodes(n)

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from catboost import CatBoostClassifier, CatBoostRegressor

        base: dict[str, Any] = {
            "iterations": 500,
            "learning_rate": 0.08,
            "depth": 6,
            "random_seed": build.seed,
            "thread_count": build.n_jobs,
            "logging_level": "Silent",
            # no catboost_info/ folder in the working directory (the run folder)
            "allow_writing_files": False,
        }
        if build.device == "gpu":
            base.update(task_type="GPU", devices="0")
        if build.native and build.native_columns:
            # a tuple: CatBoost copies a list, and a copied parameter cannot be cloned
            base["cat_features"] = tuple(range(build.native_columns))
        if build.classification:
            from mlpilot.platform.ml.transformers import LabelEncodedClassifier

            if build.imbalanced:
                base["auto_class_weights"] = "Balanced"
            return LabelEncodedClassifier(CatBoostClassifier(**{**base, **params}))
        return CatBoostRegressor(**{**base, **params})

    def booster_metric(self, metric: str, n_classes: int) -> str | None:
        binary, multi = _METRICS.get(metric, (None, None))
        return multi if n_classes > 2 else binary

    def fit_with_pruning(
        self, estimator: Any, fold: Any, trial: optuna.Trial, metric_name: str
    ) -> Any:
        """Fit on the fold with CatBoost's own early stopping on the validation rows,
        reporting to ``trial`` (optuna-integration's callback; CPU only: CatBoost takes no
        callbacks on the GPU, where it only stops early)."""
        from sklearn.base import clone
        from sklearn.preprocessing import LabelEncoder

        fitted = clone(estimator)
        inner = getattr(fitted, "estimator", None)
        booster = clone(inner) if inner is not None else fitted
        booster.set_params(eval_metric=metric_name)
        y_train, y_valid = fold.y_train, fold.y_valid
        if inner is not None:
            encoder = LabelEncoder().fit(y_train)
            y_train, y_valid = encoder.transform(y_train), encoder.transform(y_valid)
        gpu = booster.get_params().get("task_type") == "GPU"
        callback = None if gpu else _callback(trial, metric_name)
        booster.fit(
            fold.X_train,
            y_train,
            eval_set=(fold.X_valid, y_valid),
            early_stopping_rounds=EARLY_STOPPING_ROUNDS,
            use_best_model=False,  # the fold's score must not pick its own best round
            callbacks=[callback] if callback else None,
        )
        if callback is not None:
            callback.check_pruned()
        if inner is None:
            return booster
        fitted.encoder_, fitted.classes_, fitted.estimator_ = encoder, encoder.classes_, booster
        return fitted

    def owns(self, estimator: Any) -> bool:
        return type(estimator).__module__.split(".")[0] == "catboost"

    def fitted_device(self, estimator: Any) -> str | None:
        """Where the fitted model says it trained (``get_all_params()["task_type"]``)."""
        try:
            if not estimator.is_fitted():
                return None
            task_type = str(estimator.get_all_params().get("task_type", "CPU"))
        except Exception as exc:  # not CatBoost: no evidence either way
            logger.debug("no CatBoost parameters to read: %s", exc)
            return None
        return "gpu" if task_type.upper() == "GPU" else "cpu"


def _callback(trial: optuna.Trial, metric_name: str) -> Any:
    """optuna-integration's callback, reporting every ``BOOST_REPORT_EVERY`` rounds (each
    report is a storage write) and without its experimental-feature warning per trial."""
    import warnings

    import optuna
    from optuna_integration import CatBoostPruningCallback

    class EveryFewRounds(CatBoostPruningCallback):
        def after_iteration(self, info: Any) -> bool:
            if info.iteration % BOOST_REPORT_EVERY:
                return True
            return bool(super().after_iteration(info))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return EveryFewRounds(trial, metric_name)
