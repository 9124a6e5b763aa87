"""Hyperparameter search with Optuna: search spaces, the CV objective, early stopping.

Trials are logged as nested MLflow runs (``mlpilot.kind=trial``) in batches; the study
lives in Optuna storage (a journal file under ``$MLPILOT_HOME`` by default).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mlpilot.platform.ml import metrics as M

if TYPE_CHECKING:
    import optuna

    from mlpilot.platform.ml.context import PipelineRun

AUTO_FAMILIES = ("hgb", "rf", "xgb", "lgbm", "linear")
EARLY_STOP_PATIENCE = 10
EARLY_STOP_MIN_DELTA = 0.01
TRIAL_LOG_BATCH = 10
CV_FOLDS = 3


def suggest_params(trial: optuna.Trial, family: str, task: str) -> dict[str, Any]:
    """The search space of one model family."""
    clf = task == "classification"
    if family == "rf":
        return {
            "n_estimators": trial.suggest_int("n_estimators", 50, 400, log=True),
            "max_depth": trial.suggest_int("max_depth", 3, 30, log=True),
            "min_samples_leaf": trial.suggest_int("min_samples_leaf", 1, 20, log=True),
            "max_features": trial.suggest_float("max_features", 0.2, 1.0),
        }
    if family == "xgb":
        return {
            "n_estimators": trial.suggest_int("n_estimators", 100, 800, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
            "max_depth": trial.suggest_int("max_depth", 3, 10),
            "subsample": trial.suggest_float("subsample", 0.5, 1.0),
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.4, 1.0),
            "min_child_weight": trial.suggest_float("min_child_weight", 0.5, 20, log=True),
            "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10, log=True),
        }
    if family == "lgbm":
        return {
            "n_estimators": trial.suggest_int("n_estimators", 100, 800, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
            "num_leaves": trial.suggest_int("num_leaves", 8, 256, log=True),
            "min_child_samples": trial.suggest_int("min_child_samples", 5, 100, log=True),
            "subsample": trial.suggest_float("subsample", 0.5, 1.0),
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.4, 1.0),
            "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10, log=True),
        }
    if family == "hgb":
        return {
            "max_iter": trial.suggest_int("max_iter", 100, 600, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.02, 0.3, log=True),
            "max_leaf_nodes": trial.suggest_int("max_leaf_nodes", 8, 128, log=True),
            "min_samples_leaf": trial.suggest_int("min_samples_leaf", 5, 100, log=True),
            "l2_regularization": trial.suggest_float("l2_regularization", 1e-4, 10, log=True),
        }
    if family == "svm":
        params = {
            "C": trial.suggest_float("C", 1e-2, 1e3, log=True),
            "gamma": trial.suggest_float("gamma", 1e-4, 1.0, log=True),
        }
        if not clf:
            params["epsilon"] = trial.suggest_float("epsilon", 1e-3, 1.0, log=True)
        return params
    if family == "linear":
        if clf:
            return {"C": trial.suggest_float("C", 1e-3, 1e3, log=True)}
        return {"alpha": trial.suggest_float("alpha", 1e-3, 1e3, log=True)}
    if family == "knn":
        return {
            "n_neighbors": trial.suggest_int("n_neighbors", 1, 50, log=True),
            "weights": trial.suggest_categorical("weights", ["uniform", "distance"]),
            "p": trial.suggest_categorical("p", [1, 2]),
        }
    raise ValueError(f"no search space for model family {family!r}")


class EarlyStopping:
    """Stop a study after ``patience`` consecutive trials that improve the best by less than ``min_delta`` (relative)."""

    def __init__(
        self, patience: int = EARLY_STOP_PATIENCE, min_delta: float = EARLY_STOP_MIN_DELTA
    ) -> None:
        self.patience = patience
        self.min_delta = min_delta
        self.best: float | None = None
        self.stale = 0
        self.stopped = False

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        import optuna

        if trial.state != optuna.trial.TrialState.COMPLETE or trial.value is None:
            return
        value = float(trial.value)
        if self.best is None:
            self.best = value
            return
        sign = 1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
        improvement = sign * (value - self.best) / max(abs(self.best), 1e-12)
        if improvement > self.min_delta:
            self.stale = 0
        else:
            self.stale += 1
        if sign * (value - self.best) > 0:
            self.best = value
        if self.stale >= self.patience:
            self.stopped = True
            study.stop()


def open_storage(url_or_path: str) -> Any:
    """Optuna storage from an RDB URL or a journal file path."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if "://" in url_or_path:
        return optuna.storages.RDBStorage(url_or_path, heartbeat_interval=10, grace_period=30)
    path = Path(url_or_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


class TrialLogger:
    """Logs finished trials as nested runs, a batch at a time."""

    def __init__(self, run: PipelineRun, family: str | None, total: int | None = None) -> None:
        self.run = run
        self.family = family
        self.total = total
        self.pending: list[optuna.trial.FrozenTrial] = []

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.pending.append(trial)
        best = study.best_value if any(t.value is not None for t in study.trials) else None
        self.run.event(
            "trial", number=trial.number, state=trial.state.name, value=trial.value, best=best
        )
        if len(self.pending) >= TRIAL_LOG_BATCH:
            self.flush()

    def flush(self) -> None:
        for trial in self.pending:
            child = self.run.logger.child(
                f"trial-{trial.number}",
                tags={"mlpilot.kind": "trial", "mlpilot.trial_state": trial.state.name},
            )
            child.log_params(dict(trial.params))
            metrics = {"trial_number": trial.number}
            if trial.value is not None:
                metrics["value"] = trial.value
            if trial.duration is not None:
                metrics["duration_s"] = trial.duration.total_seconds()
            child.log_metrics(metrics)
            child.end("FINISHED" if trial.state.name == "COMPLETE" else "FAILED")
        self.pending.clear()


def optimize(
    run: PipelineRun,
    *,
    model: str,
    trials: int | None,
    metric: str | None,
    timeout_s: float | None,
    early_stopping: bool,
    warm_start: bool,
) -> tuple[str, dict[str, Any]]:
    """Run the study; return the best family and its parameters."""
    import optuna
    from sklearn.base import clone
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score

    from mlpilot.platform.config import get_settings
    from mlpilot.platform.ml.steps import _train, build_pipeline

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_classes = len(run.classes) if run.classes is not None else 0
    metric = metric or run.main_metric or M.default_metric(run.task, n_classes)
    run.main_metric = metric
    scorer = M.sklearn_scorer(metric, run.task, run.classes)
    sign = -1.0 if metric in M.LOWER_IS_BETTER else 1.0
    X_train, y_train = _train(run)
    if run.task == "classification":
        folds = max(2, min(CV_FOLDS, int(y_train.value_counts().min())))
        splitter: Any = StratifiedKFold(n_splits=folds, shuffle=True, random_state=run.seed)
    else:
        splitter = KFold(n_splits=CV_FOLDS, shuffle=True, random_state=run.seed)
    if trials is None and timeout_s is None:
        trials = 50
        run.note("no trial count or time budget given: running 50 trials")
    if warm_start:
        run.note("warm start requested, but no meta-learned prior ships yet: starting cold")
        run.result["warm_start"] = "unavailable"

    def objective(trial: optuna.Trial) -> float:
        family = (
            trial.suggest_categorical("family", list(AUTO_FAMILIES)) if model == "auto" else model
        )
        params = suggest_params(trial, family, run.task)
        pipeline = build_pipeline(run, family, params)
        values = cross_val_score(clone(pipeline), X_train, y_train, cv=splitter, scoring=scorer)
        return float(sign * np.mean(values))

    settings = get_settings()
    storage_url = settings.optuna_storage
    name = f"{run.target or 'study'}-{model}-{(run.logger.run_id or time.strftime('%Y%m%d%H%M%S'))[:8]}"
    study = optuna.create_study(
        study_name=name,
        storage=open_storage(storage_url),
        direction=M.direction(metric),
        sampler=optuna.samplers.TPESampler(seed=run.seed, multivariate=True),
        load_if_exists=True,
    )
    callbacks: list[Any] = [TrialLogger(run, None if model == "auto" else model, trials)]
    stopper = EarlyStopping() if early_stopping else None
    if stopper:
        callbacks.append(stopper)
    study.optimize(
        objective, n_trials=trials, timeout=timeout_s, callbacks=callbacks, catch=(ValueError,)
    )
    callbacks[0].flush()
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        from mlpilot.platform.errors import MlpilotError

        raise MlpilotError(
            "no trial of the study completed", hint="see logs/stderr.txt for the trials' errors"
        )
    best = study.best_trial
    params = {k: v for k, v in best.params.items() if k != "family"}
    family = best.params.get("family", model)
    run.log_metrics({"hpo_best_value": float(best.value), "hpo_trials": len(study.trials)})
    run.logger.log_params(
        {
            "hpo.metric": metric,
            "hpo.family": family,
            **{f"hpo.best.{k}": v for k, v in params.items()},
        }
    )
    run.result["study"] = {
        "name": name,
        "storage": storage_url,
        "best_value": float(best.value),
        "n_trials": len(study.trials),
        "early_stopped": bool(stopper and stopper.stopped),
        "metric": metric,
    }
    if stopper and stopper.stopped:
        run.note(
            f"early stopping after {len(study.trials)} trials: no gain over {EARLY_STOP_MIN_DELTA:.0%} in {EARLY_STOP_PATIENCE} trials"
        )
    return family, params
