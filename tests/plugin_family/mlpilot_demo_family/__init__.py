"""A plugin model family for the tests: scikit-learn's single decision tree."""

from __future__ import annotations

from typing import Any

from mlpilot.platform.ml.families import Build, Family, int_param

__all__ = ["DecisionTree"]


class DecisionTree(Family):
    name = "dtree"
    label = "decision tree"
    words = (r"(?<![a-z0-9_])decision trees?(?![a-z0-9_])", "决策树")
    params = (
        int_param("max_depth", 2, 12, limit=(1, 64)),
        int_param("min_samples_leaf", 1, 20, log=True, limit=(1, 10_000)),
    )
    rounds = None
    tree = True

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        cls = DecisionTreeClassifier if build.classification else DecisionTreeRegressor
        return cls(**{"max_depth": 6, "random_state": build.seed, **params})
