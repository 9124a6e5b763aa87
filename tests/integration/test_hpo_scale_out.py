"""Scale-out: several `mlpilot worker` processes on one journal study, and a local Dask cluster."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import MLPILOT
from test_hpo_support import load_study, owner_pid, prepared_run, tracked_logger

pytestmark = pytest.mark.integration


def _start_study(home: Path, data: Path, name: str, trials: int, logger: object = None) -> None:
    from mlpilot.platform.ml.hpo.optimize import optimize

    run = prepared_run(data, home / name, logger=logger)
    optimize(
        run,
        model="linear",
        trials=trials,
        metric="rmse",
        timeout_s=None,
        early_stopping=False,
        warm_start=False,
        study_name=name,
        plots=False,
    )


@pytest.mark.slow
def test_two_workers_share_one_journal_study(home: Path, sales_csv: Path) -> None:
    from mlflow import MlflowClient

    logger = tracked_logger(home)
    _start_study(home, sales_csv, "shared", trials=3, logger=logger)
    command = [MLPILOT, "worker", "--study", "shared", "--trials", "6", "--json"]
    workers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    reports = []
    for proc in workers:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    assert [r["ran"] for r in reports] == [6, 6]

    study = load_study("shared")
    numbers = [t.number for t in study.trials]
    assert len(numbers) == 15 and len(set(numbers)) == 15 and sorted(numbers) == list(range(15))
    pids = {owner_pid(t) for t in study.trials if t.number >= 3}
    assert pids == {p.pid for p in workers}  # each worker ran (and owned) its own trials
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in study.trials)

    # the workers logged their trials as nested runs of the study's parent run
    client = MlflowClient(logger.tracking_uri)
    children = client.search_runs(
        [logger.experiment_id], f"tags.mlflow.parentRunId = '{logger.run_id}'", max_results=100
    )
    by_worker = [
        c
        for c in children
        if c.data.tags.get("mlpilot.worker", "").endswith(tuple(f":{p.pid}" for p in workers))
    ]
    assert len(by_worker) == 12
    assert client.get_run(logger.run_id).data.metrics["hpo_trials"] == 15


@pytest.mark.slow
def test_a_local_dask_cluster_runs_the_trials(home: Path, sales_csv: Path) -> None:
    from distributed import Client, LocalCluster

    from mlpilot.platform.ml.hpo.optimize import optimize

    run = prepared_run(sales_csv, home / "dask")
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        dask_pids = set(client.run(os.getpid).values())
        optimize(
            run,
            model="linear",
            trials=8,
            metric="rmse",
            timeout_s=None,
            early_stopping=False,
            warm_start=False,
            study_name="on-dask",
            plots=False,
            dask_client=client,
        )
    study = load_study("on-dask")
    assert len(study.trials) == 8 and run.result.study["n_trials"] == 8
    assert sorted(t.number for t in study.trials) == list(range(8))
    owners = {owner_pid(t) for t in study.trials}
    assert owners <= dask_pids and len(owners) == 2  # both Dask workers ran trials
    assert os.getpid() not in owners
    # the driver watched the storage and reported every trial as it finished
    events = [json.loads(line) for line in (home / "dask" / "events.jsonl").open()]
    assert sorted(e["n"] for e in events if e["type"] == "trial") == list(range(1, 9))
