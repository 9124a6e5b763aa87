"""``optimize``: the study behind the ``optimize_model`` pipeline step."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.ensemble import ENSEMBLE_CANDIDATES, SearchOutput
from mlpilot.platform.ml.hpo import oof_store, sampling
from mlpilot.platform.ml.hpo import summary as S
from mlpilot.platform.ml.hpo.budget import (
    PLOTS_MIN_BUDGET_S,
    PlateauMoves,
    SearchClock,
    enqueue_low_cost,
)
from mlpilot.platform.ml.hpo.early_stopping import (
    EARLY_STOP_MIN_DELTA,
    EARLY_STOP_PATIENCE,
    EARLY_STOP_WARMUP,
    EarlyStopping,
)
from mlpilot.platform.ml.hpo.monitor import StudyMonitor
from mlpilot.platform.ml.hpo.objective import CVObjective, search_folds
from mlpilot.platform.ml.hpo.session import (
    make_pruner,
    make_sampler,
    quiet_optuna,
    remaining,
    run_trials,
)
from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM, auto_families, model_params
from mlpilot.platform.ml.hpo.spec import default_study_name, spec_from_run
from mlpilot.platform.ml.hpo.storage import open_storage, redact
from mlpilot.platform.ml.hpo.trial_log import TrialLogger
from mlpilot.platform.ml.hpo.warm import enqueue_warm_start
from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlpilot.platform.ml.context import PipelineRun

DEFAULT_TRIALS = 50
#: a search needs at least this much of its budget left when it starts
MIN_SEARCH_S = 1.0
#: a time-budgeted search that ends with more than this share unused says why
UNUSED_NOTE_SHARE = 0.2


def optimize(
    run: PipelineRun,
    *,
    model: str,
    trials: int | None,
    metric: str | None,
    timeout_s: float | None,
    early_stopping: bool,
    warm_start: bool,
    patience: int = EARLY_STOP_PATIENCE,
    min_delta: float = EARLY_STOP_MIN_DELTA,
    warmup: int = EARLY_STOP_WARMUP,
    pruning: bool = True,
    study_name: str | None = None,
    storage: str | None = None,
    plots: bool = True,
    dask_client: Any = None,
) -> tuple[str, dict[str, Any]]:
    """Run (or resume) the study for ``run``; return the best family and its parameters.

    ``trials`` is the study's budget: a resumed study runs only what is left of it, and
    workers that join share it. ``dask_client`` runs the trials on that Dask cluster.
    """
    import optuna

    from mlpilot.platform.config import get_settings

    quiet_optuna()
    n_classes = len(run.data.classes) if run.data.classes is not None else 0
    metric = metric or run.model.main_metric or M.default_metric(run.data.task, n_classes)
    run.model.main_metric = metric
    if trials is None and timeout_s is None:
        trials = DEFAULT_TRIALS
        run.note(f"no trial count or time budget given: running {DEFAULT_TRIALS} trials")

    storage_url = storage or get_settings().optuna_storage
    name = study_name or default_study_name(run, model)
    backend = open_storage(storage_url)
    study = optuna.create_study(
        study_name=name,
        storage=backend,
        direction=M.direction(metric),
        sampler=make_sampler(model, run.seed),
        pruner=make_pruner(pruning),
        load_if_exists=True,
    )
    # named as the search starts: more workers can join a long search while it runs
    run.event("study", stage=run.current_stage, message=name)
    folds = search_folds(int(run.data.n_train or 0), timeout_s is not None)
    spec_from_run(
        run,
        model=model,
        metric=metric,
        n_trials=trials,
        timeout_s=timeout_s,
        early_stopping=early_stopping,
        patience=patience,
        min_delta=min_delta,
        warmup=warmup,
        pruning=pruning,
        cv_folds=folds,
    ).save(study)
    clock = _clock(run, timeout_s)
    objective = CVObjective(
        run,
        model=model,
        metric=metric,
        folds=folds,
        pruning=pruning,
        clock=clock,
        # a time budget ends with the ensemble: keep the best trials' out-of-fold output
        keep_oof=2 * ENSEMBLE_CANDIDATES if clock is not None else 0,
    )
    # cheap first in rows: a large set's trials begin on a sample (time budgets only)
    sampling.start(
        study,
        train=len(objective.y),
        full=max(len(train) for train, _ in objective.splits),
        folds=len(objective.splits),
        enabled=clock is not None and trials is None,
    )
    enqueue_warm_start(run, study, objective, model=model, timed=clock is not None, on=warm_start)
    logger = TrialLogger.for_parent(run.logger, name)
    stopper = (
        EarlyStopping(patience=patience, min_delta=min_delta, warmup=warmup)
        if early_stopping
        else None
    )
    monitor = _monitor(run, study, model, metric, trials, clock, stopper, logger)
    try:
        session = run_trials(
            study,
            objective,
            monitor,
            n_trials=remaining(study, trials),
            timeout_s=max(clock.search_left(), MIN_SEARCH_S) if clock else timeout_s,
            storage_url=storage_url,
            backend=backend,
            dask_client=dask_client,
        )
    finally:
        if logger is not None:
            logger.close()
    if session.reaped:
        run.note(f"trials {session.reaped} were left RUNNING by a dead worker: marked FAIL")
    summary = S.study_summary(
        study,
        storage=redact(storage_url),
        metric=metric,
        model=model,
        budget=trials,
        stop_reason=session.stop_reason,
    )
    _conclude(run, study, objective, session.stop_reason, summary, clock, model, plots=plots)
    if summary["early_stopped"]:
        run.note(
            f"early stopping after {summary['n_trials']} trials: no gain over {min_delta:.0%} "
            f"in {patience} trials"
        )
    best = study.best_trial
    return str(best.params.get(FAMILY_PARAM, model)), model_params(best.params)


def _monitor(
    run: PipelineRun,
    study: Any,
    model: str,
    metric: str,
    trials: int | None,
    clock: SearchClock | None,
    stopper: EarlyStopping | None,
    logger: TrialLogger | None,
) -> StudyMonitor:
    """The study's per-trial callback; under a time budget, cheap first configurations."""
    families = auto_families(run.prefer) if model == "auto" else (model,)
    if clock is not None and enqueue_low_cost(study, families, model):
        run.note("time budget: the search starts with one small, fast configuration per family")
    return StudyMonitor(
        metric=metric,
        budget=trials,
        stopper=stopper,
        logger=logger,
        emit=lambda fields: run.event("trial", **fields),
        clock=clock,
        # a trial count keeps plain early stopping; a time budget moves on at a plateau
        moves=PlateauMoves(model, families, str(run.data.task))
        if clock is not None and trials is None
        else None,
        note=run.note,
    )


