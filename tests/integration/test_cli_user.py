"""The CLI as a user meets it: a short search run from one sentence, then the commands the
run's own output points to (``runs show``, ``runs list``, ``mlpilot worker --study``, the
generated ``pipeline.py`` re-run on its own), each run the way a user types it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import local_env, run_cli

pytestmark = pytest.mark.integration

_PROMPT = "tune a ridge model for 4 trials to predict sales"


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory, sales_csv: Path) -> dict:
    base = tmp_path_factory.mktemp("cli-user")
    env = local_env(base / "home", COLUMNS="80", MLPILOT_ENGINE="cpu")
    done = run_cli(
        "run", _PROMPT, "--data", str(sales_csv), "--experiment", "cli-user", env=env, cwd=base
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    run_id = re.search(r"MLflow run:\s+([0-9a-f]{32})", out).group(1)
    study = re.search(r"study (\S+) \(more workers: mlpilot worker --study \1\)", out)
    return {"base": base, "env": env, "out": out, "run_id": run_id, "study": study}


def test_study_name_is_printed_when_the_search_starts(searched: dict) -> None:
    assert searched["study"] is not None, searched["out"][-2000:]
    name = searched["study"].group(1)
    out = searched["out"]
    # before the first trial finishes, not only in the closing summary
    assert out.index(f"study {name}") < out.index("✓ tuning")


def test_runs_show_names_the_study(searched: dict) -> None:
    shown = run_cli("runs", "show", searched["run_id"], env=searched["env"])
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.strip().startswith("study"))
    assert searched["study"].group(1) in row
    assert "4 trials" in row


def test_worker_adds_trials_without_json(searched: dict) -> None:
    name = searched["study"].group(1)
    done = run_cli("worker", "--study", name, "--trials", "2", env=searched["env"])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stderr
    out = done.stdout + done.stderr
    assert f"Worker done: 2 trial(s) of study {name}" in out
    assert "6 trials in the study" in out  # the run's 4 and the worker's 2


def test_runs_list_fits_80_columns_with_whole_cells(searched: dict) -> None:
    listed = run_cli("runs", "list", env=searched["env"])
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, listed.stdout
    row = next(line for line in lines if searched["run_id"][:8] in line)
    assert "SUCCEEDED" in row
    assert "tune a ridge" in row  # the prompt keeps the width the other cells leave


def test_pipeline_rerun_on_its_own_prints_progress_and_logs_to_the_runs_experiment(
    searched: dict,
) -> None:
    home = searched["base"] / "home"
    pipeline = home / "runs" / searched["run_id"] / "pipeline.py"
    assert "EXPERIMENT = 'cli-user'" in pipeline.read_text()
    work = searched["base"] / "rerun"
    work.mkdir()
    env = {**os.environ, **searched["env"]}
    env = {key: value for key, value in env.items() if value != ""}
    done = subprocess.run(
        [sys.executable, str(pipeline)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "✓ train" in done.stderr and "done in" in done.stderr
    rerun_id = re.search(r"MLflow run ([0-9a-f]{32})", done.stderr).group(1)
    assert rerun_id != searched["run_id"]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home}/mlflow.db")
    run = client.get_run(rerun_id)
    assert client.get_experiment(run.info.experiment_id).name == "cli-user"
    assert "test_mae" in run.data.metrics


def test_a_reader_that_stops_early_does_not_leave_the_run_running(
    searched: dict, sales_csv: Path
) -> None:
    """``mlpilot run … | head``: the pipe closes mid-run; the run still ends and is recorded."""
    env = {**os.environ, **searched["env"]}
    cmd = [
        str(Path(sys.executable).parent / "mlpilot"),
        "run",
        "train a ridge model to predict sales",
    ]
    proc = subprocess.Popen(
        [*cmd, "--data", str(sales_csv), "--experiment", "piped"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=searched["base"],
    )
    for _ in range(6):  # what `head -6` reads, then it exits
        proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=300) == 0
    listed = run_cli("runs", "list", "--experiment", "piped", "--json", env=searched["env"])
    statuses = [row["status"] for row in json.loads(listed.stdout)]
    assert statuses == ["SUCCEEDED"], listed.stdout
