"""Signals, cancel and a vanished owner: a run always ends, in both stores, with the reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, invoke_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]
LONG = "tune a random forest for 400 trials to predict sales"


class Running:
    """``mlpilot run`` in the background, its progress lines read as they come."""

    def __init__(self, data: Path, home: Path) -> None:
        env = {**os.environ, "MLPILOT_HOME": str(home), "MLPILOT_LLM": "offline"}
        self.proc = subprocess.Popen(
            [MLPILOT, "run", LONG, "--data", str(data), "--engine", "cpu"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self.proc.poll() is None, "".join(self.lines[-20:])
            assert time.monotonic() < deadline, f"never saw {text!r}: {''.join(self.lines[-20:])}"
            time.sleep(0.1)


def last_run(home: Path, timeout: float = 60) -> dict[str, Any]:
    """The newest run (the pipeline starts before its run exists: wait for the run)."""
    deadline = time.monotonic() + timeout
    while True:
        done = invoke_cli("runs", "list", "--limit", "1", "--json", env={"MLPILOT_HOME": str(home)})
        runs = json.loads(done.stdout) if done.returncode == 0 else []
        if runs or time.monotonic() > deadline:
            assert runs, done.stderr
            return runs[0]
        time.sleep(0.3)


def mlflow_status(home: Path, run_id: str) -> str:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{home}/mlflow.db").get_run(run_id).info.status


def pipeline_pids(home: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "pipeline.py" in cmd and str(home) in (proc / "environ").read_bytes().decode(
                errors="replace"
            ):
                found.append(int(proc.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_cancels_the_run_in_both_stores(sig: int, home: Path, sales_csv: Path) -> None:
    running = Running(sales_csv, home)
    running.wait_for("● RUNNING")  # the pipeline process is under way
    running.proc.send_signal(sig)
    assert running.proc.wait(timeout=60) == 130
    run = last_run(home)
    assert run["status"] == "CANCELLED"
    assert mlflow_status(home, run["run_id"]) == "KILLED"
    time.sleep(1)
    assert pipeline_pids(home) == []


def test_a_signal_while_planning_is_recorded_too(home: Path, sales_csv: Path) -> None:
    running = Running(sales_csv, home)
    running.wait_for("RECEIVED")
    running.proc.send_signal(signal.SIGTERM)
    assert running.proc.wait(timeout=60) == 130
    assert last_run(home)["status"] == "CANCELLED"


def test_cancel_from_another_terminal(home: Path, sales_csv: Path) -> None:
    running = Running(sales_csv, home)
    running.wait_for("● RUNNING")
    run_id = last_run(home)["run_id"]
    done = invoke_cli("runs", "cancel", run_id[:8], env={"MLPILOT_HOME": str(home)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CANCELLED" in done.stdout
    assert running.proc.wait(timeout=60) == 130
    assert mlflow_status(home, run_id) == "KILLED"


def test_a_run_whose_owner_died_is_ended_by_cancel_and_by_repair(
    home: Path, sales_csv: Path
) -> None:
    running = Running(sales_csv, home)
    running.wait_for("● RUNNING")
    run_id = last_run(home)["run_id"]
    running.proc.kill()  # SIGKILL: nothing of mlpilot runs; its pipeline dies with it
    running.proc.wait(timeout=30)
    assert last_run(home)["status"] == "RUNNING"
    done = invoke_cli("doctor", "--repair", env={"MLPILOT_HOME": str(home)})
    run = last_run(home)
    assert run["status"] == "FAILED", done.stdout + done.stderr
    assert mlflow_status(home, run_id) == "FAILED"
    time.sleep(1)
    assert pipeline_pids(home) == []