def _conclude(
    run: PipelineRun,
    study: Any,
    objective: CVObjective,
    reason: str | None,
    summary: dict[str, Any],
    clock: SearchClock | None,
    model: str,
    *,
    plots: bool,
) -> None:
    """After the search: its best, what the ensemble needs, the record and the notes."""
    if summary["best_value"] is None:
        raise MlpilotError(
            "no trial of the study completed", hint="see logs/stderr.txt for the trials' errors"
        )
    best_trial = study.best_trial
    summary["best_fold_values"] = best_trial.user_attrs.get(vocab.ATTR_FOLD_VALUES)
    run.search = _search_output(study, objective, model, best_trial.number, note=run.note)
    if reason == "failures":
        run.note("the study stopped early: its last trials all failed (see logs/stderr.txt)")
    sample = sampling.SampleState.of(study.user_attrs)
    if sample is not None and clock is not None:
        run.note(sample.describe())
    if plots and clock is not None and not clock.plots:
        plots = False
        run.note(
            f"no study plots: a time budget under {PLOTS_MIN_BUDGET_S:.0f} s keeps its time "
            "for the search (optuna-dashboard on the study's storage draws them)"
        )
    _record(run, study, summary, plots=plots)
    if clock is not None:
        _note_unused(run, clock, reason, summary)
        if model == "auto":
            _note_untried(run, summary)


def _search_output(
    study: Any,
    objective: CVObjective,
    model: str,
    best_number: int,
    note: Callable[[str], None] | None = None,
) -> SearchOutput | None:
    """The best trials' out-of-fold output and configurations, for the ensemble."""
    joined = _join_shared(study, objective, model)
    if joined and note is not None:
        note(f"ensemble candidates include {joined} trials run by workers")
    if len(objective.oof) < 2:
        return None
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    attrs = study.user_attrs
    configs, fit_s = {}, {}
    for number in objective.oof:
        params = trials[number].params
        configs[number] = (str(params.get(FAMILY_PARAM, model)), model_params(params))
        # members are refitted on every row: a trial on a sample measured a smaller fit
        fit_s[number] = sampling.full_fit_s(trials[number], attrs) or 0.0
    return SearchOutput(
        oof=dict(objective.oof),
        values=dict(objective.oof_values),
        configs=configs,
        fit_s=fit_s,
        y=objective.y.to_numpy(),
        splits=objective.splits,
        maximize=objective.metric not in M.LOWER_IS_BETTER,
        best_number=best_number,
    )


