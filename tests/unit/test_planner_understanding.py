"""Issue 16's kinds of planner miss, on cases of the project's own (not the shared ones).

`planner_cases_issue16.jsonl` groups them by kind in the id (`i16-<kind><n>`): target
named by another word form (`form`), Chinese words for English columns (`zh`), ties and
guesses that must fail listing candidates (`tie`), questions about the data (`describe`),
the best model within a time budget (`automl`), runs compared by id prefix (`compare`),
requests with one reasonable reading (`reading`), numbers near misspelt units and values
the planner cannot read (`number`), and adapters suggested only on column evidence
(`adapter`). Each kind has at least ten cases.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from planner_harness import error_problems, load_cases, plan_case, problems

CASES = load_cases("planner_cases_issue16.jsonl")
KINDS = ("form", "zh", "tie", "describe", "automl", "compare", "reading", "number", "adapter")


def _kind(case: dict) -> str:
    match = re.match(r"i16-([a-z]+)\d+$", case["id"])
    assert match, case["id"]
    return match.group(1)


def test_each_kind_has_ten_cases() -> None:
    counts = Counter(_kind(c) for c in CASES)
    assert {k: counts[k] for k in KINDS if counts[k] < 10} == {}
    assert set(counts) == set(KINDS)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict, tmp_path: Path) -> None:
    if "error" in case["expect"]:
        assert error_problems(case, tmp_path) == []
    else:
        assert problems(plan_case(case, tmp_path), case["expect"]) == []


@pytest.mark.parametrize("case", load_cases("prompts_dev.jsonl"), ids=lambda c: c["id"])
def test_values_it_reads_are_not_reported_as_unread(case: dict, tmp_path: Path) -> None:
    """ "Could not read" is for what the planner really could not use ("一个模型" is not a
    number the user gave)."""
    assert "Could not read" not in plan_case(case, tmp_path)["rationale"]
