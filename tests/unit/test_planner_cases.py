"""The offline planner on the shared dev cases and on the project's own case sets (English and Chinese).

`planner_cases.jsonl` and `planner_cases_heldout.jsonl` were written by people who did not
write the planner, against DESIGN §3 only; the held-out set was written without reading it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_harness import load_cases, plan_case, problems

CASES = [
    *load_cases("prompts_dev.jsonl"),
    *load_cases("planner_cases.jsonl"),
    *load_cases("planner_cases_heldout.jsonl"),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_planner_case(case: dict, tmp_path: Path) -> None:
    assert problems(plan_case(case, tmp_path), case["expect"]) == []