def _join_shared(study: Any, objective: CVObjective, model: str) -> int:
    """Pass the output other processes stored in the study (``oof_store``) through the
    objective's own candidate rules; how many of those trials are candidates now."""
    if not objective.keep_oof:  # no ensemble: nothing to read
        return 0
    rows = len(objective.y)
    shape = (rows, objective.n_classes) if objective.n_classes else (rows,)
    theirs = set()
    for number, value, output, family in oof_store.shared_candidates(
        study, objective.oof_folds, set(objective.oof), model, shape
    ):
        objective._keep(number, value, output, family)
        theirs.add(number)
    return len(theirs & set(objective.oof))


def _clock(run: PipelineRun, timeout_s: float | None) -> SearchClock | None:
    """The whole run's clock for a time budget, with the run's deadline set; None without.

    The budget counts from the request's start (``PipelineRun.started_at``): a budget
    already spent before the search fails the run with what it was spent on.
    """
    if timeout_s is None:
        return None
    clock = SearchClock.for_run(run.started_at, float(timeout_s))
    run.deadline = clock.deadline
    if clock.search_left() < MIN_SEARCH_S:
        import time

        spent = time.time() - run.started_at
        raise MlpilotError(
            f"the time budget of {timeout_s:g} s leaves no time to search: {spent:.1f} s went "
            f"to starting up and preparing the data, and about {clock.reserve_s:.0f} s are "
            "kept for the final fit, scoring and logging",
            hint=f"give a budget of at least {spent + clock.reserve_s + 10:.0f} s",
        )
    return clock


def _note_unused(
    run: PipelineRun, clock: SearchClock, reason: str | None, summary: dict[str, Any]
) -> None:
    """Say why a time-budgeted search ended with much of its budget left."""
    unused = clock.unused_share()
    summary["unused_share"] = round(unused, 4)
    if unused <= UNUSED_NOTE_SHARE:
        return
    if reason == "exhausted":
        run.note(
            f"the search ended with {unused:.0%} of its time budget unused: nothing was left "
            "to try (every family had its trials and the best configuration was grown to the "
            "top of its search space, with no further gain)"
        )
    elif reason in ("budget", "trials"):
        run.note(f"the search used its trial budget with {unused:.0%} of its time unused")
    elif reason == "failures":
        run.note(f"the search stopped on failing trials with {unused:.0%} of its time unused")


def _note_untried(run: PipelineRun, summary: dict[str, Any]) -> None:
    """Name the families a time budget ended before, so a missing family is never silent."""
    tried = set(summary.get("trials_by_family") or {})
    untried = [f for f in auto_families(run.prefer) if f not in tried]
    if untried:
        run.note(
            f"the time budget ended before {', '.join(untried)} had a trial "
            "(a longer budget tries every family)"
        )


def _record(run: PipelineRun, study: Any, summary: dict[str, Any], *, plots: bool) -> None:
    try:
        S.log_params_once(run.logger, summary)
    except Exception as exc:  # a resumed study in a run that logged other best params before
        logger.debug("a resumed study in a run that logged other best params before: %s", exc)
        run.note(f"hpo.* params kept from before ({type(exc).__name__}); tags hold the new best")
    S.log_to_parent(run.logger, summary)
    run.metrics.update(
        {"hpo_best_value": summary["best_value"], "hpo_trials": float(summary["n_trials"])}
    )
    if plots:
        summary["param_importances"] = S.param_importances(study)
        logged = run.logger  # tracked: through MLflow, or relayed through the run folder
        if getattr(logged, "client", None) is not None or getattr(logged, "relayed", False):
            with tempfile.TemporaryDirectory() as tmp:
                summary["plots"] = S.log_plots(
                    run.logger, study, Path(tmp), summary["param_importances"]
                )
    run.result.study = summary
