"""HPO rules without a pipeline: early stopping, budgets, search spaces, owners and the reaper."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from mlpilot.platform.ml import families
from mlpilot.platform.ml.hpo import boosting
from mlpilot.platform.ml.hpo.early_stopping import EarlyStopping, stopping_point
from mlpilot.platform.ml.hpo.monitor import StudyMonitor
from mlpilot.platform.ml.hpo.session import TRIAL_ERRORS, remaining
from mlpilot.platform.ml.hpo.spaces import auto_families, model_params, sample
from mlpilot.platform.ml.hpo.spec import StudySpec
from mlpilot.platform.ml.hpo.storage import (
    FAIL_REASON_ATTR,
    OWNER_ATTR,
    open_storage,
    owner_record,
    process_alive,
    reap_dead_trials,
    redact,
)
from mlpilot.platform.ml.hpo.trial_log import GIVE_UP_AFTER, TrialLogger
from mlpilot.platform.ml.modeling import make_estimator

optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- early stopping -------------------------------------------------------------------------------
def test_a_plateau_stops_after_patience_trials() -> None:
    values = [10.0, 9.0, 8.0] + [7.99] * 30  # 7.99 is 0.1 % better than 8: not enough
    assert stopping_point(values, maximize=False, warmup=0) == 3 + 10
    # the sampler's random start-up trials are never a verdict
    assert stopping_point(values, maximize=False) == 10 + 10


def test_a_steady_climb_of_small_steps_is_not_a_plateau() -> None:
    values = [100 * 0.995**i for i in range(60)]  # 0.5 % better every trial: 1 % every 2-3
    assert stopping_point(values, maximize=False, warmup=0) is None
    assert stopping_point([1.0 + 0.02 * i for i in range(50)], maximize=True) is None


def test_the_threshold_is_relative_and_configurable() -> None:
    values = [1.005**i for i in range(60)]  # +0.5 % a trial: about 5 % in 10 trials
    assert stopping_point(values, maximize=True) is None
    assert stopping_point(values, maximize=True, min_delta=0.1, warmup=0) == 11
    assert stopping_point([5.0] * 10, maximize=True, patience=3, warmup=0) == 4
    assert stopping_point([-0.5, -0.499, -0.498] * 10, maximize=True, warmup=0) == 11


def test_pruned_trials_count_as_no_gain() -> None:
    values: list[float | None] = [3.0, None, None, None]
    assert stopping_point(values, maximize=False, patience=3, warmup=0) == 4


def test_trials_from_before_only_set_the_best_to_beat() -> None:
    study = optuna.create_study(direction="minimize")
    for value in (5.0, 4.0, 3.0):
        study.add_trial(optuna.trial.create_trial(value=value, params={}, distributions={}))
    rule = EarlyStopping(patience=2, warmup=0)
    rule.prime(study.trials, maximize=False)
    assert rule.best == 3.0 and rule.stale == 0
    study.add_trial(optuna.trial.create_trial(value=3.0, params={}, distributions={}))
    assert not rule.update(study.trials, maximize=False)
    study.add_trial(optuna.trial.create_trial(value=2.999, params={}, distributions={}))
    assert rule.update(study.trials, maximize=False)


def test_a_monitored_study_stops_early_on_a_constant_objective() -> None:
    study = optuna.create_study(direction="maximize")
    monitor = StudyMonitor(metric="r2", budget=100, stopper=EarlyStopping())
    monitor.start(study)
    study.optimize(
        lambda t: t.suggest_float("x", 0, 1) * 0 + 0.5, n_trials=100, callbacks=[monitor]
    )
    assert len(study.trials) == 20 and monitor.stop_reason == "early_stopping"
    assert study.user_attrs["mlpilot.early_stopped"]["after_trials"] == 20


# -- budget and progress ----------------------------------------------------------------------
def test_the_budget_counts_every_workers_trials() -> None:
    study = optuna.create_study()
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=4)
    study.ask()  # another worker's trial, still running
    assert remaining(study, 10) == 5 and remaining(study, 3) == 0 and remaining(study, None) is None
    events: list[dict] = []
    monitor = StudyMonitor(metric="rmse", budget=7, emit=events.append)
    monitor.start(study)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=50, callbacks=[monitor])
    assert len(study.trials) == 7 and monitor.stop_reason == "budget"
    assert [e["n"] for e in events] == [5, 6]  # the running trial counts in the budget
    assert events[-1]["total"] == 7 and events[-1]["message"].startswith("trial 6 of 7: rmse")
    best = min(t.value for t in study.trials if t.value is not None)
    assert events[-1]["best"] == pytest.approx(best)


def test_a_study_whose_trials_keep_failing_stops() -> None:
    def broken(trial: optuna.Trial) -> float:
        trial.suggest_float("x", 0, 1)
        raise RuntimeError("a bug, not a bad configuration")

    study = optuna.create_study()
    monitor = StudyMonitor(metric="rmse", budget=100)
    monitor.start(study)
    study.optimize(broken, n_trials=100, callbacks=[monitor], catch=TRIAL_ERRORS)
    assert len(study.trials) == 5 and monitor.stop_reason == "failures"


class _DeadTracking:
    """An MLflow client whose server is gone."""

    def __init__(self) -> None:
        self.calls = 0

    def create_run(self, *args: object, **kwargs: object) -> None:
        self.calls += 1
        raise ConnectionError("tracking server unreachable")


def test_a_dead_tracking_server_costs_trial_runs_not_the_study() -> None:
    client = _DeadTracking()
    parent = type("Parent", (), {"client": client, "run_id": "p", "experiment_id": "0"})()
    logger = TrialLogger(parent, "s", batch=2, interval_s=0.05)
    study = optuna.create_study()
    monitor = StudyMonitor(metric="rmse", logger=logger)
    monitor.start(study)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=12, callbacks=[monitor])
    logger.close()
    assert len(study.trials) == 12 and logger.logged == 0 and logger.failed == 12
    assert client.calls == GIVE_UP_AFTER  # then it stops trying


def test_an_untracked_run_logs_no_trials() -> None:
    from mlpilot.tracking.run_logger import NullRunLogger

    assert TrialLogger.for_parent(NullRunLogger(), "s") is None


# -- search spaces ----------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("family", families.names())
def test_every_family_samples_parameters_its_estimator_accepts(family: str, task: str) -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
    y = (X["a"] > 0).astype(int) if task == "classification" else X["a"] * 2.0
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(2):
        trial = study.ask()
        chosen, params = sample(trial, family, task)
        assert chosen == family and params
        estimator = make_estimator(family, task, params=params, seed=0)
        estimator.fit(X, y)
        study.tell(trial, 0.0)


def test_auto_gives_each_family_its_own_parameter_names() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(40):  # rf and xgb both tune max_depth, with different distributions
        trial = study.ask()
        family, params = sample(trial, "auto", "regression")
        seen.add(family)
        assert all(k.startswith(f"{family}.") for k in trial.params if k != "family")
        assert model_params(trial.params) == params
        study.tell(trial, 0.0)
    assert seen == set(auto_families())


def test_booster_metrics_point_the_way_the_study_does() -> None:
    higher_is_better = {"auc", "aucpr", "average_precision", "AUC", "PRAUC"}
    for metric in ("rmse", "mae", "log_loss", "roc_auc", "pr_auc", "r2", "accuracy"):
        for family in families.names():
            for classes in (2, 3):
                name = boosting.booster_metric(family, metric, classes)
                if name is None:
                    continue
                maximize = metric in ("roc_auc", "pr_auc")
                assert (name in higher_is_better) == maximize, (family, metric, name)
    assert boosting.booster_metric("lgbm", "r2", 0) is None
    assert boosting.booster_metric("rf", "rmse", 0) is None


# -- the study's recipe -----------------------------------------------------------------------
def test_a_spec_survives_the_storage(tmp_path: Path) -> None:
    spec = StudySpec(
        data_path="/data/sales.csv",
        target="sales",
        task="regression",
        model="auto",
        metric="rmse",
        seed=7,
        steps=[{"tool": "load_data", "args": {"target": "sales"}}],
        n_trials=40,
        mlflow_run_id="abc",
    )
    storage = open_storage(str(tmp_path / "journal.log"))
    spec.save(optuna.create_study(study_name="s", storage=storage))
    again = StudySpec.of_study(optuna.load_study(study_name="s", storage=storage))
    assert again == spec


# -- storage, owners and the reaper ------------------------------------------------------------
def test_passwords_never_leave_in_a_storage_url() -> None:
    assert redact("postgresql://ml:s3cret@db:5432/optuna") == "postgresql://ml:***@db:5432/optuna"
    assert redact("sqlite:////tmp/optuna.db") == "sqlite:////tmp/optuna.db"


def test_process_liveness_sees_exits_zombies_and_reused_pids() -> None:
    me = owner_record()
    assert process_alive(me["pid"], me["start"])
    if me["start"] is not None:  # Linux: a reused pid has another start time
        assert not process_alive(me["pid"], me["start"] + 1)
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    assert not process_alive(finished.pid)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(200):  # exited but not waited for: a zombie still has a pid
            if not process_alive(zombie.pid):
                break
            import time

            time.sleep(0.02)
        assert not process_alive(zombie.pid)
    finally:
        zombie.wait()


def test_the_reaper_fails_only_trials_of_dead_processes_on_this_host(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "journal.log"))
    study = optuna.create_study(study_name="reap", storage=storage)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    owners = {
        "dead": {"host": host, "pid": dead.pid, "start": None},
        "alive": {"host": host, "pid": os.getppid(), "start": None},
        "elsewhere": {"host": "another-machine", "pid": dead.pid, "start": None},
        "mine": owner_record(),
    }
    trials = {}
    for name, owner in owners.items():
        trial = study.ask()
        trial.set_user_attr(OWNER_ATTR, owner)
        trials[name] = trial.number
    study.ask()  # no owner recorded: left alone
    assert reap_dead_trials(study) == [trials["dead"]]
    states = {t.number: t.state.name for t in study.trials}
    assert states[trials["dead"]] == "FAIL"
    assert [states[trials[n]] for n in ("alive", "elsewhere", "mine")] == ["RUNNING"] * 3
    reason = study.trials[trials["dead"]].user_attrs[FAIL_REASON_ATTR]
    assert f"pid {dead.pid}" in reason
    assert reap_dead_trials(study) == []  # idempotent
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)  # still usable
    assert sum(t.state.name == "COMPLETE" for t in study.trials) == 2
