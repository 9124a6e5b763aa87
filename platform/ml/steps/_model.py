"""Features, the model Pipeline, training and tuning."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.features import (
    CleaningPlan,
    FeaturePlan,
    build_preprocessor,
    plan_cleaning,
    plan_features,
)
from mlpilot.platform.ml.models import LABELS, SCALE_SENSITIVE, make_estimator, resolve_family
from mlpilot.platform.ml.steps._data import IMBALANCE_SHARE, _require_data, _test, _train


# -- features -----------------------------------------------------------------------------------
def engineer_features(
    run: PipelineRun,
    datetime: bool = True,
    target_encoding: bool = True,
    interactions: bool = False,
    max_interactions: int = 10,
) -> None:
    _require_data(run, "engineer_features")
    with run.stage("features"):
        X_train, y_train = _train(run)
        run.features = plan_features(
            X_train,
            y_train,
            run.specs,
            run.task,
            engineered=True,
            datetime=datetime,
            target_encoding=target_encoding,
            interactions=interactions,
            max_interactions=max_interactions,
            seed=run.seed,
        )
        run.logger.log_dict(run.features.to_dict(), "reports/features.json")
        run.logger.log_params(
            {
                "features.datetime": datetime,
                "features.target_encoding": target_encoding,
                "features.interactions": interactions,
            }
        )
        run.result["features"] = run.features.to_dict()


def _cleaning(run: PipelineRun) -> CleaningPlan:
    if run.cleaning is None:
        X_train, y_train = _train(run)
        run.cleaning = plan_cleaning(
            X_train, y_train, run.specs, run.task, "auto", indicators=False
        )
    return run.cleaning


def _features(run: PipelineRun) -> FeaturePlan:
    if run.features is None:
        X_train, y_train = _train(run)
        run.features = plan_features(
            X_train, y_train, run.specs, run.task, engineered=False, seed=run.seed
        )
    return run.features


def build_pipeline(run: PipelineRun, family: str, params: dict[str, Any] | None = None) -> Any:
    """SchemaCoercer → preprocessing → estimator: the whole model that gets logged."""
    from sklearn.pipeline import Pipeline

    from mlpilot.platform.ml.transformers import SchemaCoercer

    family = resolve_family(family)
    preprocessor = build_preprocessor(
        run.specs,
        _cleaning(run),
        _features(run),
        scale=family in SCALE_SENSITIVE,
        task=run.task,
        seed=run.seed,
    )
    imbalanced = bool(
        run.task == "classification" and run.y.value_counts(normalize=True).min() < IMBALANCE_SHARE
    )
    estimator = make_estimator(
        family,
        run.task,
        params=params,
        seed=run.seed,
        imbalanced=imbalanced,
        device="gpu" if run.engine == "gpu" else "cpu",
        n_classes=len(run.classes) if run.classes is not None else 0,
        n_jobs=run.n_jobs,
    )
    return Pipeline(
        [
            ("coerce", SchemaCoercer([s.to_dict() for s in run.specs])),
            ("features", preprocessor),
            ("model", estimator),
        ]
    )


# -- train ----------------------------------------------------------------------------------------
def train_model(
    run: PipelineRun, model: str = "auto", params: dict[str, Any] | None = None
) -> None:
    _require_data(run, "train_model")
    run.open_tracking()  # while the model fits
    with run.stage("train"):
        family = resolve_family(model)
        if model == "auto":
            run.note(f"model auto: fitting {LABELS[family]} with its default configuration")
        pipeline = build_pipeline(run, family, params)
        X_train, y_train = _train(run)
        if family == "svm" and len(X_train) > 20000:
            run.note(
                f"svm on {len(X_train)} rows is slow (its cost grows with the square of the rows)"
            )
        pipeline.fit(X_train, y_train)
        set_model(run, pipeline, family, params or {})
        run.event("progress", stage="train", message=f"fitted {LABELS[family]}")
    score_on_test(run)


def set_model(run: PipelineRun, pipeline: Any, family: str, params: dict[str, Any]) -> None:
    run.model, run.model_family, run.model_params = pipeline, family, dict(params)
    run.model_logged = False
    if run.main_metric is None:
        run.main_metric = M.default_metric(
            run.task, len(run.classes) if run.classes is not None else 0
        )
    run.logger.log_params(
        {"model.family": family, **{f"model.{k}": v for k, v in (params or {}).items()}}
    )


def score_on_test(run: PipelineRun) -> dict[str, float]:
    with run.stage("score"):
        X_test, y_test = _test(run)
        y_pred = run.model.predict(X_test)
        y_score = _scores(run.model, X_test) if run.task == "classification" else None
        test = M.scores(run.task, y_test, y_pred, y_score, run.classes, run.positive_class)
    run.log_metrics({f"test_{k}": v for k, v in test.items()})
    run.result["test_predictions"] = {"n": len(y_test)}
    return test


def _scores(model: Any, X: pd.DataFrame) -> np.ndarray | None:
    if hasattr(model, "predict_proba"):
        try:
            return model.predict_proba(X)
        except (AttributeError, NotImplementedError):
            pass
    if hasattr(model, "decision_function"):
        return model.decision_function(X)
    return None


# -- tune ---------------------------------------------------------------------------------------------
def optimize_model(
    run: PipelineRun,
    model: str = "auto",
    trials: int | None = 50,
    metric: str | None = None,
    timeout_s: float | None = None,
    early_stopping: bool = True,
    warm_start: bool = True,
) -> None:
    _require_data(run, "optimize_model")
    run.open_tracking()
    from mlpilot.platform.ml import tuning

    with run.stage("tune"):
        family, params = tuning.optimize(
            run,
            model=model,
            trials=trials,
            metric=metric,
            timeout_s=timeout_s,
            early_stopping=early_stopping,
            warm_start=warm_start,
        )
    with run.stage("train"):
        pipeline = build_pipeline(run, family, params)
        X_train, y_train = _train(run)
        pipeline.fit(X_train, y_train)
        set_model(run, pipeline, family, params)
        if metric:
            run.main_metric = metric
    score_on_test(run)
