"""The planner's shared development cases, ready for an LLM planner and the offline one.

Each case of ``prompts-dev.jsonl`` (``../shared/eval``, or the copy in ``tests/unit/data``)
becomes a small CSV with its columns (the generator of ``plan_eval.py``), a
:class:`PlanningRequest` and the offline planner's plan for it: what an LLM planner's plan
is compared with (same target, same tools).
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpilot.platform.llm import PlanningRequest
from mlpilot.platform.llm.offline import OfflinePlanner
from mlpilot.platform.ml.profile import profile_table
from mlpilot.platform.plan import Plan
from mlpilot.platform.plan.templates import builtin_templates
from mlpilot.platform.tools import default_registry

REPO = Path(__file__).resolve().parents[2]
SHARED_CASES = REPO.parent / "shared" / "eval" / "prompts-dev.jsonl"
COPIED_CASES = REPO / "tests" / "unit" / "data" / "prompts_dev.jsonl"


def load_cases() -> list[dict[str, Any]]:
    path = SHARED_CASES if SHARED_CASES.is_file() else COPIED_CASES
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _values(kind: str, n: int, rng: random.Random) -> list[str]:
    # plan_eval.py's generator, so that the files look like the eval's
    choices = {
        "cat": ["a", "b", "c", "d"],
        "bin": ["0", "1"],
        "yn": ["Yes", "No"],
        "text": ["Smith, Mr. John", "Doe, Mrs. Jane", "Lee, Miss Ann"],
    }
    if kind == "num":
        return [f"{rng.gauss(100, 30):.2f}" if rng.random() > 0.05 else "" for _ in range(n)]
    if kind == "int":
        return [str(rng.randint(0, 40)) for _ in range(n)]
    if kind == "date":
        return [f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" for _ in range(n)]
    if kind == "id":
        return [f"ID{i:05d}" for i in range(n)]
    return [rng.choice(choices[kind]) for _ in range(n)]


def write_csv(path: Path, columns: dict[str, str], n: int = 60, seed: int = 0) -> Path:
    rng = random.Random(seed)
    data = {name: _values(kind, n, rng) for name, kind in columns.items()}
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(list(columns))
        writer.writerows([data[c][i] for c in columns] for i in range(n))
    return path


@dataclass
class DevCase:
    id: str
    request: PlanningRequest
    offline: Plan  # the offline planner's plan: the reference

    @property
    def expected(self) -> tuple[str | None, list[str]]:
        return target_and_tools(self.offline)


def target_and_tools(plan: Plan) -> tuple[str | None, list[str]]:
    load = plan.step("load_data")
    return (load.args.get("target") if load else None), plan.tools


def prepare(case: dict[str, Any], workdir: Path) -> DevCase:
    """The case's data file, its planning request and the offline planner's plan."""
    profile = None
    if case.get("columns"):
        profile = profile_table(write_csv(workdir / f"{case['id']}.csv", case["columns"]))
    request = PlanningRequest(
        prompt=case["prompt"],
        registry=default_registry(),
        templates=builtin_templates(),
        profile=profile,
        data_path=profile.path if profile else None,
        target=case.get("target_flag"),
    )
    offline = OfflinePlanner().plan(request).plan
    return DevCase(case["id"], request, offline)
