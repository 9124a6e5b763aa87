"""Features, the model Pipeline, training and tuning."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.devices import observe_model
from mlpilot.platform.ml.features import plan_features
from mlpilot.platform.ml.modeling import ENSEMBLE_FAMILY, LABELS, resolve_family
from mlpilot.platform.ml.steps._outputs import log_model
from mlpilot.tracking import vocab


# -- features -----------------------------------------------------------------------------------
def engineer_features(
    run: PipelineRun,
    datetime: bool = True,
    target_encoding: bool = True,
    interactions: bool = False,
    max_interactions: int = 10,
) -> None:
    run.data.require("engineer_features")
    with run.stage("features"):
        X_train, y_train = run.data.train()
        run.data.features = plan_features(
            X_train,
            y_train,
            run.data.specs,
            run.data.task,
            engineered=True,
            datetime=datetime,
            target_encoding=target_encoding,
            interactions=interactions,
            max_interactions=max_interactions,
            seed=run.seed,
        )
        run.logger.log_dict(run.data.features.to_dict(), "reports/features.json")
        run.logger.log_params(
            {
                "features.datetime": datetime,
                "features.target_encoding": target_encoding,
                "features.interactions": interactions,
            }
        )
        run.result.features = run.data.features.to_dict()


# -- train ----------------------------------------------------------------------------------------
def train_model(
    run: PipelineRun, model: str = "auto", params: dict[str, Any] | None = None
) -> None:
    run.data.require("train_model")
    run.open_tracking()  # while the model fits
    with run.stage("train"):
        family = resolve_family(model, run.prefer)
        if model == "auto":
            run.note(f"model auto: fitting {LABELS[family]} with its default configuration")
        pipeline = run.build_pipeline(family, params)
        X_train, y_train = run.data.train()
        if family == "svm" and len(X_train) > 20000:
            run.note(
                f"svm on {len(X_train)} rows is slow (its cost grows with the square of the rows)"
            )
        pipeline.fit(X_train, y_train)
        observe_model(pipeline)  # fitted: XGBoost's booster now says where it trained
        set_model(run, pipeline, family, params or {})
        run.event("progress", stage="train", message=f"fitted {LABELS[family]}")
    score_on_test(run)


def set_model(run: PipelineRun, pipeline: Any, family: str, params: dict[str, Any]) -> None:
    """Make ``pipeline`` the run's model: scored, then logged when the pipeline ends."""
    model = run.model
    model.pipeline, model.family, model.params = pipeline, family, dict(params)
    model.logged = False
    if model.main_metric is None:
        model.main_metric = M.default_metric(str(run.data.task), run.data.n_classes)
    run.logger.log_params(
        {"model.family": family, **{f"model.{k}": v for k, v in (params or {}).items()}}
    )
    run.on_finish(_log_final_model)


def _log_final_model(run: PipelineRun) -> None:
    if run.model.fitted and not run.model.logged:
        with run.stage("log_model"):
            log_model(run)


def score_on_test(run: PipelineRun) -> dict[str, float]:
    with run.stage("score"):
        data, pipeline = run.data, run.model.pipeline
        observe_model(pipeline)
        X_test, y_test = data.test()
        started = time.perf_counter()
        y_pred = pipeline.predict(X_test)
        # what one pass over the test rows costs (permutation importance makes many)
        run.model.predict_s = time.perf_counter() - started
        y_score = _scores(pipeline, X_test) if data.task == "classification" else None
        test = M.scores(str(data.task), y_test, y_pred, y_score, data.classes, data.positive_class)
    run.log_metrics({f"test_{k}": v for k, v in test.items()})
    run.result.test_predictions = {"n": len(y_test)}
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
    run.data.require("optimize_model")
    run.open_tracking()
    from mlpilot.platform.ml.hpo import optimize

    with run.stage("tune"):
        family, params = optimize(
            run,
            model=model,
            trials=trials,
            metric=metric,
            timeout_s=timeout_s,
            early_stopping=early_stopping,
            warm_start=warm_start,
        )
    with run.stage("train"):
        if metric:
            run.model.main_metric = metric
        pipeline = run.build_pipeline(family, params)
        X_train, y_train = run.data.train()
        started = time.perf_counter()
        pipeline.fit(X_train, y_train)
        fit_s = time.perf_counter() - started
        observe_model(pipeline)
        chosen = _ensemble(run, pipeline)
        if chosen is not None:
            pipeline, family, params = chosen
        set_model(run, pipeline, family, params)
        run.model.fit_s = fit_s
        _log_search_cv(run)
    score_on_test(run)


def _ensemble(run: PipelineRun, best: Any) -> tuple[Any, str, dict] | None:
    """The search's weighted ensemble when it wins (time-budgeted searches only)."""
    from mlpilot.platform.ml.ensemble import build_ensemble
    from mlpilot.platform.ml.hpo.budget import AFTER_MODEL_S

    if run.model.main_metric is None:
        run.model.main_metric = M.default_metric(str(run.data.task), run.data.n_classes)
    built = build_ensemble(run, best, AFTER_MODEL_S)
    if built is None:
        return None
    model, params = built
    return model, ENSEMBLE_FAMILY, params


def _log_search_cv(run: PipelineRun) -> None:
    """``cv_<metric>``: the chosen configuration's own out-of-fold scores from the search
    (the folds every trial was scored on), labelled as such."""
    study = run.result.study or {}
    folds = study.get("best_fold_values")
    metric = run.model.main_metric
    if not folds or not metric:
        return
    run.log_metrics(
        {f"cv_{metric}": float(np.mean(folds)), f"cv_{metric}_std": float(np.std(folds))}
    )
    run.logger.log_params({"cv.folds": len(folds)})
    run.logger.set_tags({vocab.TAG_CV_SOURCE: vocab.CV_SOURCE_SEARCH})
