"""Files as people really send them: one clear line or a run, never a traceback."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import local_env, run_cli

pytestmark = [pytest.mark.integration]
ROWS = [(i, i * 2 + (i % 3), i % 2) for i in range(60)]


def _csv(sep: str = ",") -> str:
    return f"a{sep}b{sep}y\n" + "".join(f"{a}{sep}{b}{sep}{y}\n" for a, b, y in ROWS)


READ_AFTER_ALL = {
    "array.json": json.dumps([{"a": a, "b": b, "y": y} for a, b, y in ROWS]).encode(),
    "utf16.csv": _csv().encode("utf-16"),
    "semicolons.csv": _csv(";").encode(),
    "tabs.txt": _csv("\t").encode(),
    "bigfield.csv": (_csv() + f"99,{'7' * 5_000_000},1\n").encode(),
}
BROKEN = {
    "ragged.csv": ((_csv() + "1,2,3,4,5\n").encode(), "more fields than its header"),
    "binary.csv": (b"\x00\x01\x02" * 1000, "binary data"),
    "empty.csv": (b"", "empty"),
    "header.csv": (b"a,b,y\n", "no data rows"),
}


def _run(folder: Path, name: str, content: bytes) -> tuple[int, dict, str, Path]:
    """Load the file and fit a linear model (what reading it needs, and no more)."""
    folder.mkdir()
    data, plan = folder / name, folder / "plan.json"
    data.write_bytes(content)
    steps = [
        {"tool": "load_data", "args": {"path": str(data), "target": "y"}},
        {"tool": "train_model", "args": {"model": "linear"}},
    ]
    plan.write_text(json.dumps({"steps": steps}))
    home = folder / "home"
    done = run_cli(
        "run", "predict y", "--plan", str(plan), "--data", str(data), "--engine", "cpu", "--json",
        env=local_env(home), cwd=folder,
    )  # fmt: skip
    outcome = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, outcome, done.stderr, home


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, dict, str, Path]]:
    """Every file through ``mlpilot run``, two at a time (each run is mostly one core)."""
    base = tmp_path_factory.mktemp("bad-inputs")
    files = {**READ_AFTER_ALL, **{name: content for name, (content, _) in BROKEN.items()}}
    with ThreadPoolExecutor(2) as pool:
        futures = {
            name: pool.submit(_run, base / name.replace(".", "-"), name, content)
            for name, content in files.items()
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", READ_AFTER_ALL)
def test_files_that_read_after_all(name: str, outcomes: dict) -> None:
    code, outcome, err, _ = outcomes[name]
    assert code == 0 and outcome["status"] == "SUCCEEDED", err[-1500:]


@pytest.mark.parametrize("name", BROKEN)
def test_broken_files_fail_in_one_line_and_are_recorded(name: str, outcomes: dict) -> None:
    code, outcome, err, home = outcomes[name]
    says = BROKEN[name][1]
    assert code == 1 and outcome["status"] == "FAILED" and outcome["run_id"]
    assert says in outcome["error"]["message"] and "Traceback" not in err
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    run_id = outcome["run_id"]
    assert MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(run_id).info.status == "FAILED"
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(run_id)
    assert doc["status"] == "FAILED" and says in doc["error"]["message"]
