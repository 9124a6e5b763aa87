"""Linear models: logistic regression for classes, ridge for numbers."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from mlpilot.platform.ml.families._base import SETTLE, Build, Family, GpuSupport, float_param
from mlpilot.platform.ml.families._words import E, W


class Linear(Family):
    name = "linear"
    label = "linear model"
    described = "logistic / ridge regression"
    words = (
        rf"{W}logistic( regression)?{E}",
        rf"{W}logit{E}",
        rf"{W}linear (regression|model|classifier)s?{E}",
        rf"{W}ridge( regression)?{E}",
        rf"{W}lasso{E}",
        rf"{W}elastic ?net{E}",
        rf"{W}linear{E}",
        "逻辑回归",
        "线性回归",
        "线性模型",
        "岭回归",
        "逻辑斯蒂",
    )
    # its bare "linear" is inside other families' phrases ("linear svm"): tried last
    word_order = 60
    params = (
        float_param("C", 1e-3, 1e3, log=True, limit=(1e-6, 1e6), task="classification"),
        float_param("alpha", 1e-3, 1e3, log=True, limit=(0.0, 1e6), task="regression"),
    )
    auto_order = 4
    low_cost = MappingProxyType({})
    priority = 3
    cost = 0.2
    scale_sensitive = True
    gpu = GpuSupport("cuml.accel", "cuml")
    # the cheapest pipeline to build: it settles the cleaning and feature plans of a search
    default_for = frozenset({SETTLE})

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        if build.classification:
            from sklearn.linear_model import LogisticRegression

            base = {
                "max_iter": 2000,
                "C": 1.0,
                "class_weight": "balanced" if build.imbalanced else None,
            }
            return LogisticRegression(**{**base, **params})
        from sklearn.linear_model import Ridge

        return Ridge(**{"alpha": 1.0, **params})
