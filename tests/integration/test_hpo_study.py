"""A tracked study end to end: nested trial runs, the study in storage, both stores, early stopping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import read_jsonl, run_cli
from test_hpo_support import load_study, prepared_run

pytestmark = pytest.mark.integration


def _plan(data: Path, trials: int, early_stopping: bool) -> dict:
    return {
        "version": 1,
        "template": "hpo",
        "engine": "cpu",
        "adapter": None,
        "steps": [
            {"tool": "load_data", "args": {"path": str(data), "target": "sales", "task": "auto"}},
            {"tool": "clean_data", "args": {"strategy": "auto"}},
            {"tool": "engineer_features", "args": {"datetime": True, "target_encoding": True}},
            {
                "tool": "optimize_model",
                "args": {
                    "model": "linear",
                    "trials": trials,
                    "metric": "rmse",
                    "early_stopping": early_stopping,
                },
            },
        ],
        "rationale": "HPO test",
    }


@pytest.fixture(scope="module")
def thirty_trials(tmp_path_factory: pytest.TempPathFactory, sales_csv: Path) -> dict:
    base = tmp_path_factory.mktemp("hpo-study")
    plan = base / "plan.json"
    plan.write_text(json.dumps(_plan(sales_csv, 30, early_stopping=False)))
    env = {"MLPILOT_HOME": str(base / "home"), "MLPILOT_LLM": "offline"}
    for name in ("MLFLOW_TRACKING_URI", "MLPILOT_MONGO_URI", "MLPILOT_OPTUNA_STORAGE"):
        env[name] = ""
    done = run_cli(
        "run",
        "--plan",
        str(plan),
        "--data",
        str(sales_csv),
        "--json",
        env=env,
        cwd=base,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {"outcome": json.loads(done.stdout), "home": base / "home"}


def test_trials_are_nested_runs_and_the_parent_has_the_best(thirty_trials: dict) -> None:
    from mlflow import MlflowClient

    outcome, home = thirty_trials["outcome"], thirty_trials["home"]
    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    parent = client.get_run(outcome["run_id"])
    children = client.search_runs(
        [parent.info.experiment_id],
        f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        max_results=1000,
    )
    trials = [c for c in children if c.data.tags.get("mlpilot.kind") == "trial"]
    assert len(trials) == 30
    numbers = sorted(int(c.data.tags["mlpilot.trial_number"]) for c in trials)
    assert numbers == list(range(30))
    states = {c.data.tags["mlpilot.trial_state"] for c in trials}
    assert states <= {"COMPLETE", "PRUNED", "FAIL"} and "COMPLETE" in states
    complete = [c for c in trials if c.data.tags["mlpilot.trial_state"] == "COMPLETE"]
    assert all("alpha" in c.data.params and c.data.metrics["duration_s"] > 0 for c in trials)
    assert all(c.info.status == "FINISHED" and c.info.end_time for c in complete)
    best = min(c.data.metrics["value"] for c in complete)
    metrics = parent.data.metrics
    assert metrics["hpo_trials"] == 30
    assert metrics["hpo_best_value"] == pytest.approx(best)
    assert parent.data.params["hpo.best.alpha"]
    assert parent.data.tags["mlpilot.optuna.study"] == outcome["study"]["name"]
    storage = str(home / "optuna" / "journal.log")
    assert parent.data.tags["mlpilot.optuna.storage"] == storage
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "plots/optuna")}
    assert {"plots/optuna/study.html", "plots/optuna/optimization_history.png"} <= artifacts


def test_the_study_is_in_the_default_journal_and_in_mongodb(
    thirty_trials: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    outcome, home = thirty_trials["outcome"], thirty_trials["home"]
    monkeypatch.setenv("MLPILOT_HOME", str(home))
    monkeypatch.delenv("MLPILOT_OPTUNA_STORAGE", raising=False)
    study = load_study(outcome["study"]["name"])
    assert len(study.trials) == 30 and study.best_value == pytest.approx(
        outcome["metrics"]["hpo_best_value"]
    )
    spec = study.user_attrs["mlpilot"]
    assert spec["target"] == "sales" and spec["model"] == "linear" and spec["n_trials"] == 30
    # the pipeline never learns its MLflow run (the parent logs for it): nor does its spec
    assert spec["mlflow_run_id"] is None
    assert [s["tool"] for s in spec["steps"]] == ["load_data", "clean_data", "engineer_features"]

    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(outcome["run_id"])
    assert doc["study"]["name"] == study.study_name
    assert doc["study"]["storage"] == str(home / "optuna" / "journal.log")
    assert doc["study"]["n_trials"] == 30
    assert doc["study"]["trials_by_family"] == {"linear": 30}
    assert doc["study"]["best_value"] == pytest.approx(study.best_value)
    # every 10th trial is a run event the dashboard can show: trial n of N, best so far
    progress = [e for e in doc["events"] if (e.get("detail") or {}).get("type") == "trial"]
    assert [e["detail"]["n"] for e in progress] == [10, 20, 30]
    assert all(e["detail"]["total"] == 30 for e in progress)
    assert progress[-1]["message"].startswith("trial 30 of 30")
    assert progress[-1]["detail"]["best"] == pytest.approx(study.best_value)


def test_every_trial_is_a_progress_event(thirty_trials: dict) -> None:
    outcome, home = thirty_trials["outcome"], thirty_trials["home"]
    events = read_jsonl(home / "runs" / outcome["run_id"] / "events.jsonl")
    trials = [e for e in events if e["type"] == "trial"]
    assert [e["n"] for e in trials] == list(range(1, 31))
    bests = [e["best"] for e in trials if e["best"] is not None]
    assert bests == sorted(bests, reverse=True)  # rmse: the best so far only goes down


def test_early_stopping_ends_a_plateaued_study(home: Path, sales_csv: Path) -> None:
    from mlpilot.platform.ml.hpo.optimize import optimize

    run = prepared_run(sales_csv, home / "run")
    # ridge's alpha barely moves the rmse over most of its range: a plateau
    optimize(
        run,
        model="linear",
        trials=60,
        metric="rmse",
        timeout_s=None,
        early_stopping=True,
        warm_start=False,
        plots=False,
    )
    study = run.result.study
    assert study["early_stopped"] and study["stop_reason"] == "early_stopping"
    assert 20 <= study["n_trials"] < 60  # 10 start-up trials, then 10 without progress
    assert (
        load_study(study["name"]).user_attrs["mlpilot.early_stopped"]["after_trials"]
        == (study["n_trials"])
    )


def test_a_study_resumes_where_it_stopped(home: Path, sales_csv: Path) -> None:
    from mlpilot.platform.ml.hpo.optimize import optimize

    args = {"model": "linear", "metric": "rmse", "timeout_s": None, "warm_start": False}
    first = prepared_run(sales_csv, home / "first")
    optimize(first, trials=4, early_stopping=False, study_name="resumable", plots=False, **args)
    again = prepared_run(sales_csv, home / "again")
    optimize(again, trials=9, early_stopping=False, study_name="resumable", plots=False, **args)
    study = load_study("resumable")
    assert len(study.trials) == 9  # the budget is the study's: 4 kept + 5 new
    assert again.result.study["n_trials"] == 9
