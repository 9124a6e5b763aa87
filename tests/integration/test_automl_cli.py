"""The full AutoML search under a time budget, through the command line (real MLflow)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import run_cli

from mlpilot.tracking import vocab

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMPT = "build the best model you can for target within 20 seconds"


def _env(base: Path) -> dict[str, str]:
    env = {"MLPILOT_HOME": str(base / "home"), "MLPILOT_LLM": "offline"}
    for name in ("MLFLOW_TRACKING_URI", "MLPILOT_MONGO_URI", "NVIDIA_API_KEY", "OPENAI_API_KEY"):
        env[name] = ""
    return env


@pytest.fixture(scope="module")
def budgeted_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from sklearn.datasets import load_breast_cancer

    base = tmp_path_factory.mktemp("automl")
    frame = load_breast_cancer(as_frame=True).frame
    data = base / "cancer.csv"
    frame.to_csv(data, index=False)
    rows = base / "rows.csv"
    frame.drop(columns=["target"]).head(40).to_csv(rows, index=False)
    env = _env(base)
    done = run_cli("run", PROMPT, "--data", str(data), "--json", env=env, cwd=base)
    assert done.returncode == 0, done.stderr[-2000:]
    return {"outcome": json.loads(done.stdout), "env": env, "base": base, "rows": rows}


def test_the_prompt_runs_the_full_search_within_its_budget(budgeted_run: dict) -> None:
    outcome = budgeted_run["outcome"]
    assert outcome["status"] == "SUCCEEDED"
    assert outcome["plan"]["template"] == "full-automl"
    [tune] = [s for s in outcome["plan"]["steps"] if s["tool"] == "optimize_model"]
    assert tune["args"]["timeout_s"] == 20 and tune["args"]["model"] == "auto"
    study = outcome["study"]
    assert study["stop_reason"] in ("deadline", "exhausted")
    # the budget is used, or the run says that nothing was left to try
    nothing_left = any("nothing was left to try" in n for n in outcome["notes"])
    assert study["unused_share"] <= 0.2 or nothing_left
    assert any("small, fast configuration per family" in n for n in outcome["notes"])
    # each finished trial is counted under its family; the cheapest ran first, and a family
    # the budget ended before (the newest, catboost, queues last) is named, never silent
    by_family = study["trials_by_family"]
    assert sum(by_family.values()) == study["n_trials"]
    assert "lgbm" in by_family, by_family
    prefix = "the time budget ended before "
    notes = [n for n in outcome["notes"] if n.startswith(prefix)]
    untried = set(notes[0][len(prefix) :].split(" had a trial")[0].split(", ")) if notes else set()
    assert not untried & set(by_family), (untried, by_family)
    assert "catboost" in set(by_family) | untried, (by_family, untried)


def test_cv_metrics_are_the_chosen_models_own_folds(budgeted_run: dict) -> None:
    from mlflow import MlflowClient

    outcome = budgeted_run["outcome"]
    metrics = outcome["metrics"]
    assert {"cv_roc_auc", "cv_roc_auc_std", "test_roc_auc"} <= set(metrics)
    home = budgeted_run["base"] / "home"
    run = MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(outcome["run_id"])
    assert run.data.tags[vocab.TAG_CV_SOURCE] == vocab.CV_SOURCE_SEARCH
    family = run.data.params["model.family"]
    if family == "ensemble":  # kept only when it beat the best single model on the folds
        assert any(n.startswith("ensemble of") for n in outcome["notes"])
        assert run.data.params["model.ensemble"]
    else:
        assert any("kept the single model" in n for n in outcome["notes"])


def test_the_model_predicts_probabilities_and_verifies(budgeted_run: dict) -> None:
    outcome, env, base = budgeted_run["outcome"], budgeted_run["env"], budgeted_run["base"]
    out = base / "predicted.csv"
    args = ["-m", outcome["model_uri"], "-d", str(budgeted_run["rows"]), "-o", str(out)]
    done = run_cli("predict", *args, "--proba", env=env, cwd=base)
    assert done.returncode == 0, done.stderr[-2000:]
    predicted = pd.read_csv(out)
    proba = predicted[["proba_0", "proba_1"]]
    assert len(predicted) == 40 and ((proba.sum(axis=1) - 1).abs() < 1e-6).all()
    assert (predicted["prediction"] == proba.to_numpy().argmax(axis=1)).all()
    verified = run_cli("models", "verify", outcome["model_uri"], env=env, cwd=base)
    assert verified.returncode == 0 and "match their recorded digests" in verified.stdout


def test_a_budget_too_small_to_search_fails_the_run_in_one_line(tmp_path: Path) -> None:
    from sklearn.datasets import load_diabetes

    data = tmp_path / "diabetes.csv"
    load_diabetes(as_frame=True).frame.to_csv(data, index=False)
    env = _env(tmp_path)
    args = ["--target", "target", "--template", "full-automl", "--param", "timeout_s=1"]
    done = run_cli("run", "tune", "--data", str(data), *args, env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert "leaves no time to search" in done.stderr and "Traceback" not in done.stderr
