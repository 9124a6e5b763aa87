"""Models: a family's estimator with mlpilot's defaults, and the whole logged pipeline.

What each family is (its estimator, defaults, parameter specification, search space)
lives in its class in ``ml/families``; this module builds from there: ``make_estimator``
one estimator, ``build_pipeline`` the whole model around it that gets logged. Steps and
the search both build models here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml import families
from mlpilot.platform.ml.families import CATEGORICAL_PARAM, Build, Param

if TYPE_CHECKING:
    from mlpilot.platform.ml.state import DataState

__all__ = [
    "CATEGORICAL_PARAM",
    "Param",
    "build_pipeline",
    "label_of",
    "make_estimator",
    "params_of",
    "resolve_family",
]


def params_of(family: str, task: str) -> tuple[Param, ...]:
    """The hyperparameters ``family`` takes for ``task``."""
    return families.get(resolve_family(family)).params_for(task)


def resolve_family(family: str, prefer: str = "cpu") -> str:
    """``auto`` → the default family (XGBoost when the defaults prefer the GPU)."""
    if family != "auto":
        return family
    return families.default(families.AUTO_GPU if prefer == "gpu" else families.AUTO).name


def label_of(family: str) -> str:
    """What people read for ``family`` (its name when it is no registered family)."""
    registry = families.registry()
    return registry.get(family).label if family in registry else family


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
    native_columns: int = 0,
) -> Any:
    """A fresh estimator of ``family`` for ``task`` with mlpilot's defaults, overridden by ``params``.

    ``n_jobs`` is the thread count of the families that take one (-1: every core);
    ``device`` is where a family with its own GPU build trains. ``prefer="gpu"`` picks
    defaults cuML accelerates. ``native``: its inputs carry ``native_columns`` leading
    categorical columns that the estimator must be told to read.
    """
    build = Build(
        task=task,
        seed=seed,
        imbalanced=imbalanced,
        device=device,
        n_classes=n_classes,
        n_jobs=n_jobs,
        prefer=prefer,
        native=native,
        native_columns=native_columns,
        cuml=families.cuml_release() if prefer == "gpu" else None,
    )
    return families.get(resolve_family(family, prefer)).make_estimator(build, dict(params or {}))


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
    from mlpilot.platform.ml.transformers import SchemaCoercer

    prefer = prefer or engine
    family = resolve_family(family, prefer)
    spec = families.get(family)
    task = str(data.task)
    params = dict(params or {})
    features = data.feature_plan(seed)
    native = (
        params.pop(CATEGORICAL_PARAM, "encoded") == "native"
        and spec.native_categorical
        and bool(features.native)
    )
    preprocessor = build_preprocessor(
        data.specs,
        data.cleaning_plan(),
        features,
        scale=spec.scale_sensitive,
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
        native_columns=len(features.native) if native else 0,
    )
    steps: list[tuple[str, Any]] = [
        ("coerce", SchemaCoercer([s.to_dict() for s in data.specs])),
        ("features", preprocessor),
    ]
    if native:
        steps.append(("categories", spec.categories_step(len(features.native))))
    return Pipeline([*steps, ("model", estimator)])
