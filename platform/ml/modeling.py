"""Model families: their estimators, default configurations and parameter specifications.

One place knows each family: the estimator and mlpilot's default configuration for both
tasks (``make_estimator``), the hyperparameters it takes with their types and ranges
(``PARAMS``: the search space of the hyperparameter search, and the bounds a plan's
``train_model.params`` must respect), and the whole logged model around it
(``build_pipeline``). Steps and the search both build models here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlpilot.platform.ml.state import DataState

FAMILIES = ("rf", "xgb", "lgbm", "hgb", "svm", "linear", "knn", "et")
#: families a plan may name (``tools.builtin.ModelName``); the others (extra trees) are
#: tried only inside the AutoML search (``hpo.spaces.AUTO_FAMILIES``)
PLAN_FAMILIES = FAMILIES[:-1]
#: what a search's weighted ensemble of its best trials is logged as (``ml/ensemble.py``)
ENSEMBLE_FAMILY = "ensemble"
#: families that split on categories themselves: a search chooses, by validation score,
#: between that and one-hot/target encoding (``CATEGORICAL_PARAM``)
NATIVE_CATEGORICAL = frozenset({"hgb", "lgbm", "xgb"})
#: the parameter of those families that says how categorical columns reach them
CATEGORICAL_PARAM = "categorical"
CATEGORICAL_CHOICES = ("encoded", "native")
#: families that need scaled numeric inputs
SCALE_SENSITIVE = frozenset({"svm", "linear", "knn"})
TREE_FAMILIES = frozenset({"rf", "xgb", "lgbm", "hgb", "et"})
#: what train_model(model="auto") fits: fast, strong, robust to missing values
AUTO_FAMILY = "hgb"
#: the same under the GPU engine: HistGradientBoosting has no GPU path, XGBoost does
GPU_AUTO_FAMILY = "xgb"
#: families that can train on the GPU (cuML through cuml.accel, or XGBoost's own CUDA build)
GPU_FAMILIES = frozenset({"rf", "xgb", "svm", "linear", "knn"})
LABELS = {
    "rf": "random forest",
    "xgb": "XGBoost",
    "lgbm": "LightGBM",
    "hgb": "histogram gradient boosting",
    "svm": "support vector machine",
    "linear": "linear model",
    "knn": "k-nearest neighbours",
    "et": "extra trees",
}


@dataclass(frozen=True)
class Param:
    """One hyperparameter of a family: its type, search range, and the values a plan may set.

    ``kind`` is ``int``, ``float`` or ``choice``; ``low``/``high`` (with ``log``) is the
    range the search samples; ``limit`` the wider range a user may ask for (default: the
    search range); ``task`` restricts it to one task.
    """

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    limit: tuple[float, float] | None = None
    task: str | None = None

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.kind == "choice":
            return None
        return self.limit or (float(self.low or 0), float(self.high or 0))


def _i(
    name: str,
    low: int,
    high: int,
    log: bool = False,
    limit: tuple[float, float] | None = None,
    task: str | None = None,
) -> Param:
    return Param(name, "int", low, high, log, limit=limit, task=task)


def _f(
    name: str,
    low: float,
    high: float,
    log: bool = False,
    limit: tuple[float, float] | None = None,
    task: str | None = None,
) -> Param:
    return Param(name, "float", low, high, log, limit=limit, task=task)


def _c(name: str, *choices: Any, task: str | None = None) -> Param:
    return Param(name, "choice", choices=choices, task=task)


PARAMS: dict[str, tuple[Param, ...]] = {
    "rf": (
        _i("n_estimators", 50, 400, log=True, limit=(1, 5000)),
        _i("max_depth", 3, 30, log=True, limit=(1, 200)),
        _i("min_samples_leaf", 1, 20, log=True, limit=(1, 10_000)),
        _f("max_features", 0.2, 1.0, limit=(0.01, 1.0)),
        # entropy often wins on imbalanced or many-class targets
        _c("criterion", "gini", "entropy", task="classification"),
    ),
    # extremely randomised trees: cheap, and strong on small, noisy sets
    "et": (
        _i("n_estimators", 50, 400, log=True, limit=(1, 5000)),
        _i("max_depth", 3, 30, log=True, limit=(1, 200)),
        _i("min_samples_leaf", 1, 20, log=True, limit=(1, 10_000)),
        _f("max_features", 0.2, 1.0, limit=(0.01, 1.0)),
    ),
    "xgb": (
        _i("n_estimators", 100, 800, log=True, limit=(1, 10_000)),
        _f("learning_rate", 0.01, 0.3, log=True, limit=(1e-4, 1.0)),
        _i("max_depth", 3, 10, limit=(1, 20)),
        _f("subsample", 0.5, 1.0, limit=(0.05, 1.0)),
        _f("colsample_bytree", 0.4, 1.0, limit=(0.05, 1.0)),
        _f("min_child_weight", 0.5, 20, log=True, limit=(0.0, 1000.0)),
        _f("reg_lambda", 1e-3, 10, log=True, limit=(0.0, 1000.0)),
        _c(CATEGORICAL_PARAM, *CATEGORICAL_CHOICES),
    ),
    "lgbm": (
        _i("n_estimators", 100, 800, log=True, limit=(1, 10_000)),
        _f("learning_rate", 0.01, 0.3, log=True, limit=(1e-4, 1.0)),
        _i("num_leaves", 8, 256, log=True, limit=(2, 4096)),
        _i("min_child_samples", 5, 100, log=True, limit=(1, 10_000)),
        _f("subsample", 0.5, 1.0, limit=(0.05, 1.0)),
        _f("colsample_bytree", 0.4, 1.0, limit=(0.05, 1.0)),
        _f("reg_lambda", 1e-3, 10, log=True, limit=(0.0, 1000.0)),
        _c(CATEGORICAL_PARAM, *CATEGORICAL_CHOICES),
    ),
    "hgb": (
        _i("max_iter", 100, 600, log=True, limit=(1, 10_000)),
        _f("learning_rate", 0.02, 0.3, log=True, limit=(1e-4, 1.0)),
        _i("max_leaf_nodes", 8, 128, log=True, limit=(2, 4096)),
        _i("min_samples_leaf", 5, 100, log=True, limit=(1, 10_000)),
        _f("l2_regularization", 1e-4, 10, log=True, limit=(0.0, 1000.0)),
        _c(CATEGORICAL_PARAM, *CATEGORICAL_CHOICES),
    ),
    "svm": (
        _f("C", 1e-2, 1e3, log=True, limit=(1e-6, 1e6)),
        _f("gamma", 1e-4, 1.0, log=True, limit=(1e-8, 1e3)),
        _f("epsilon", 1e-3, 1.0, log=True, limit=(0.0, 100.0), task="regression"),
    ),
    "linear": (
        _f("C", 1e-3, 1e3, log=True, limit=(1e-6, 1e6), task="classification"),
        _f("alpha", 1e-3, 1e3, log=True, limit=(0.0, 1e6), task="regression"),
    ),
    "knn": (
        _i("n_neighbors", 1, 50, log=True, limit=(1, 1000)),
        _c("weights", "uniform", "distance"),
        _c("p", 1, 2),
    ),
}


def params_of(family: str, task: str) -> tuple[Param, ...]:
    """The hyperparameters ``family`` takes for ``task``."""
    family = resolve_family(family)
    return tuple(p for p in PARAMS[family] if p.task in (None, task))


def resolve_family(family: str, prefer: str = "cpu") -> str:
    """``auto`` → the default family (XGBoost when the defaults prefer the GPU)."""
    if family != "auto":
        return family
    return GPU_AUTO_FAMILY if prefer == "gpu" else AUTO_FAMILY


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
    prefer: str = "cpu",
    native: bool = False,
) -> Any:
    """A fresh estimator of ``family`` for ``task`` with mlpilot's defaults, overridden by ``params``.

    ``n_jobs`` is the thread count of the families that take one (-1: every core);
    ``device`` is where XGBoost trains. ``prefer="gpu"`` picks defaults cuML accelerates
    (cuml.accel falls back to the CPU for ``class_weight="balanced_subsample"`` forests and,
    before 25.12, for distance-weighted neighbours). ``native``: its inputs carry pandas
    categories (``transformers.CategoryColumns``) that XGBoost must be told to read.
    """
    family = resolve_family(family, prefer)
    gpu = prefer == "gpu"
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
            balanced = "balanced" if gpu else "balanced_subsample"
            base["class_weight"] = balanced if imbalanced else None
            return RandomForestClassifier(**{**base, **params})
        base["max_features"] = 0.5
        return RandomForestRegressor(**{**base, **params})
    if family == "et":
        return _extra_trees(clf, params, seed=seed, n_jobs=n_jobs, imbalanced=imbalanced)
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
        if native:
            base["enable_categorical"] = True
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

        base = {"n_neighbors": 15, "weights": "uniform" if gpu else "distance", "n_jobs": n_jobs}
        cls = KNeighborsClassifier if clf else KNeighborsRegressor
        return cls(**{**base, **params})
    raise ValueError(f"unknown model family {family!r}; valid: {', '.join(FAMILIES)}")


def _extra_trees(
    clf: bool, params: dict[str, Any], *, seed: int, n_jobs: int, imbalanced: bool
) -> Any:
    """Extremely randomised trees (AutoGluon's portfolio has them): mlpilot's defaults."""
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

    base: dict[str, Any] = {"n_estimators": 200, "n_jobs": n_jobs, "random_state": seed}
    if clf:
        base["class_weight"] = "balanced_subsample" if imbalanced else None
        return ExtraTreesClassifier(**{**base, **params})
    base["max_features"] = 0.7
    return ExtraTreesRegressor(**{**base, **params})


def build_pipeline(
    data: DataState,
    family: str,
    params: dict[str, Any] | None = None,
    *,
    seed: int = 42,
    engine: str = "cpu",
    n_jobs: int = -1,
    prefer: str | None = None,
) -> Any:
    """SchemaCoercer → preprocessing → estimator: the whole model that gets logged (with
    ``CategoryColumns`` before the estimator when ``params`` ask for native categories).

    ``prefer`` (default: the engine) chooses the defaults; XGBoost trains where ``engine`` is.
    """
    from sklearn.pipeline import Pipeline

    from mlpilot.platform.ml.features import build_preprocessor
    from mlpilot.platform.ml.transformers import CategoryColumns, SchemaCoercer

    prefer = prefer or engine
    family = resolve_family(family, prefer)
    task = str(data.task)
    params = dict(params or {})
    features = data.feature_plan(seed)
    native = (
        params.pop(CATEGORICAL_PARAM, "encoded") == "native"
        and family in NATIVE_CATEGORICAL
        and bool(features.native)
    )
    preprocessor = build_preprocessor(
        data.specs,
        data.cleaning_plan(),
        features,
        scale=family in SCALE_SENSITIVE,
        task=task,
        seed=seed,
        native=native,
    )
    estimator = make_estimator(
        family,
        task,
        params=params,
        seed=seed,
        imbalanced=data.imbalanced,
        device="gpu" if engine == "gpu" else "cpu",
        n_classes=data.n_classes,
        n_jobs=n_jobs,
        prefer=prefer,
        native=native,
    )
    steps: list[tuple[str, Any]] = [
        ("coerce", SchemaCoercer([s.to_dict() for s in data.specs])),
        ("features", preprocessor),
    ]
    if native:
        steps.append(("categories", CategoryColumns(len(features.native))))
    return Pipeline([*steps, ("model", estimator)])
