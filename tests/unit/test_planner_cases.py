"""The offline planner on the shared dev cases and on the project's own cases (English and Chinese)."""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_harness import load_cases, plan_case, problems

DEV = load_cases("prompts_dev.jsonl")
OWN = load_cases("planner_cases.jsonl")


@pytest.mark.parametrize("case", DEV, ids=[c["id"] for c in DEV])
def test_dev_case(case: dict, tmp_path: Path) -> None:
    assert problems(plan_case(case, tmp_path), case["expect"]) == []


@pytest.mark.parametrize("case", OWN, ids=[c["id"] for c in OWN])
def test_own_case(case: dict, tmp_path: Path) -> None:
    assert problems(plan_case(case, tmp_path), case["expect"]) == []
