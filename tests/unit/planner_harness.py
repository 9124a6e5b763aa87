"""Score the offline planner on JSON-lines cases (the format of the shared planner eval)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


def load_cases(name: str) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in (DATA / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def fake_column(kind: str, n: int, rng: random.Random) -> list[str]:
    if kind == "num":
        return [f"{rng.gauss(100, 30):.2f}" if rng.random() > 0.05 else "" for _ in range(n)]
    if kind == "int":
        return [str(rng.randint(0, 40)) for _ in range(n)]
    if kind == "cat":
        return [rng.choice(["a", "b", "c", "d"]) for _ in range(n)]
    if kind == "bin":
        return [rng.choice(["0", "1"]) for _ in range(n)]
    if kind == "yn":
        return [rng.choice(["Yes", "No"]) for _ in range(n)]
    if kind == "date":
        return [f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" for _ in range(n)]
    if kind == "id":
        return [f"ID{i:05d}" for i in range(n)]
    if kind == "text":
        return [
            rng.choice(["Smith, Mr. John", "Doe, Mrs. Jane", "Lee, Miss Ann"]) for _ in range(n)
        ]
    raise ValueError(kind)


def write_csv(path: Path, columns: dict[str, str], n: int = 60, seed: int = 0) -> Path:
    rng = random.Random(seed)
    data = {name: fake_column(kind, n, rng) for name, kind in columns.items()}
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(list(columns))
        for i in range(n):
            writer.writerow([data[c][i] for c in columns])
    return path


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_same(g, w) for g, w in zip(got, want, strict=False))
        )
    return type(got) is type(want) and got == want


def problems(plan: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    """What ``plan`` gets wrong against ``expect`` (the shared eval's format, plus
    ``plan``: top-level keys such as template or adapter, and ``rationale``: phrases the
    rationale must contain)."""
    steps = plan["steps"]
    tools = [s["tool"] for s in steps]
    found, pos = [], 0
    for want in expect.get("tools", []):
        try:
            pos = tools.index(want, pos) + 1
        except ValueError:
            found.append(f"missing or out of order: {want}")
    found += [f"should not plan: {bad}" for bad in expect.get("absent", []) if bad in tools]
    for key, want in expect.get("args", {}).items():
        tool, arg = key.split(".", 1)
        step = next((s for s in steps if s["tool"] == tool), None)
        if step is None:
            found.append(f"no {tool} step for {key}")
            continue
        options = want["any_of"] if isinstance(want, dict) and "any_of" in want else [want]
        if not any(_same(step["args"].get(arg), o) for o in options):
            found.append(f"{key} = {step['args'].get(arg)!r}, expected {want!r}")
    for key, want in expect.get("plan", {}).items():
        if plan.get(key) != want:
            found.append(f"plan {key} = {plan.get(key)!r}, expected {want!r}")
    found += [
        f"rationale lacks {phrase!r}: {plan.get('rationale')!r}"
        for phrase in expect.get("rationale", [])
        if phrase not in (plan.get("rationale") or "")
    ]
    return found


def error_problems(case: dict[str, Any], workdir: Path) -> list[str]:
    """For a case expecting ``error`` (phrases): planning must fail, naming each of them."""
    from mlpilot.platform.errors import MlpilotError

    try:
        plan = plan_case(case, workdir)
    except MlpilotError as exc:
        text = exc.one_line()
        return [f"error lacks {p!r}: {text}" for p in case["expect"]["error"] if p not in text]
    return [f"planned instead of failing: {plan['template']} {plan['steps']}"]


def plan_case(case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    from mlpilot.platform.agent.planning import plan_request
    from mlpilot.platform.config import Settings

    settings = Settings.from_env({"MLPILOT_HOME": str(workdir / "home"), "MLPILOT_LLM": "offline"})
    data = (
        write_csv(workdir / f"{case['id']}.csv", case["columns"]) if case.get("columns") else None
    )
    result, _ = plan_request(
        settings,
        case["prompt"],
        data_path=str(data) if data else None,
        target=case.get("target_flag"),
    )
    return result.plan.to_dict()
