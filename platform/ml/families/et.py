"""Extremely randomised trees: cheap, and strong on small, noisy sets (AutoGluon's
portfolio has them). Searched by ``model="auto"`` only: a plan's model names are the
design's list."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from mlpilot.platform.ml.families._base import Build, Family, float_param, int_param


class ExtraTrees(Family):
    name = "et"
    label = "extra trees"
    plan = False
    params = (
        int_param("n_estimators", 50, 400, log=True, limit=(1, 5000)),
        int_param("max_depth", 3, 30, log=True, limit=(1, 200)),
        int_param("min_samples_leaf", 1, 20, log=True, limit=(1, 10_000)),
        float_param("max_features", 0.2, 1.0, limit=(0.01, 1.0)),
    )
    auto_order = 5
    low_cost = MappingProxyType({"n_estimators": 50, "max_depth": 12})
    priority = 5
    cost = 1.5
    rounds = "n_estimators"
    tree = True

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

        base: dict[str, Any] = {
            "n_estimators": 200,
            "n_jobs": build.n_jobs,
            "random_state": build.seed,
        }
        if build.classification:
            base["class_weight"] = "balanced_subsample" if build.imbalanced else None
            return ExtraTreesClassifier(**{**base, **params})
        base["max_features"] = 0.7
        return ExtraTreesRegressor(**{**base, **params})
