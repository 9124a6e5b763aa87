"""Codegen renders literals, never code: hostile column names and prompts stay strings."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from mlpilot.platform.codegen import literal, render_pipeline, verify_script
from mlpilot.platform.errors import PlanError
from mlpilot.platform.plan import Plan, validate_plan
from mlpilot.platform.tools import default_registry

HOSTILE = "x'); import os; os.system('touch PWNED') #\n\"\"\"\nprint('owned')"


def _plan(target: str, **extra: object) -> Plan:
    steps = [
        {"tool": "load_data", "args": {"path": "data.csv", "target": target}},
        {"tool": "feature_importance", "args": {}},
        {"tool": "train_model", "args": {"model": "rf", "params": {"n_estimators": 10}}},
    ]
    return Plan.from_dict({"steps": steps, **extra})


def test_literal_round_trips_and_refuses_objects() -> None:
    for value in ["a'b\"c\n", 3, 2.5, True, None, [1, "x"], {"k": [None, False]}]:
        assert ast.literal_eval(literal(value)) == value
    with pytest.raises(PlanError):
        literal(object())


def test_hostile_target_and_prompt_are_only_string_literals(tmp_path: Path) -> None:
    registry = default_registry()
    plan = _plan(HOSTILE)
    plan = validate_plan(plan, registry, None, check_files=False).plan
    source = render_pipeline(plan, registry, data_path="data.csv", prompt=HOSTILE)
    tree = ast.parse(source)
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls <= {
        "open_pipeline",
        "exit_process",
        "main",
        "load_data",
        "train_model",
        "feature_importance",
    }
    strings = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    assert HOSTILE in strings
    imports = {
        ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    assert not any(i.split()[-1] == "os" for i in imports)
    script = tmp_path / "pipeline.py"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0 and not (tmp_path / "PWNED").exists() and "owned" not in done.stdout


def test_importance_runs_after_the_model_steps() -> None:
    registry = default_registry()
    plan = _plan("y")
    plan = validate_plan(plan, registry, None, check_files=False).plan
    body = render_pipeline(plan, registry, data_path="data.csv").split("def main")[1]
    assert body.index("train_model(run") < body.index("feature_importance(run")


def test_verify_script_rejects_unplanned_calls() -> None:
    with pytest.raises(PlanError, match="not a planned step"):
        verify_script("import os\nos.system('x')\n", allowed_calls={"load_data"})


def test_query_tools_have_no_pipeline_step() -> None:
    registry = default_registry()
    plan = Plan.from_dict({"steps": [{"tool": "show_runs", "args": {"limit": 3}}]})
    with pytest.raises(PlanError, match="answers in-process"):
        render_pipeline(plan, registry, data_path=None)
