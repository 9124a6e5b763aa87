"""Validation returns a new plan and leaves the one it was given as it was."""

from __future__ import annotations

import copy

import pytest

from mlpilot.platform.errors import PlanError
from mlpilot.platform.plan import Plan, validate_plan
from mlpilot.platform.tools import default_registry


def _plan(*steps: dict) -> Plan:
    return Plan.from_dict({"steps": list(steps)})


def test_validation_returns_a_new_plan_with_defaults_and_engine() -> None:
    plan = _plan(
        {"tool": "load_data", "args": {"path": "data.csv", "target": "y"}},
        {"tool": "train_model", "args": {"model": "rf"}},
        {"tool": "compare_engines", "args": {}},
    )
    before = copy.deepcopy(plan)
    validated = validate_plan(plan, default_registry(), None, check_files=False)
    assert plan == before  # nothing changed in place: not the args, not the engine
    new = validated.plan
    assert new is not plan and new.engine == "compare" and plan.engine == "auto"
    assert new.step("train_model").args["params"] == {}
    assert "params" not in plan.step("train_model").args
    assert new.step("load_data").args["task"] == "auto"
    # validating the result again changes nothing: defaults are already there
    assert validate_plan(new, default_registry(), None, check_files=False).plan == new


def test_an_invalid_plan_is_reported_step_by_step_and_left_alone() -> None:
    plan = _plan(
        {"tool": "load_data", "args": {"path": "data.csv", "target": "y", "bogus": 1}},
        {"tool": "train_model", "args": {"model": "nonsense"}},
    )
    before = copy.deepcopy(plan)
    with pytest.raises(PlanError) as caught:
        validate_plan(plan, default_registry(), None, check_files=False)
    message = caught.value.message
    assert message.startswith("the plan is invalid: step 1: load_data: unknown argument 'bogus'")
    assert "step 2: train_model: argument 'model'" in message
    assert plan == before
