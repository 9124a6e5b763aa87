"""Model families: one good default configuration each, for both tasks."""

from __future__ import annotations

from typing import Any

FAMILIES = ("rf", "xgb", "lgbm", "hgb", "svm", "linear", "knn")
#: families that need scaled numeric inputs
SCALE_SENSITIVE = frozenset({"svm", "linear", "knn"})
TREE_FAMILIES = frozenset({"rf", "xgb", "lgbm", "hgb"})
#: what train_model(model="auto") fits: fast, strong, robust to missing values
AUTO_FAMILY = "hgb"
LABELS = {
    "rf": "random forest",
    "xgb": "XGBoost",
    "lgbm": "LightGBM",
    "hgb": "histogram gradient boosting",
    "svm": "support vector machine",
    "linear": "linear model",
    "knn": "k-nearest neighbours",
}


def resolve_family(family: str) -> str:
    return AUTO_FAMILY if family == "auto" else family


def make_estimator(
    family: str,
    task: str,
    *,
    params: dict[str, Any] | None = None,
    seed: int = 42,
    imbalanced: bool = False,
    device: str = "cpu",
    n_classes: int = 2,
    n_jobs: int = -1,
) -> Any:
    """A fresh estimator of ``family`` for ``task`` with mlpilot's defaults, overridden by ``params``.

    ``n_jobs`` is the thread count of the families that take one (-1: every core).
    """
    family = resolve_family(family)
    params = dict(params or {})
    clf = task == "classification"
    if family == "rf":
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        base: dict[str, Any] = {
            "n_estimators": 100,
            "n_jobs": n_jobs,
            "random_state": seed,
            "min_samples_leaf": 1,
        }
        if clf:
            base["class_weight"] = "balanced_subsample" if imbalanced else None
            return RandomForestClassifier(**{**base, **params})
        base["max_features"] = 0.5
        return RandomForestRegressor(**{**base, **params})
    if family == "xgb":
        from xgboost import XGBClassifier, XGBRegressor

        base = {
            "n_estimators": 400,
            "learning_rate": 0.05,
            "max_depth": 6,
            "subsample": 0.8,
            "colsample_bytree": 0.8,
            "tree_method": "hist",
            "device": "cuda" if device == "gpu" else "cpu",
            "random_state": seed,
            "n_jobs": n_jobs,
        }
        if clf:
            from mlpilot.platform.ml.transformers import LabelEncodedClassifier

            return LabelEncodedClassifier(XGBClassifier(**{**base, **params}))
        return XGBRegressor(**{**base, **params})
    if family == "lgbm":
        from lightgbm import LGBMClassifier, LGBMRegressor

        base = {
            "n_estimators": 400,
            "learning_rate": 0.05,
            "num_leaves": 31,
            "subsample": 0.8,
            "subsample_freq": 1,
            "colsample_bytree": 0.8,
            "random_state": seed,
            "n_jobs": n_jobs,
            "verbose": -1,
            "deterministic": True,
            "force_row_wise": True,
        }
        if clf:
            base["class_weight"] = "balanced" if imbalanced else None
            return LGBMClassifier(**{**base, **params})
        return LGBMRegressor(**{**base, **params})
    if family == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        base = {"max_iter": 300, "learning_rate": 0.08, "random_state": seed}
        if clf:
            base["class_weight"] = "balanced" if imbalanced else None
            return HistGradientBoostingClassifier(**{**base, **params})
        return HistGradientBoostingRegressor(**{**base, **params})
    if family == "svm":
        from sklearn.svm import SVC, SVR

        if clf:
            base = {"C": 1.0, "kernel": "rbf", "probability": True, "random_state": seed}
            base["class_weight"] = "balanced" if imbalanced else None
            return SVC(**{**base, **params})
        from sklearn.compose import TransformedTargetRegressor
        from sklearn.preprocessing import StandardScaler

        # SVR's epsilon and C are in the target's units: on a target of a few hundred
        # (diabetes progression) the defaults fit almost nothing (r² 0.04 → 0.4 scaled)
        return TransformedTargetRegressor(
            regressor=SVR(**{"C": 1.0, "kernel": "rbf", **params}), transformer=StandardScaler()
        )
    if family == "linear":
        if clf:
            from sklearn.linear_model import LogisticRegression

            base = {"max_iter": 2000, "C": 1.0, "class_weight": "balanced" if imbalanced else None}
            return LogisticRegression(**{**base, **params})
        from sklearn.linear_model import Ridge

        return Ridge(**{"alpha": 1.0, **params})
    if family == "knn":
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

        base = {"n_neighbors": 15, "weights": "distance", "n_jobs": n_jobs}
        cls = KNeighborsClassifier if clf else KNeighborsRegressor
        return cls(**{**base, **params})
    raise ValueError(f"unknown model family {family!r}; valid: {', '.join(FAMILIES)}")
