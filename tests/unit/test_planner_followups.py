"""Follow-ups in a session, planned against its context: the model family it trained, its
runs (best, last, compare the last ones) and the alias register-best gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_harness import write_csv

from mlpilot.platform.agent.planning import plan_request
from mlpilot.platform.config import Settings

COLUMNS = {
    "customer_id": "id",
    "tenure": "int",
    "charges": "num",
    "contract": "cat",
    "churned": "yn",
}


def _run(run_id: str, model: str, auc: float) -> dict:
    return {
        "run_id": run_id,
        "status": "SUCCEEDED",
        "metric": "roc_auc",
        "metrics": {"test_roc_auc": auc},
        "model_uri": f"models:/m-{run_id}",
        "model": model,
    }


@pytest.fixture
def session(tmp_path: Path) -> tuple[Settings, dict]:
    data = str(write_csv(tmp_path / "churn.csv", COLUMNS))
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})
    knn, _ = plan_request(settings, "now try knn to predict churned", data_path=data)
    context = {
        "data_path": data,
        "target": "churned",
        "model": "knn",
        "last_plan": knn.plan.to_dict(),
        "last_run": "c3",
        "runs": [_run("a1", "rf", 0.81), _run("b2", "xgb", 0.86), _run("c3", "knn", 0.74)],
        "best_run": {"run_id": "b2", "metric": "roc_auc", "value": 0.86},
    }
    return settings, context


def _steps(settings: Settings, prompt: str, context: dict) -> dict:
    result, _ = plan_request(settings, prompt, context=context)
    return {s.tool: s.args for s in result.plan.steps}


@pytest.mark.parametrize(
    ("prompt", "trials"),
    [
        ("tune it", 50),
        ("try it with 100 trials", 100),
        ("tune that model for 30 trials", 30),
        ("再调一下参数", 50),
        ("optimise it some more, 20 trails", 20),
        ("same model, but tune it with forty trials", 40),
    ],
)
def test_tune_it_keeps_the_sessions_model_and_data(
    session: tuple, prompt: str, trials: int
) -> None:
    settings, context = session
    steps = _steps(settings, prompt, context)
    assert steps["optimize_model"]["model"] == "knn" and steps["optimize_model"]["trials"] == trials
    assert steps["load_data"]["target"] == "churned"
    assert steps["load_data"]["path"] == context["data_path"]


def test_tune_it_for_ten_minutes_keeps_the_model(session: tuple) -> None:
    settings, context = session
    tune = _steps(settings, "tune it for 10 minutes", context)["optimize_model"]
    assert tune["model"] == "knn" and tune["timeout_s"] == 600


def test_a_named_model_wins_over_the_sessions(session: tuple) -> None:
    settings, context = session
    assert (
        _steps(settings, "now tune it using lightgbm instead", context)["optimize_model"]["model"]
        == "lgbm"
    )


def test_a_new_model_without_reference_is_not_the_sessions(session: tuple) -> None:
    settings, context = session
    steps = _steps(settings, "tune a model for 20 trials", context)
    assert steps["optimize_model"]["model"] == "auto"


@pytest.mark.parametrize(
    ("prompt", "ids"),
    [
        ("compare the last two", ["b2", "c3"]),
        ("compare the last 3 runs", ["a1", "b2", "c3"]),
        ("compare them", ["b2", "c3"]),
        ("对比一下最近两次运行", ["b2", "c3"]),
    ],
)
def test_compare_the_last_runs_of_the_session(session: tuple, prompt: str, ids: list) -> None:
    settings, context = session
    assert _steps(settings, prompt, context) == {"compare_runs": {"run_ids": ids}}


def test_register_the_best_one_gets_the_register_best_alias(session: tuple) -> None:
    settings, context = session
    result, _ = plan_request(settings, "register the best one", context=context)
    assert result.plan.template == "register-best"
    args = result.plan.steps[0].args
    assert args["run_id"] == "b2" and args["alias"] == "champion"


def test_an_alias_the_user_gives_wins(session: tuple) -> None:
    settings, context = session
    args = _steps(settings, "register the best one with alias staging", context)["register_model"]
    assert args["alias"] == "staging" and args["run_id"] == "b2"


@pytest.mark.parametrize(
    "prompt", ["which run was best?", "哪个运行最好？", "show me the best model"]
)
def test_best_is_a_query(session: tuple, prompt: str) -> None:
    settings, context = session
    assert list(_steps(settings, prompt, context)) == ["show_best_model"]


@pytest.mark.parametrize(
    "prompt", ["show the last run", "how did the last one go?", "上一次运行的结果"]
)
def test_last_is_one_run(session: tuple, prompt: str) -> None:
    settings, context = session
    assert _steps(settings, prompt, context) == {"show_runs": {"limit": 1, "scope": "auto"}}


def test_adapter_option_wins_over_detection(tmp_path: Path) -> None:
    loans = {
        "loan_id": "id",
        "income": "num",
        "loan_amount": "num",
        "grade": "cat",
        "default": "bin",
    }
    data = str(write_csv(tmp_path / "loans.csv", loans))
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})
    detected, _ = plan_request(settings, "predict default", data_path=data)
    assert detected.plan.adapter == "finance"
    forced, _ = plan_request(settings, "predict default", data_path=data, adapter="medical")
    assert forced.plan.adapter == "medical" and any("--adapter" in n for n in forced.notes)
    none, _ = plan_request(settings, "predict default", data_path=data, adapter="none")
    assert none.plan.adapter is None


def test_compare_the_last_runs_without_a_session(tmp_path: Path) -> None:
    from mlpilot.platform.errors import PlanError

    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path), "MLPILOT_LLM": "offline"})
    two, _ = plan_request(settings, "compare the last two runs")
    assert [s.to_dict() for s in two.plan.steps] == [
        {"tool": "compare_runs", "args": {"run_ids": []}}  # the experiment's last two
    ]
    with pytest.raises(PlanError, match="last 3 runs needs them named"):
        plan_request(settings, "compare the last 3 runs")
