"""Random forests (scikit-learn; cuML's under the GPU engine)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from mlpilot.platform.ml.families._base import (
    COMPARE,
    IMPORTANCE,
    Build,
    Family,
    GpuSupport,
    choice_param,
    float_param,
    int_param,
)
from mlpilot.platform.ml.families._words import E, W


class RandomForest(Family):
    name = "rf"
    label = "random forest"
    words = (
        rf"{W}random[ -]?forests?( (model|classifier|regressor|regression))?{E}",
        rf"{W}rf{E}",
        rf"{W}forest (regressor|classifier|model)s?{E}",
        # extra trees are searched, never planned: a user asking for them gets a forest
        rf"{W}extra[ -]trees{E}",
        "随机森林",
    )
    generic_words = (rf"{W}forests?( of (decision )?trees)?{E}", rf"{W}bagged trees{E}", "森林")
    word_order = 30
    params = (
        int_param("n_estimators", 50, 400, log=True, limit=(1, 5000)),
        int_param("max_depth", 3, 30, log=True, limit=(1, 200)),
        int_param("min_samples_leaf", 1, 20, log=True, limit=(1, 10_000)),
        float_param("max_features", 0.2, 1.0, limit=(0.01, 1.0)),
        # entropy often wins on imbalanced or many-class targets
        choice_param("criterion", "gini", "entropy", task="classification"),
    )
    auto_order = 1
    low_cost = MappingProxyType({"n_estimators": 50, "max_depth": 12})
    priority = 4
    cost = 2.0
    rounds = "n_estimators"
    tree = True
    gpu = GpuSupport("cuml.accel", "cuml")
    #: cuML ≤ 26.02 drops scikit-learn's ``max_depth=None`` and keeps its own default of 16
    #: (``python/cuml/cuml/ensemble/randomforest_common.pyx``, ``_params_from_cpu``: "if
    #: model.max_depth is not None"); 26.04 forwards None (unlimited)
    gpu_unlimited_depth_since = (26, 4)
    #: ``class_weight`` other than None falls back to the CPU before 26.08 ("`class_weight`
    #: is not supported", ``python/cuml/cuml/ensemble/randomforestclassifier.py``); 26.08
    #: runs "balanced" and dicts on the GPU, never "balanced_subsample"
    gpu_class_weight_since = (26, 8)
    # impurity importance and a forest's robustness make it the safe default to compare
    default_for = frozenset({IMPORTANCE, COMPARE})

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        base: dict[str, Any] = {
            "n_estimators": 100,
            "n_jobs": build.n_jobs,
            "random_state": build.seed,
            "min_samples_leaf": 1,
        }
        if build.gpu and build.cuml is not None and build.cuml < self.gpu_unlimited_depth_since:
            # what the GPU leg would fit anyway: with it explicit, the CPU leg of a
            # comparison fits the same forest (else the parity check refuses every speedup)
            base["max_depth"] = 16
        if build.classification:
            # cuml.accel never runs "balanced_subsample"; "balanced" on the GPU from 26.08
            # (before, on the CPU: the weights are kept, a balanced forest is what the
            # imbalanced target needs, and the stage is measured as run on the CPU)
            balanced = "balanced" if build.gpu else "balanced_subsample"
            base["class_weight"] = balanced if build.imbalanced else None
            return RandomForestClassifier(**{**base, **params})
        base["max_features"] = 0.5
        return RandomForestRegressor(**{**base, **params})
