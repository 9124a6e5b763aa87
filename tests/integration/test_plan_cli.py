"""`mlpilot plan --json` prints exactly the plan object and creates no run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

pytestmark = pytest.mark.integration


def test_plan_json_is_the_object_and_nothing_else(tmp_path: Path, sales_csv: Path) -> None:
    home = tmp_path / "home"
    env = {"MLPILOT_HOME": str(home), "MLPILOT_LLM": "offline"}
    done = run_cli(
        "plan",
        "tune xgboost for 25 trials optimizing mae to predict sales",
        "--data",
        str(sales_csv),
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert list(plan) == ["version", "template", "engine", "adapter", "steps", "rationale"]
    tune = next(s for s in plan["steps"] if s["tool"] == "optimize_model")
    assert tune["args"] == {
        "model": "xgb",
        "trials": 25,
        "metric": "mae",
        "timeout_s": None,
        "early_stopping": True,
        "warm_start": True,
    }
    assert not (home / "mlflow.db").exists() and not (home / "runs").exists()


def test_query_plans_need_no_data(tmp_path: Path) -> None:
    done = run_cli(
        "plan",
        "show the last 3 runs",
        "--json",
        env={"MLPILOT_HOME": str(tmp_path), "MLPILOT_LLM": "offline"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"] == [
        {"tool": "show_runs", "args": {"limit": 3, "scope": "auto"}}
    ]


def test_template_instantiation(tmp_path: Path, sales_csv: Path) -> None:
    env = {"MLPILOT_HOME": str(tmp_path), "MLPILOT_LLM": "offline"}
    done = run_cli(
        "plan",
        "--template",
        "hpo-lgbm",
        "--param",
        "trials=12",
        "--data",
        str(sales_csv),
        "--target",
        "sales",
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["template"] == "hpo-lgbm"
    assert next(s for s in plan["steps"] if s["tool"] == "optimize_model")["args"]["trials"] == 12
    bad = run_cli(
        "plan", "--template", "no-such", "--data", str(sales_csv), "--target", "sales", env=env
    )
    assert bad.returncode == 1 and "quick-baseline" in bad.stderr


def test_tools_and_templates_are_listed(tmp_path: Path) -> None:
    tools = json.loads(run_cli("tools", "list", "--json").stdout)
    assert {t["name"]: t["kind"] for t in tools}["show_runs"] == "query"
    templates = json.loads(run_cli("templates", "list", "--json").stdout)
    assert len(templates) >= 20 and "full-automl" in {t["name"] for t in templates}
