"""Follow-ups resolve against the session context (data, target, last plan, best run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_harness import write_csv

from mlpilot.platform.agent.planning import plan_request
from mlpilot.platform.config import Settings
from mlpilot.platform.errors import PlanError

COLUMNS = {"customer_id": "id", "tenure": "int", "charges": "num", "contract": "cat", "churn": "yn"}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Settings, str, dict]:
    data = str(write_csv(tmp_path / "churn.csv", COLUMNS))
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})
    first, _ = plan_request(
        settings, "tune a random forest for 30 trials to predict churn", data_path=data
    )
    context = {
        "data_path": data,
        "target": "churn",
        "last_plan": first.plan.to_dict(),
        "last_run": "run-2",
        "best_run": {"run_id": "run-1", "metric": "roc_auc", "value": 0.8},
    }
    return settings, data, context


def _steps(result: object) -> dict:
    return {s.tool: s.args for s in result.plan.steps}


def test_now_try_xgboost_tunes_xgboost_on_the_same_data(setup: tuple) -> None:
    settings, data, context = setup
    result, _ = plan_request(settings, "now try xgboost", context=context)
    steps = _steps(result)
    assert steps["load_data"]["path"] == data and steps["load_data"]["target"] == "churn"
    assert steps["optimize_model"]["model"] == "xgb" and steps["optimize_model"]["trials"] == 30


@pytest.mark.parametrize("prompt", ["用xgboost再试一次", "switch to lightgbm", "try knn instead"])
def test_follow_ups_in_both_languages(setup: tuple, prompt: str) -> None:
    settings, _, context = setup
    steps = _steps(plan_request(settings, prompt, context=context)[0])
    assert steps["optimize_model"]["model"] in {"xgb", "lgbm", "knn"}


def test_register_the_best_one_uses_the_sessions_best_run(setup: tuple) -> None:
    settings, _, context = setup
    steps = _steps(plan_request(settings, "register the best one", context=context)[0])
    assert list(steps) == ["register_model"]
    assert (
        steps["register_model"]["run_id"] == "run-1"
        and steps["register_model"]["name"] == "churn-model"
    )


def test_register_it_uses_the_last_run(setup: tuple) -> None:
    settings, _, context = setup
    steps = _steps(
        plan_request(settings, "register it as churn-rf with alias challenger", context=context)[0]
    )
    assert steps["register_model"] == {
        "name": "churn-rf",
        "alias": "challenger",
        "run_id": "run-2",
        "metric": None,
    }


def test_without_a_session_a_follow_up_asks_for_data(tmp_path: Path) -> None:
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path), "MLPILOT_LLM": "offline"})
    with pytest.raises(PlanError, match="needs a data file"):
        plan_request(settings, "now try xgboost")
