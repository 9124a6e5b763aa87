"""scikit-learn's histogram gradient boosting: mlpilot's default model on the CPU."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from mlpilot.platform.ml.families._base import (
    AUTO,
    BOOSTING,
    CATEGORICAL,
    Build,
    Family,
    float_param,
    int_param,
)
from mlpilot.platform.ml.families._words import E, W


class HistGradientBoosting(Family):
    name = "hgb"
    label = "histogram gradient boosting"
    words = (
        rf"{W}hist(ogram)?[ -]?(based )?gradient[ -]?boost(ing|ed)?( (trees?|machine|model|classifier|regressor))?{E}",
        rf"{W}histgradientboosting\w*",
        rf"{W}hgb{E}",
        rf"{W}hist ?gbm{E}",
        "直方图梯度提升",
    )
    word_order = 0
    params = (
        int_param("max_iter", 100, 600, log=True, limit=(1, 10_000)),
        float_param("learning_rate", 0.02, 0.3, log=True, limit=(1e-4, 1.0)),
        int_param("max_leaf_nodes", 8, 128, log=True, limit=(2, 4096)),
        int_param("min_samples_leaf", 5, 100, log=True, limit=(1, 10_000)),
        float_param("l2_regularization", 1e-4, 10, log=True, limit=(0.0, 1000.0)),
        CATEGORICAL,
    )
    auto_order = 0
    low_cost = MappingProxyType({"max_iter": 100, "learning_rate": 0.1, "max_leaf_nodes": 15})
    priority = 1
    cost = 1.0
    rounds = "max_iter"
    rate = "learning_rate"
    native_categorical = True
    tree = True
    # fast, strong and robust to missing values; "gradient boosting" with no library named
    # means scikit-learn's histogram implementation
    default_for = frozenset({AUTO, BOOSTING})

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        base: dict[str, Any] = {"max_iter": 300, "learning_rate": 0.08, "random_state": build.seed}
        if build.classification:
            base["class_weight"] = "balanced" if build.imbalanced else None
            return HistGradientBoostingClassifier(**{**base, **params})
        return HistGradientBoostingRegressor(**{**base, **params})
