"""Files as people really send them: one clear line or a run, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

pytestmark = [pytest.mark.integration]
ROWS = [(i, i * 2 + (i % 3), i % 2) for i in range(60)]


def _csv(sep: str = ",") -> str:
    return f"a{sep}b{sep}y\n" + "".join(f"{a}{sep}{b}{sep}{y}\n" for a, b, y in ROWS)


def run(home: Path, data: Path) -> tuple[int, dict, str]:
    """Load and fit a linear model (what reading the file needs, and no more)."""
    plan = data.with_name("plan.json")
    steps = [
        {"tool": "load_data", "args": {"path": str(data), "target": "y"}},
        {"tool": "train_model", "args": {"model": "linear"}},
    ]
    plan.write_text(json.dumps({"steps": steps}))
    done = run_cli(
        "run", "predict y", "--plan", str(plan), "--data", str(data), "--engine", "cpu", "--json"
    )
    outcome = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, outcome, done.stderr


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("array.json", json.dumps([{"a": a, "b": b, "y": y} for a, b, y in ROWS]).encode()),
        ("utf16.csv", _csv().encode("utf-16")),
        ("semicolons.csv", _csv(";").encode()),
        ("tabs.txt", _csv("\t").encode()),
        ("bigfield.csv", (_csv() + f"99,{'7' * 5_000_000},1\n").encode()),
    ],
)
def test_files_that_read_after_all(name: str, content: bytes, home: Path, tmp_path: Path) -> None:
    data = tmp_path / name
    data.write_bytes(content)
    code, outcome, err = run(home, data)
    assert code == 0 and outcome["status"] == "SUCCEEDED", err[-1500:]


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("ragged.csv", _csv() + "1,2,3,4,5\n", "more fields than its header"),
        ("binary.csv", b"\x00\x01\x02" * 1000, "binary data"),
        ("empty.csv", b"", "empty"),
        ("header.csv", b"a,b,y\n", "no data rows"),
    ],
)
def test_broken_files_fail_in_one_line_and_are_recorded(
    name: str, content: str | bytes, says: str, home: Path, tmp_path: Path
) -> None:
    data = tmp_path / name
    data.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, outcome, err = run(home, data)
    assert code == 1 and outcome["status"] == "FAILED" and outcome["run_id"]
    assert says in outcome["error"]["message"] and "Traceback" not in err
