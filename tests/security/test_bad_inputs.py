"""Files as people really send them: one clear line or a run, never a traceback."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import local_env, run_cli

pytestmark = [pytest.mark.integration]
ROWS = [(i, i * 2 + (i % 3), i % 2) for i in range(60)]


def _csv(sep: str = ",") -> str:
    return f"a{sep}b{sep}y\n" + "".join(f"{a}{sep}{b}{sep}{y}\n" for a, b, y in ROWS)


def _zip(members: dict[str, str]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _wide(columns: int) -> bytes:
    """A table of ``columns`` feature columns (and y), a few rows."""
    header = ",".join(f"c{i}" for i in range(columns)) + ",y\n"
    rows = "".join(
        ",".join(str((i + r) % 7) for i in range(columns)) + f",{r % 2}\n" for r in range(40)
    )
    return (header + rows).encode()


#: one NUL byte inside an otherwise plain CSV (a cell pasted from elsewhere)
_ONE_NUL = _csv().replace("\n7,", "\n7\x00,", 1).encode()
READ_AFTER_ALL = {
    "array.json": json.dumps([{"a": a, "b": b, "y": y} for a, b, y in ROWS]).encode(),
    "utf16.csv": _csv().encode("utf-16"),
    "semicolons.csv": _csv(";").encode(),
    "tabs.txt": _csv("\t").encode(),
    "bigfield.csv": (_csv() + f"99,{'7' * 5_000_000},1\n").encode(),
    "onenul.csv": _ONE_NUL,
    "wide1500.csv": _wide(1500),
}
BROKEN = {
    "ragged.csv": ((_csv() + "1,2,3,4,5\n").encode(), "more fields than its header"),
    "binary.csv": (b"\x00\x01\x02" * 1000, "binary data"),
    "empty.csv": (b"", "empty"),
    "header.csv": (b"a,b,y\n", "no data rows"),
    "zip.xlsx": (_zip({"notes.txt": "not a workbook"}), "named like an Excel file but is a zip"),
    "text.xls": (_csv().encode(), "named like an Excel file but is text"),
    # a million columns: refused from the header (MLPILOT_MAX_COLUMNS), in seconds
    "million.csv": (
        (",".join(f"c{i}" for i in range(10**6)) + ",y\n" + "1," * 10**6 + "0\n").encode(),
        "1,000,001 columns, more than the 10,000 mlpilot profiles (MLPILOT_MAX_COLUMNS)",
    ),
}


def _run(folder: Path, name: str, content: bytes, home: Path) -> tuple[int, dict, str, float]:
    """Load the file: a plan of ``load_data`` alone (reading is what these files test;
    training and logging a model would add seconds per file and check nothing more)."""
    import time

    folder.mkdir()
    data, plan = folder / name, folder / "plan.json"
    data.write_bytes(content)
    steps = [{"tool": "load_data", "args": {"path": str(data), "target": "y"}}]
    plan.write_text(json.dumps({"steps": steps}))
    started = time.monotonic()
    done = run_cli(
        "run", "predict y", "--plan", str(plan), "--data", str(data), "--engine", "cpu", "--json",
        env=local_env(home), cwd=folder,
    )  # fmt: skip
    outcome = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, outcome, done.stderr, time.monotonic() - started


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home for every file: as a user's many runs share theirs."""
    return tmp_path_factory.mktemp("bad-inputs-home") / "home"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, home: Path) -> dict[str, tuple[Any, ...]]:
    """Every file through ``mlpilot run`` in one home: the first alone (it makes the home),
    then two at a time (each run is mostly one core)."""
    base = tmp_path_factory.mktemp("bad-inputs")
    files = {**READ_AFTER_ALL, **{name: content for name, (content, _) in BROKEN.items()}}
    first, *rest = files
    done = {first: _run(base / first.replace(".", "-"), first, files[first], home)}
    with ThreadPoolExecutor(2) as pool:
        futures = {
            name: pool.submit(_run, base / name.replace(".", "-"), name, files[name], home)
            for name in rest
        }
        return {**done, **{name: future.result() for name, future in futures.items()}}


@pytest.mark.parametrize("name", READ_AFTER_ALL)
def test_files_that_read_after_all(name: str, outcomes: dict) -> None:
    code, outcome, err, *_ = outcomes[name]
    assert code == 0 and outcome["status"] == "SUCCEEDED", err[-1500:]


@pytest.mark.parametrize("name", BROKEN)
def test_broken_files_fail_in_one_line_and_are_recorded(
    name: str, outcomes: dict, home: Path
) -> None:
    code, outcome, err, _ = outcomes[name]
    says = BROKEN[name][1]
    assert code == 1 and outcome["status"] == "FAILED" and outcome["run_id"]
    assert says in outcome["error"]["message"] and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], err[-1500:]
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    run_id = outcome["run_id"]
    assert MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(run_id).info.status == "FAILED"
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(run_id)
    assert doc["status"] == "FAILED" and says in doc["error"]["message"]


def test_a_million_columns_are_refused_in_seconds(outcomes: dict, home: Path) -> None:
    """Planning a 10⁶-column file took 4 minutes and wrote a 78 MB document."""
    *_, seconds = outcomes["million.csv"]
    assert seconds < 120  # start-up, the header's count and the FAILED record, on a busy box
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    outcome = outcomes["million.csv"][1]
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(outcome["run_id"])
    assert len(json.dumps(doc, default=str)) < 20_000


def test_a_wide_table_keeps_the_run_document_small(outcomes: dict, home: Path) -> None:
    """1,500 columns are profiled; the run document lists 1,000 of them (the artifact all)."""
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import SCHEMA_DOC_COLUMNS, connect

    _, outcome, _, _ = outcomes["wide1500.csv"]
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(outcome["run_id"])
    dataset = doc["dataset"]
    assert dataset["cols"] == 1501 and len(dataset["schema"]) == SCHEMA_DOC_COLUMNS == 1000
    assert dataset["schema_truncated"] is True


def test_a_relative_predict_path_is_read_from_the_users_folder(tmp_path: Path) -> None:
    """Checked against the user's folder, it was opened in the run folder (not found)."""
    (tmp_path / "new").mkdir()
    data = tmp_path / "train.csv"
    data.write_text(_csv())
    (tmp_path / "new" / "rows.csv").write_text(_csv())
    steps = [
        {"tool": "load_data", "args": {"path": "train.csv", "target": "y"}},
        {"tool": "train_model", "args": {"model": "linear"}},
        {"tool": "predict", "args": {"data_path": "new/rows.csv"}},
    ]
    (tmp_path / "plan.json").write_text(json.dumps({"steps": steps}))
    done = run_cli(
        "run", "predict y", "--plan", "plan.json", "--data", "train.csv", "--allow-read", "new",
        "--engine", "cpu", "--json", env=local_env(tmp_path / "home"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "SUCCEEDED" and outcome["predictions"]["rows"] == len(ROWS)
    predict = next(s for s in outcome["plan"]["steps"] if s["tool"] == "predict")
    assert predict["args"]["data_path"] == str((tmp_path / "new" / "rows.csv").resolve())
