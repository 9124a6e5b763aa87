"""Features, the model Pipeline, training and tuning."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.ml import families
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.devices import observe_model
from mlpilot.platform.ml.families import ENSEMBLE_FAMILY
from mlpilot.platform.ml.features import plan_features
from mlpilot.platform.ml.modeling import CATEGORICAL_PARAM, label_of, resolve_family
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
        X_train, y_train = run.data.train()
        if model == "auto":
            family, params = _auto_choice(run, family, params, X_train, y_train)
        pipeline = run.build_pipeline(family, params)
        spec = families.get(family)
        if spec.slow_above_rows is not None and len(X_train) > spec.slow_above_rows:
            run.note(f"{family} on {len(X_train)} rows is slow ({spec.slow_reason})")
        pipeline.fit(X_train, y_train)
        observe_model(pipeline)  # fitted: XGBoost's booster now says where it trained
        set_model(run, pipeline, family, params or {})
        run.event("progress", stage="train", message=f"fitted {label_of(family)}")
    score_on_test(run)


def _auto_choice(
    run: PipelineRun, family: str, params: dict[str, Any] | None, X: Any, y: Any
) -> tuple[str, dict[str, Any] | None]:
    """``model="auto"``: the prior's best configuration for data like this (when one ships
    and the plan gave no parameters), else the default family with its defaults."""
    from mlpilot.platform.ml.hpo.spaces import auto_families
    from mlpilot.platform.ml.hpo.warm import best_configuration

    chosen = None if params else best_configuration(run, auto_families(run.prefer), X, y)
    if chosen is None:
        run.note(f"model auto: fitting {label_of(family)} with its default configuration")
        return family, params
    family, params, source = chosen
    run.note(
        f"model auto: fitting {label_of(family)} with the configuration that did best on {source}"
    )
    return family, params


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
    from mlpilot.platform.ml.hpo.optimize import optimize

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
        _note_categorical(run, family, params)
        chosen = _ensemble(run, pipeline)
        if chosen is not None:
            pipeline, family, params = chosen
        refit = AllRowsRefit(pipeline, time.perf_counter() - started)
        if timeout_s is not None:  # before set_model: refitted before it is logged
            run.on_finish(refit)
        set_model(run, pipeline, family, params)
        run.model.fit_s = fit_s
        run.model.refit_s = refit.cost(run) if timeout_s is not None else 0.0
        _log_search_cv(run)
    score_on_test(run)


def _note_categorical(run: PipelineRun, family: str, params: dict[str, Any]) -> None:
    """Say how the search's best configuration takes the categorical columns, when that
    was one of the searched choices."""
    how = params.get(CATEGORICAL_PARAM)
    columns = run.data.feature_plan(run.seed).native
    if how is None or not columns:
        return
    names = ", ".join(columns[:5]) + (f" and {len(columns) - 5} more" if len(columns) > 5 else "")
    label = label_of(family)
    if how == "native":
        run.note(
            f"categorical columns ({names}): the best {label} splits on their categories "
            "itself, which scored better in the search than one-hot and target encoding"
        )
    else:
        run.note(
            f"categorical columns ({names}): the best {label} takes them one-hot or target "
            "encoded, which scored better in the search than its own category splits"
        )


#: refitting on every row costs this many times the fit on the training rows (more rows,
#: and a margin for a busy machine)
REFIT_ALL_MARGIN = 1.5
#: seconds kept after the refit for logging the model and recording the run
AFTER_REFIT_S = 1.0


class AllRowsRefit:
    """After the steps (importance included) and before the model is logged: the chosen
    model (single or ensemble) refitted on every row of the file, the held-out test rows
    included, as the search's ``test_`` metrics were already measured on them. Skipped,
    with a note, when it would not end inside the time budget."""

    def __init__(self, pipeline: Any, fit_s: float) -> None:
        self.pipeline, self.fit_s = pipeline, fit_s

    def cost(self, run: PipelineRun) -> float:
        """Estimated seconds of the refit (the fit on the training rows, scaled up)."""
        n_train = max(int(run.data.n_train or 0), 1)
        return REFIT_ALL_MARGIN * self.fit_s * len(run.data.y) / n_train

    def __call__(self, run: PipelineRun) -> None:
        if run.model.logged or run.model.pipeline is not self.pipeline:
            return  # logged already, or a later step chose another model
        X, y = run.data.X, run.data.y
        n_train, n_all = int(run.data.n_train or 0), len(y)
        if n_all <= n_train:
            return
        cost = self.cost(run)
        left = run.time_left()
        if left is not None and cost + AFTER_REFIT_S > left:
            run.note(
                f"refit on all {n_all} rows skipped: it needs about {cost:.1f} s and "
                f"{max(left - AFTER_REFIT_S, 0):.1f} s of the time budget are free; the logged "
                f"model is the one fitted on the {n_train} training rows"
            )
            return
        from sklearn.base import clone

        with run.stage("refit"):
            refitted = clone(self.pipeline).fit(X, y)
            observe_model(refitted)
        run.model.pipeline = refitted
        run.logger.log_params({"model.fit_rows": n_all})
        run.note(
            f"the chosen model was refitted on all {n_all} rows of the file for logging; its "
            f"test_ metrics were measured before, fitted on the {n_train} training rows only"
        )


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
