"""A time budget for the whole run: the search's clock, plateau moves, cheap-first starts,
time-pruned trials, cheaper extras when they would not fit, and the start time handed over."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import optuna
import pandas as pd
import pytest
from helpers import loaded_run

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import families, protocol, steps
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.hpo import budget as B
from mlpilot.platform.ml.hpo.early_stopping import EarlyStopping
from mlpilot.platform.ml.hpo.monitor import StudyMonitor
from mlpilot.platform.ml.hpo.objective import CVObjective
from mlpilot.platform.ml.hpo.optimize import _clock
from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM, sample
from mlpilot.tracking import vocab
from mlpilot.tracking.run_logger import NullRunLogger

optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- the clock ----------------------------------------------------------------------------------
def test_the_search_deadline_keeps_a_reserve_that_grows_with_the_best_fit() -> None:
    clock = B.SearchClock.for_run(started_at=1000.0, budget_s=60.0)
    assert clock.deadline == 1060.0
    base = clock.reserve_s
    assert base == pytest.approx(B.FINISH_BASE_S + B.FINISH_SHARE * 60)
    assert clock.search_deadline == pytest.approx(1060.0 - base)
    clock.update_reserve(5.0)  # the best trial fits a fold in 5 s: its refits need room
    folds = B.REFIT_FOLDS + B.ALL_ROWS_REFIT_FOLDS  # on the training rows, then on all rows
    assert clock.reserve_s == pytest.approx(base + folds * (1 + B.ENSEMBLE_REFITS) * 5.0)
    now = clock.search_deadline - 3.0
    assert clock.fits(2.9, now) and not clock.fits(3.1, now)
    assert clock.unused_share(now) == pytest.approx(3.0 / 60.0)
    assert clock.unused_share(clock.deadline + 10) == 0.0


def test_a_budget_spent_before_the_search_fails_saying_on_what() -> None:
    run = SimpleNamespace(started_at=time.time() - 100.0, deadline=None)
    with pytest.raises(MlpilotError, match="leaves no time to search") as info:
        _clock(run, 10)
    assert "at least" in str(info.value.hint)
    assert run.deadline == pytest.approx(run.started_at + 10)
    assert _clock(SimpleNamespace(started_at=time.time(), deadline=None), None) is None


def test_a_clock_with_time_left_sets_the_runs_deadline() -> None:
    run = SimpleNamespace(started_at=time.time(), deadline=None)
    clock = _clock(run, 600)
    assert clock is not None and run.deadline == clock.deadline
    assert clock.search_left() > 500


# -- growing a configuration --------------------------------------------------------------------
def test_growing_doubles_the_rounds_and_halves_the_rate_inside_the_space() -> None:
    grown = B.grow("lgbm", {"n_estimators": 200, "learning_rate": 0.1, "num_leaves": 31}, "x")
    assert grown == {"n_estimators": 400, "learning_rate": 0.05, "num_leaves": 31}
    capped = B.grow("lgbm", {"n_estimators": 600, "learning_rate": 0.011}, "x")
    assert capped == {"n_estimators": 800, "learning_rate": 0.01}  # the space's top and floor
    assert B.grow("lgbm", {"n_estimators": 800, "learning_rate": 0.1}, "x") is None
    assert B.grow("rf", {"n_estimators": 100}, "regression") == {"n_estimators": 200}
    assert B.grow("linear", {"alpha": 1.0}, "regression") is None


def _fixed(trial: optuna.trial.FrozenTrial) -> dict:
    return dict(trial.system_attrs["fixed_params"])  # where Optuna keeps a queued trial's


def test_the_low_cost_starts_are_queued_once_on_a_fresh_study_only() -> None:
    study = optuna.create_study()
    assert B.enqueue_low_cost(study, ("rf", "lgbm", "linear"), "auto") == 3
    waiting = [_fixed(t) for t in study.get_trials() if t.state.name == "WAITING"]
    assert [p[FAMILY_PARAM] for p in waiting] == ["lgbm", "linear", "rf"]  # cheapest first
    assert waiting[0]["lgbm.n_estimators"] == families.get("lgbm").low_cost["n_estimators"]
    assert B.enqueue_low_cost(study, ("rf",), "auto") == 0  # not fresh any more
    one = optuna.create_study()
    assert B.enqueue_low_cost(one, ("xgb",), "xgb") == 1
    assert _fixed(one.get_trials()[0]) == dict(families.get("xgb").low_cost)


# -- plateau moves --------------------------------------------------------------------------------
def _constant(model: str, families: tuple[str, ...]) -> object:
    def objective(trial: optuna.Trial) -> float:
        sample(trial, model, "regression")
        return 1.0

    return objective


def test_a_budgeted_plateau_moves_on_until_nothing_is_left() -> None:
    families = ("rf", "linear")
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(0))
    notes: list[str] = []
    moves = B.PlateauMoves("auto", families, "regression")
    monitor = StudyMonitor(
        metric="r2",
        stopper=EarlyStopping(patience=3, warmup=0),
        moves=moves,
        note=notes.append,
    )
    monitor.start(study)
    study.optimize(_constant("auto", families), n_trials=500, callbacks=[monitor])
    assert monitor.stop_reason == "exhausted" and len(study.trials) < 500
    kinds = [m.split(":")[0].split(" ")[0] for m in moves.done]
    assert "another" in kinds and "the" in kinds and str(B.FOCUS_TRIALS) in kinds
    # the order: families first, then growing, then focused trials
    assert kinds.index("another") < kinds.index("the") < kinds.index(str(B.FOCUS_TRIALS))
    assert study.user_attrs[vocab.ATTR_MOVES] == moves.done
    assert len(notes) == len(moves.done) and notes[0].startswith("plateau after")


def test_a_trial_count_budget_keeps_plain_early_stopping() -> None:
    study = optuna.create_study(direction="maximize")
    monitor = StudyMonitor(metric="r2", budget=500, stopper=EarlyStopping(patience=3, warmup=0))
    monitor.start(study)
    study.optimize(_constant("rf", ("rf",)), n_trials=500, callbacks=[monitor])
    assert monitor.stop_reason == "early_stopping" and len(study.trials) == 4


def test_the_search_stops_at_its_deadline() -> None:
    study = optuna.create_study(direction="maximize")
    clock = B.SearchClock(deadline=time.time() - 1.0, budget_s=60.0)
    monitor = StudyMonitor(metric="r2", clock=clock)
    monitor.start(study)
    study.optimize(_constant("rf", ("rf",)), n_trials=50, callbacks=[monitor])
    assert monitor.stop_reason == "deadline" and len(study.trials) == 1


def test_restart_counts_a_new_plateau_from_the_best() -> None:
    rule = EarlyStopping(patience=2, warmup=0)
    for value in (1.0, 1.0, 1.0):
        rule.observe(value, maximize=True)
    assert rule.stopped
    rule.restart()
    assert not rule.stopped and rule.stale == 0 and rule.anchor == 1.0
    rule.observe(1.0, maximize=True)
    assert not rule.stopped


# -- in a pipeline ----------------------------------------------------------------------------------
def _prepared(tmp_path: Path, n: int = 200) -> PipelineRun:
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    frame = pd.DataFrame({"x": x, "z": rng.normal(size=n), "y": 2 * x + rng.normal(0, 0.1, n)})
    return loaded_run(tmp_path, frame, seed=42)


def test_a_trial_that_would_pass_the_deadline_is_pruned_after_the_first(tmp_path: Path) -> None:
    run = _prepared(tmp_path)
    clock = B.SearchClock(deadline=time.time() + 3600, budget_s=3600)
    objective = CVObjective(run, model="linear", metric="r2", clock=clock)
    study = optuna.create_study(direction="maximize")
    study.optimize(objective, n_trials=1)  # the first trial always runs: the search needs a model
    first = study.trials[0]
    assert first.state.name == "COMPLETE"
    assert len(first.user_attrs[vocab.ATTR_FOLD_VALUES]) == len(objective.splits)
    assert np.mean(first.user_attrs[vocab.ATTR_FOLD_VALUES]) == pytest.approx(first.value)
    assert first.user_attrs[vocab.ATTR_FIT_S] >= 0
    clock.deadline = time.time() - 1.0  # now no fold fits
    study.optimize(objective, n_trials=1)
    assert study.trials[1].state.name == "PRUNED"


def test_permutation_importance_gives_way_to_native_importance_when_it_does_not_fit(
    tmp_path: Path,
) -> None:
    run = _prepared(tmp_path)
    steps.train_model(run, model="rf")
    run.model.predict_s = 10.0  # a slow model: permutation would take minutes
    run.deadline = time.time() + 5.0
    steps.feature_importance(run)
    assert any("impurity" in n for n in run.notes)
    assert run.result.importance[0]["feature"] == "x"
    run.deadline = None  # no budget: permutation, as before
    run.notes.clear()
    steps.feature_importance(run)
    assert not any("impurity" in n for n in run.notes)


def test_an_ensemble_short_of_time_uses_its_tree_members_own_importance(
    tmp_path: Path,
) -> None:
    from mlpilot.platform.ml.ensemble import WeightedEnsemble

    run = _prepared(tmp_path)
    X, y = run.data.train()
    members = [run.build_pipeline(f).fit(X, y) for f in ("linear", "rf", "et")]
    model = WeightedEnsemble(members, [0.5, 0.3, 0.2])
    model.members_ = members
    steps.set_model(run, model, "ensemble", {})
    run.model.predict_s = 10.0  # permutation would take minutes
    run.deadline = time.time() + 5.0
    steps.feature_importance(run)
    assert any("its tree members'" in n for n in run.notes)
    ranking = {i["feature"]: i["importance"] for i in run.result.importance}
    assert next(iter(ranking)) == "x" and sum(ranking.values()) == pytest.approx(1.0, abs=1e-5)
    run.model.pipeline = WeightedEnsemble(members[:1], [1.0])  # linear only: no own importance
    run.model.pipeline.members_ = members[:1]
    run.notes.clear()
    steps.feature_importance(run)
    assert any("one repeat" in n for n in run.notes)


def test_cross_validation_gives_way_to_the_search_folds_when_it_does_not_fit(
    tmp_path: Path,
) -> None:
    run = _prepared(tmp_path)
    steps.train_model(run, model="rf")
    run.model.fit_s, run.deadline = 30.0, time.time() + 5.0
    run.result.study = {"best_fold_values": [0.9, 0.8, 0.85]}
    steps.evaluate_model(run, cv_folds=5)
    assert any("out-of-fold score from the search" in n for n in run.notes)
    assert "cv_r2" not in run.metrics  # the search's own cv_ metric is logged by optimize_model
    run.deadline = None
    steps.evaluate_model(run, cv_folds=5)
    assert "cv_r2" in run.metrics


def test_the_run_start_reaches_the_pipeline(tmp_path: Path, monkeypatch) -> None:
    from mlpilot.platform.ml.entry import open_pipeline

    monkeypatch.setenv(protocol.ENV_RUN_STARTED_AT, "1234.5")
    monkeypatch.setenv(protocol.ENV_NO_TRACK, "1")
    run = open_pipeline([], plan={}, seed=1, default_data=None)
    assert run.started_at == 1234.5 and run.deadline is None
    monkeypatch.delenv(protocol.ENV_RUN_STARTED_AT)
    before = time.time()
    assert open_pipeline([], plan={}, seed=1, default_data=None).started_at >= before


def test_lightgbm_trials_with_pruning_take_text_labels(tmp_path: Path) -> None:
    """LightGBM 4.7 passes eval_y through unencoded: "No"/"Yes" once failed every trial."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=240)
    label = np.where(x + rng.normal(0, 0.5, 240) > 0, "Yes", "No")
    path = tmp_path / "data.csv"
    pd.DataFrame({"x": x, "z": rng.normal(size=240), "default": label}).to_csv(path, index=False)
    run = PipelineRun(
        plan={}, seed=1, data_path=str(path), run_dir=tmp_path, logger=NullRunLogger()
    )
    steps.load_data(run, path=str(path), target="default")
    objective = CVObjective(run, model="lgbm", metric="roc_auc", pruning=True)
    # seeded: an unseeded draw of min_child_samples near 100 on 160 rows grows no tree
    sampler = optuna.samplers.RandomSampler(seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=2)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    assert study.best_value > 0.8


def test_a_failing_family_is_skipped_under_a_time_budget(tmp_path: Path, monkeypatch) -> None:
    from mlpilot.platform.ml.hpo import objective as O

    run = _prepared(tmp_path)
    clock = B.SearchClock(deadline=time.time() + 3600, budget_s=3600)
    objective = CVObjective(run, model="linear", metric="r2", clock=clock)

    def broken(*args: object, **kwargs: object) -> float:
        raise ValueError("this library cannot take the data")

    monkeypatch.setattr(objective, "_score", broken)
    study = optuna.create_study(direction="maximize")
    study.optimize(objective, n_trials=4, catch=(ValueError,))
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL"] * O.FAMILY_FAILURES + ["PRUNED"] * (4 - O.FAMILY_FAILURES)
    objective.clock = None  # a trial-count search keeps failing loudly
    study.optimize(objective, n_trials=1, catch=(ValueError,))
    assert study.trials[-1].state.name == "FAIL"
