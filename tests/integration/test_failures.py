"""Bad input and crashed children: a one-line error, and the run FAILED in both stores."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import local_env, run_cli

pytestmark = pytest.mark.integration


def _latest(home: Path) -> tuple[object, dict]:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("mlpilot")
    run = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])[0]
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(run.info.run_id)
    return run, doc


def _assert_one_line_failure(done: object, *needles: str) -> str:
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "not a tabular text file"),
        (b"date,store,sales\n", "header but no data rows"),
    ],
    ids=["empty", "not-tabular", "header-only"],
)
def test_bad_files_fail_clearly_and_are_recorded(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    data = tmp_path / "data.csv"
    data.write_bytes(content)
    home = tmp_path / "home"
    done = run_cli(
        "run",
        "train a random forest to predict sales",
        "--data",
        str(data),
        env=local_env(home),
        cwd=tmp_path,
    )
    _assert_one_line_failure(done, needle, "data.csv")
    run, doc = _latest(home)
    assert run.info.status == "FAILED" and doc["status"] == "FAILED"
    assert needle in doc["error"]["message"] and doc["error"]["stage"] == "PLANNING"


def test_missing_target_column_names_the_candidates(tmp_path: Path, sales_csv: Path) -> None:
    home = tmp_path / "home"
    done = run_cli(
        "run",
        "train a random forest",
        "--data",
        str(sales_csv),
        "--target",
        "revenue",
        env=local_env(home),
        cwd=tmp_path,
    )
    line = _assert_one_line_failure(done, "'revenue'", "not in the data", "'sales'")
    assert "'price'" in line
    run, doc = _latest(home)
    assert run.info.status == "FAILED" and doc["status"] == "FAILED"


def test_plan_without_any_target_lists_candidates(tmp_path: Path, sales_csv: Path) -> None:
    done = run_cli(
        "plan",
        "train a random forest",
        "--data",
        str(sales_csv),
        "--json",
        env=local_env(tmp_path / "home"),
        cwd=tmp_path,
    )
    _assert_one_line_failure(done, "which column to predict", "'sales'")
    assert done.stdout == ""


def test_a_crashing_child_ends_failed_in_both_stores(tmp_path: Path, sales_csv: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "crashy.py").write_text(
        textwrap.dedent(
            '''
            import os, signal

            from mlpilot.platform.tools import tool


            @tool(kind="pipeline", stage="train", runtime="crashy:crash_now")
            def crash_hard() -> None:
                """Kill the pipeline process the way the OOM killer would."""


            def crash_now(run) -> None:
                os.kill(os.getpid(), signal.SIGKILL)
            '''
        )
    )
    home = tmp_path / "home"
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "steps": [
                    {"tool": "load_data", "args": {"path": str(sales_csv), "target": "sales"}},
                    {"tool": "crash_hard", "args": {}},
                ]
            }
        )
    )
    done = run_cli(
        "run",
        "crash on purpose",
        "--plan",
        str(plan),
        "--data",
        str(sales_csv),
        "--plugins",
        "crashy",
        env=local_env(home, PYTHONPATH=str(plugins)),
        cwd=tmp_path,
    )
    _assert_one_line_failure(done, "SIGKILL")
    run, doc = _latest(home)
    assert run.info.status == "FAILED" and run.data.tags["mlpilot.state"] == "FAILED"
    assert (
        doc["status"] == "FAILED"
        and "SIGKILL" in doc["error"]["message"]
        and doc["error"]["stage"] == "running"
    )
    assert [e["state"] for e in doc["events"]][-1] == "FAILED"
