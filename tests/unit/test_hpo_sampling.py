"""Cheap first in rows: a large time-budgeted search fits its trials on a sample of each
training fold, records the rows, grows the sample with the evidence, keeps out-of-fold
output for every row, and scales measured times to the rows a later fit will use."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from helpers import loaded_run

from mlpilot.platform.ml import steps
from mlpilot.platform.ml.hpo import budget as B
from mlpilot.platform.ml.hpo import sampling as S
from mlpilot.platform.ml.hpo.monitor import StudyMonitor
from mlpilot.platform.ml.hpo.objective import CVObjective, Fold
from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM
from mlpilot.tracking import vocab

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _state(rows: int = 10_000, full: int = 25_061) -> S.SampleState:
    return S.SampleState(rows=rows, full=full, train=37_591, folds=3, first=10_000)


def _frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.normal(size=rows)
    return pd.DataFrame({"x": x, "z": rng.normal(size=rows), "y": 2 * x + rng.normal(0, 0.1, rows)})


# -- when ---------------------------------------------------------------------------------------
def test_only_a_large_fresh_time_budgeted_study_starts_on_a_sample() -> None:
    study = optuna.create_study()
    state = S.start(study, train=150_000, full=100_000, folds=3, enabled=True)
    assert state is not None and state.rows == S.FIRST_SAMPLE_ROWS and state.sampled
    assert S.SampleState.of(study.user_attrs) == state  # study state: workers read it
    for train in (10_000, S.SAMPLE_MIN_ROWS):  # sets of ~10k rows keep every row
        small = optuna.create_study()
        assert S.start(small, train=train, full=train * 2 // 3, folds=3, enabled=True) is None
        assert vocab.ATTR_SAMPLE not in small.user_attrs
    counted = optuna.create_study()  # a trial-count budget (or none): every row
    assert S.start(counted, train=150_000, full=100_000, folds=3, enabled=False) is None
    assert vocab.ATTR_SAMPLE not in counted.user_attrs
    resumed = optuna.create_study()
    resumed.optimize(lambda t: 1.0, n_trials=1)  # began on every row before
    assert S.start(resumed, train=150_000, full=100_000, folds=3, enabled=True) is None
    # a sampled study resumed with a trial count goes back to every row
    assert S.start(study, train=150_000, full=100_000, folds=3, enabled=False) is None
    assert S.SampleState.of(study.user_attrs).rows == 100_000


def test_the_sample_grows_by_four_up_to_every_row() -> None:
    assert _state().sizes() == [10_000, 25_061]
    assert _state(full=200_000).sizes() == [10_000, 40_000, 160_000, 200_000]
    assert _state(rows=40_000, full=200_000).larger() == [160_000, 200_000]


# -- the folds --------------------------------------------------------------------------------------
def _folds(classes: bool) -> list[Fold]:
    rng = np.random.default_rng(1)
    folds = []
    for _ in range(3):
        y = pd.Series(rng.integers(0, 2, 300) if classes else rng.normal(size=300))
        if classes:
            y.iloc[137] = 2  # one row of a rare class
        folds.append(Fold(rng.normal(size=(300, 2)), y, rng.normal(size=(100, 2)), y[:100]))
    return folds


def test_trials_fit_on_a_nested_sample_and_validate_on_the_whole_fold() -> None:
    folds = _folds(classes=False)
    small = S.sample_folds(folds, 50, 7, classes=False)
    assert [len(f.y_train) for f in small.folds] == [50, 50, 50]
    assert small.rows == 50 and small.share == pytest.approx(50 / 300)
    assert all(s.X_valid is f.X_valid for s, f in zip(small.folds, folds, strict=True))
    assert small.folds[0].X_train.shape == (50, 2)
    larger = S.sample_folds(folds, 200, 7, classes=False)  # the small sample grows, not redrawn
    assert set(small.folds[0].y_train.index) <= set(larger.folds[0].y_train.index)
    assert set(small.folds[0].y_train.index) != set(small.folds[1].y_train.index)
    whole = S.sample_folds(folds, None, 7, classes=False)
    assert whole.folds is folds and whole.share == 1.0 and whole.rows == 300
    labelled = S.sample_folds(_folds(classes=True), 20, 7, classes=True)
    assert all(2 in set(f.y_train) for f in labelled.folds)  # every class kept


def test_a_trial_records_its_rows_and_its_out_of_fold_output_covers_every_row(
    tmp_path: Path,
) -> None:
    run = loaded_run(tmp_path, _frame(400), seed=42)
    clock = B.SearchClock(deadline=time.time() + 3600, budget_s=3600)
    objective = CVObjective(run, model="linear", metric="r2", clock=clock, keep_oof=4)
    full = max(len(train) for train, _ in objective.splits)
    study = optuna.create_study(direction="maximize")
    S.SampleState(rows=60, full=full, train=len(objective.y), folds=3, first=60).save(study)
    study.enqueue_trial({"alpha": 1.0})  # a sampled alpha near 1000 fits 60 rows to nothing
    study.optimize(objective, n_trials=1)
    trial = study.trials[0]
    assert trial.user_attrs[vocab.ATTR_TRAIN_ROWS] == 60
    assert trial.value > 0.9  # scored on the whole validation folds, in the metric's scale
    oof = objective.oof[0]
    assert oof.shape == (len(objective.y),) and np.count_nonzero(oof) == len(objective.y)
    # the family's time is kept as a fit on every row: 60 of ~full rows measured less
    measured = trial.user_attrs[vocab.ATTR_FIT_S]
    share = 60 / np.mean([len(train) for train, _ in objective.splits])
    # the attribute is rounded to 0.1 ms: a fit of ~0.4 ms may read 12 % off
    assert objective.fit_times["linear"][0] == pytest.approx(
        measured / share, rel=0.05, abs=0.5e-4 / share
    )
    S.grow(study, S.SampleState.of(study.user_attrs), full, 1, S.WHY_PLATEAU)
    study.optimize(objective, n_trials=1)
    every = int(np.mean([len(train) for train, _ in objective.splits]))
    assert study.trials[1].user_attrs[vocab.ATTR_TRAIN_ROWS] == every > 60  # every fold row


# -- growing ----------------------------------------------------------------------------------------
def _trial(family: str, value: float, fit_s: float, rows: int = 10_000) -> optuna.trial.FrozenTrial:
    dist = optuna.distributions
    return optuna.trial.create_trial(
        params={FAMILY_PARAM: family, f"{family}.n_estimators": 100},
        distributions={
            FAMILY_PARAM: dist.CategoricalDistribution(["lgbm", "rf", "linear"]),
            f"{family}.n_estimators": dist.IntDistribution(10, 1000),
        },
        value=value,
        user_attrs={vocab.ATTR_FIT_S: fit_s, vocab.ATTR_TRAIN_ROWS: rows},
    )


def _sampled_study(state: S.SampleState) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for trial in (_trial("lgbm", 0.30, 1.0), _trial("rf", 0.25, 2.0), _trial("linear", 0.1, 0.1)):
        study.add_trial(trial)
    state.save(study)
    return study


def _waiting(study: optuna.Study) -> list[dict]:
    return [
        dict(t.system_attrs["fixed_params"])
        for t in study.get_trials()
        if t.state.name == "WAITING"
    ]


def test_a_plateau_on_a_sample_grows_it_first_and_requeues_the_best_families() -> None:
    study = _sampled_study(_state())
    moves = B.PlateauMoves("auto", ("lgbm", "rf", "linear"), "regression")
    assert moves.next(study) == "a larger sample: every row of each training fold"
    state = S.SampleState.of(study.user_attrs)
    assert state.rows == 25_061 and state.grown == [[25_061, 3, S.WHY_PLATEAU]]
    assert [p[FAMILY_PARAM] for p in _waiting(study)] == ["lgbm", "rf"]  # the two best
    assert _waiting(study)[0]["lgbm.n_estimators"] == 100
    assert not moves.next(study).startswith("a larger sample")  # on every row: the other moves
    assert "grew to all 25,061 after 3 trials (a plateau)" in state.describe()


def test_the_time_rule_grows_while_full_size_trials_of_the_best_still_fit() -> None:
    state = _state()
    best = [_trial("lgbm", 0.3, 1.0), _trial("rf", 0.25, 2.0)]
    one = S.TRIAL_MARGIN * 3 * 1.0 * 25_061 / 10_000  # lgbm's best on every row: ~9.4 s
    room = one * 3  # rf's best costs twice lgbm's
    assert S.time_target(state, best, S.GROW_ROOM * room + 1) is None  # time for small trials
    assert S.time_target(state, best, S.GROW_ROOM * room - 1) == 25_061
    assert S.time_target(state, best, one + 0.1) == 25_061
    assert S.time_target(state, best, one - 0.1) is None  # no full trial fits: stay small
    # on a larger set: the largest size whose best trial still fits
    big = _state(full=200_000)
    assert S.time_target(big, best, 30.0) == 40_000


def test_the_monitor_grows_the_sample_when_the_time_left_is_short() -> None:
    study = _sampled_study(_state())
    clock = B.SearchClock(deadline=time.time() + 3600, budget_s=60.0)
    moves = B.PlateauMoves("auto", ("lgbm", "rf", "linear"), "regression")
    monitor = StudyMonitor(metric="r2", clock=clock, moves=moves)
    monitor.check(study, study.get_trials())
    assert S.SampleState.of(study.user_attrs).sampled  # an hour left: still small
    clock.deadline = time.time() + clock.reserve_s + 30.0  # 30 s: room for two full trials
    monitor.check(study, study.get_trials())
    state = S.SampleState.of(study.user_attrs)
    assert not state.sampled and state.grown[0][2] == S.WHY_TIME
    assert len(_waiting(study)) == 2
    assert "time left for full-size trials" in state.describe()


# -- time estimates -----------------------------------------------------------------------------------
def test_time_estimates_scale_with_rows(tmp_path: Path) -> None:
    study = _sampled_study(_state())
    assert B.best_fit_s(study) == pytest.approx(1.0 * 25_061 / 10_000)  # for the refit
    plain = optuna.create_study(direction="maximize")
    plain.add_trial(_trial("lgbm", 0.3, 1.0, rows=25_061))
    assert B.best_fit_s(plain) == pytest.approx(1.0)
    clock = B.SearchClock(deadline=time.time() + 3600, budget_s=60.0)
    clock.update_reserve(B.best_fit_s(study))
    unscaled = B.SearchClock(deadline=clock.deadline, budget_s=60.0)
    unscaled.update_reserve(1.0)
    assert clock.reserve_s > unscaled.reserve_s
    # time pruning: a family's earlier fits (kept at every row) scaled to this trial's sample
    run = loaded_run(tmp_path, _frame(200), seed=1)
    objective = CVObjective(run, model="linear", metric="r2", clock=clock)
    objective.fit_times = {"linear": [10.0]}
    clock.deadline = time.time() + clock.reserve_s + 5.0
    objective._check_time("linear", [], share=0.4)  # about 4 s: fits
    with pytest.raises(optuna.TrialPruned):
        objective._check_time("linear", [], share=1.0)


# -- in a run -------------------------------------------------------------------------------------------
def test_a_timed_search_on_many_rows_begins_on_a_sample_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(S, "SAMPLE_MIN_ROWS", 200)
    monkeypatch.setattr(S, "FIRST_SAMPLE_ROWS", 40)
    run = loaded_run(tmp_path, _frame(400), seed=3)
    # the budget counts from the request's start: a cold worker's first imports (every
    # family's library) took 2.8 s of a 9 s budget once, leaving no time to search
    run.started_at = time.time()
    steps.optimize_model(run, model="linear", trials=None, timeout_s=14, early_stopping=True)
    trials = optuna.load_study(study_name=run.result.study["name"], storage=_storage()).get_trials()
    rows = [t.user_attrs.get(vocab.ATTR_TRAIN_ROWS) for t in trials if t.state.name == "COMPLETE"]
    assert rows[0] == 40
    assert any(n.startswith("cheap first: trials began on 40 of the") for n in run.notes)
    (tmp_path / "counted").mkdir()
    counted = loaded_run(tmp_path / "counted", _frame(400), seed=3)
    steps.optimize_model(counted, model="linear", trials=2, timeout_s=None, early_stopping=False)
    assert not any(n.startswith("cheap first") for n in counted.notes)


def _storage() -> object:
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.ml.hpo.storage import open_storage

    return open_storage(get_settings().optuna_storage)
