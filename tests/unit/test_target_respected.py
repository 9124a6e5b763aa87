"""The user's target is used as given, or planning fails saying why: never replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planner_harness import plan_case, write_csv

from mlpilot.platform.errors import PlanError

COLUMNS = {"customer_id": "id", "x": "num", "a": "num", "y": "bin", "segment": "cat"}


def _case(prompt: str, **extra: object) -> dict:
    return {"id": "t", "prompt": prompt, "columns": COLUMNS, **extra}


def _target(plan: dict) -> str:
    return next(s for s in plan["steps"] if s["tool"] == "load_data")["args"]["target"]


@pytest.mark.parametrize(
    "prompt", ["predict y", "train a model for y", "the target is y", "fit a forest on 'y'"]
)
def test_a_single_letter_names_a_column_after_a_cue_or_in_quotes(
    prompt: str, tmp_path: Path
) -> None:
    assert _target(plan_case(_case(prompt), tmp_path)) == "y"


def test_the_article_a_is_not_column_a(tmp_path: Path) -> None:
    # no column named: the label-named column `y`, said loudly, never the article's `a`
    plan = plan_case(_case("train a model"), tmp_path)
    assert _target(plan) == "y" and "target guessed" in plan["rationale"]
    without_label = {k: v for k, v in COLUMNS.items() if k != "y"}
    with pytest.raises(PlanError, match="does not say which column"):
        plan_case({"id": "t", "prompt": "train a model", "columns": without_label}, tmp_path)


def test_target_flag_with_a_single_letter(tmp_path: Path) -> None:
    assert _target(plan_case(_case("train a model", target_flag="a"), tmp_path)) == "a"


def test_an_identifier_named_as_the_target_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="'customer_id' is an identifier"):
        plan_case(_case("predict customer_id"), tmp_path)


def test_an_identifier_target_flag_fails_rather_than_being_swapped(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="'customer_id' is an identifier"):
        plan_case(_case("predict segment", target_flag="customer_id"), tmp_path)


def test_a_usable_cued_column_wins_over_an_identifier_mentioned_after(tmp_path: Path) -> None:
    plan = plan_case(_case("predict segment for customer_id"), tmp_path)
    assert _target(plan) == "segment"


def test_the_target_flag_wins_over_a_saved_plan(tmp_path: Path) -> None:
    from mlpilot.platform.agent.planning import plan_request
    from mlpilot.platform.config import Settings

    data = write_csv(tmp_path / "d.csv", COLUMNS)
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})
    saved, _ = plan_request(settings, "predict segment", data_path=str(data))
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(saved.plan.to_dict()))
    result, _ = plan_request(
        settings, "", data_path=str(data), target="x", plan_file=str(plan_file)
    )
    assert _target(result.plan.to_dict()) == "x"


def test_data_flag_replaces_a_saved_plans_path_and_says_so(tmp_path: Path) -> None:
    from mlpilot.platform.agent.planning import plan_request
    from mlpilot.platform.config import Settings

    data = write_csv(tmp_path / "d.csv", COLUMNS)
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})
    plan_file = tmp_path / "plan.json"
    load = {"tool": "load_data", "args": {"path": "/etc/shadow", "target": "segment"}}
    plan_file.write_text(json.dumps({"steps": [load]}))
    result, _ = plan_request(settings, "", data_path=str(data), plan_file=str(plan_file))
    assert result.plan.steps[0].args["path"] == str(data)
    assert any("/etc/shadow was replaced by --data" in note for note in result.notes)
