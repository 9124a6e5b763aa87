"""A worker killed with SIGKILL mid-trial: its trial ends FAIL and the study goes on."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, run_cli
from test_hpo_support import load_study, owner_pid, prepared_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _start_rf_study(home: Path, data: Path, storage: str) -> None:
    from mlpilot.platform.ml.hpo.optimize import optimize

    optimize(
        prepared_run(data, home / "creator"),
        model="rf",  # random forests take long enough to be caught mid-trial
        trials=1,
        metric="rmse",
        timeout_s=None,
        early_stopping=False,
        warm_start=False,
        study_name="crash",
        storage=storage,
        plots=False,
    )


def _running_trial(study: Any, pid: int) -> Any:
    for trial in study.get_trials(deepcopy=False):
        if trial.state.name == "RUNNING" and owner_pid(trial) == pid and _beating(study, trial):
            return trial
    return None


def _beating(study: Any, trial: Any) -> bool:
    """With RDB storage, whether the trial's first heartbeat is in (Optuna's heartbeat thread
    starts with the trial; a process killed before it beats once leaves nothing to go stale,
    and only the pid reaper catches that)."""
    url = getattr(study._storage, "url", None)
    if not url:
        return True
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        row = db.execute(
            "SELECT 1 FROM trial_heartbeats WHERE trial_id = ?", (trial._trial_id,)
        ).fetchone()
    return row is not None


def _kill_mid_trial(start_worker: Any, storage: str) -> tuple[subprocess.Popen, int]:
    """SIGKILL a worker while one of its trials is RUNNING: the process and that trial's number.

    The kill comes straight after a read that saw the trial running (freezing the worker
    first could freeze it inside a sqlite write, locking every reader out). A trial that
    finished in between is seen as such once the process is dead; then a new worker starts.
    """
    study = load_study("crash", storage)  # one storage object: it re-reads on every call
    deadline = time.monotonic() + 180
    proc = start_worker()
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        seen = _running_trial(study, proc.pid)
        if seen is not None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            if study.trials[seen.number].state.name == "RUNNING":
                return proc, seen.number
            proc = start_worker()
        time.sleep(0.1)
    raise AssertionError("the worker never ran a trial")


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_killed_workers_trial_ends_fail(kind: str, home: Path, sales_csv: Path) -> None:
    from mlpilot.platform.ml.hpo import open_storage
    from mlpilot.platform.ml.hpo.storage import FAIL_REASON_ATTR, fail_stale

    storage = str(home / "optuna" / "journal.log")
    if kind == "sqlite":
        home.mkdir(parents=True, exist_ok=True)
        storage = f"sqlite:///{home / 'optuna.db'}"
    _start_rf_study(home, sales_csv, storage)

    def start_worker() -> subprocess.Popen:
        return subprocess.Popen(
            [MLPILOT, "worker", "--study", "crash", "--storage", storage, "--trials", "50"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    proc, killed = _kill_mid_trial(start_worker, storage)
    assert load_study("crash", storage).trials[killed].state.name == "RUNNING"

    if kind == "sqlite":
        # RDB storage: the heartbeat stopped with the process; after the grace period the
        # trial is stale and fail_stale_trials marks it FAIL (here with a 1 s grace period)
        import optuna

        time.sleep(2.5)
        study = optuna.load_study(
            study_name="crash", storage=open_storage(storage, heartbeat_interval=1, grace_period=1)
        )
        assert fail_stale(study) == [killed]
    # the next worker to join fails what is left and carries on
    done = run_cli("worker", "--study", "crash", "--storage", storage, "--trials", "1", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["reaped"] == ([killed] if kind == "journal" else [])
    assert report["ran"] == 1

    study = load_study("crash", storage)
    trial = study.trials[killed]
    assert trial.state.name == "FAIL"
    if kind == "journal":
        assert f"pid {proc.pid}" in trial.user_attrs[FAIL_REASON_ATTR]
    assert not [t for t in study.trials if t.state.name == "RUNNING"]
    assert sum(t.state.name == "COMPLETE" for t in study.trials) >= 2  # the study goes on
