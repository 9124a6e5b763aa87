"""Issue 27's kinds of planner miss, on cases of the project's own over new data files.

`planner_cases_issue27.jsonl` groups them by kind in the id (`i27-<kind><n>`): a target
named by a related word with one plausible column, or a label-named column when none is
named (`target`: used and said in the rationale; two plausible columns still refuse), Chinese
words for English column names (`zh`), counts with other unit words, spelled out or in
Chinese numerals (`count`), questions about the runs with or without the word "run"
(`query`), terse multi-step requests with no training verb (`terse`), and Chinese
time-budgeted best-model requests with no word for tuning (`budget`).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from planner_harness import error_problems, load_cases, plan_case, problems

CASES = load_cases("planner_cases_issue27.jsonl")
KINDS = ("target", "zh", "count", "query", "terse", "budget")


def _kind(case: dict) -> str:
    match = re.match(r"i27-([a-z]+)\d+$", case["id"])
    assert match, case["id"]
    return match.group(1)


def test_each_kind_has_cases_in_both_languages() -> None:
    counts = Counter(_kind(c) for c in CASES)
    assert {k: counts[k] for k in KINDS if counts[k] < 5} == {}
    chinese = {_kind(c) for c in CASES if re.search(r"[\u4e00-\u9fff]", c["prompt"])}
    assert chinese == set(KINDS)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict, tmp_path: Path) -> None:
    if "error" in case["expect"]:
        assert error_problems(case, tmp_path) == []
    else:
        assert problems(plan_case(case, tmp_path), case["expect"]) == []
