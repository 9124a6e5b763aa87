"""Tracking against a real ``mlflow server`` and a MongoDB-protocol server (nx-27017).

Eight runs launched at once all end as complete documents; the registry goes run →
register → promote → predict by alias with lineage shown; runs are listed, shown and
compared by id prefix; an unreachable tracking server fails fast with one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from io import StringIO
from pathlib import Path

import pandas as pd
import psutil
import pymongo
import pytest
from helpers import (
    MLPILOT,
    MlflowServer,
    NxServer,
    free_port,
    invoke_cli,
    run_cli,
    tracking_env,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMPT = "quick baseline with ridge regression to predict sales"
STATES = ["RECEIVED", "PLANNING", "VALIDATING", "GENERATING", "RUNNING", "RECORDING", "SUCCEEDED"]
CONCURRENT = 8


@pytest.fixture(scope="module")
def eight_runs(
    tmp_path_factory: pytest.TempPathFactory, mlflow_server: MlflowServer, nx_server: NxServer
) -> dict:
    """Eight ``mlpilot run`` processes started together, sharing one MLPILOT_HOME."""
    from mlpilot.platform.datasets import make_sales, write_table

    base = tmp_path_factory.mktemp("concurrent")
    data = write_table(make_sales(400, seed=5), base / "small.csv")
    experiment = f"concurrent-{uuid.uuid4().hex[:8]}"
    env = tracking_env(base / "home", mlflow_server.uri, nx_server.uri)
    env = {**os.environ, **env}
    procs = [
        subprocess.Popen(
            [MLPILOT, "run", PROMPT, "--data", str(data), "--experiment", experiment, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=base,
        )
        for _ in range(CONCURRENT)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        results.append((proc.returncode, out, err))
    return {
        "results": results,
        "experiment": experiment,
        "data": data,
        "base": base,
        "env": tracking_env(base / "home", mlflow_server.uri, nx_server.uri),
        "mlflow": mlflow_server,
        "nx": nx_server,
    }


def _outcomes(eight_runs: dict) -> list[dict]:
    for code, _out, err in eight_runs["results"]:
        assert code == 0, err[-2000:]
    return [json.loads(out) for _, out, _ in eight_runs["results"]]


def test_eight_concurrent_runs_leave_eight_complete_documents(eight_runs: dict) -> None:
    from mlflow import MlflowClient

    outcomes = _outcomes(eight_runs)
    ids = {o["run_id"] for o in outcomes}
    assert len(ids) == CONCURRENT
    runs = pymongo.MongoClient(eight_runs["nx"].uri)["mlpilot"]["runs"]
    docs = list(runs.find({"experiment": eight_runs["experiment"]}))
    assert {d["_id"] for d in docs} == ids
    client = MlflowClient(eight_runs["mlflow"].uri)
    for doc in docs:
        assert doc["status"] == "SUCCEEDED", doc.get("error")
        assert doc["plan"]["template"] == "quick-baseline" and doc["prompt"] == PROMPT
        states = [e["state"] for e in doc["events"]]
        assert [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]] == STATES
        assert len({e["id"] for e in doc["events"]}) == len(doc["events"]), "an event twice"
        times = [e["at"] for e in doc["events"]]
        assert times == sorted(times)
        # every write bumps rev once; each event arrived with one write, except the five
        # (RECEIVED … RUNNING) the document is created with: the pipeline starts first
        assert isinstance(doc["rev"], int) and doc["rev"] >= len(doc["events"]) - 4
        assert doc["engine"]["used"] == "cpu" and doc["timings"]["total"] > 0
        run = client.get_run(doc["_id"])
        assert run.info.status == "FINISHED"
        assert doc["metrics"] == pytest.approx(run.data.metrics)
        assert run.data.tags["mlpilot.engine"] == "cpu (requested cpu)"
    sessions = pymongo.MongoClient(eight_runs["nx"].uri)["mlpilot"]["sessions"]
    assert sessions.count_documents({"_id": {"$in": [o["session_id"] for o in outcomes]}}) == 8
    assert not (eight_runs["base"] / "home" / "private" / "outbox.jsonl").exists()


def test_run_register_promote_predict_by_alias_with_lineage(eight_runs: dict) -> None:
    outcomes = _outcomes(eight_runs)
    env, base = eight_runs["env"], eight_runs["base"]
    name = f"sales-{uuid.uuid4().hex[:6]}"
    first, second = outcomes[0]["run_id"], outcomes[1]["run_id"]

    done = invoke_cli("models", "register", first[:10], "--name", name, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "name": name,
        "version": "1",
        "alias": None,
        "source_run": first,
        "model_uri": outcomes[0]["model_uri"],
    }
    done = invoke_cli(
        "models", "register", second, "--name", name, "--alias", "challenger", env=env
    )
    assert done.returncode == 0 and "version 2 as @challenger" in done.stdout, done.stderr
    done = invoke_cli("models", "promote", name, "1", "--alias", "champion", env=env)
    assert done.returncode == 0 and f"{name}@champion → version 1" in done.stdout, done.stderr

    versions = json.loads(invoke_cli("models", "versions", name, "--json", env=env).stdout)
    assert [(v["version"], v["aliases"]) for v in versions] == [
        ("2", ["challenger"]),
        ("1", ["champion"]),
    ]
    listed = json.loads(invoke_cli("models", "list", "--json", env=env).stdout)
    mine = next(m for m in listed if m["name"] == name)
    assert mine["versions"] == 2 and mine["aliases"] == {"challenger": "2", "champion": "1"}

    shown = invoke_cli("models", "show", f"{name}@champion", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    lineage = info["lineage"]
    assert info["version"] == "1" and info["aliases"] == ["champion"]
    assert lineage["source_run"] == first and lineage["prompt"] == PROMPT
    assert lineage["plan"]["steps"][0]["tool"] == "load_data"
    assert lineage["dataset_fingerprint"].startswith("sha256:")
    assert lineage["dataset"]["rows"] == 400
    assert lineage["metrics"]["test_rmse"] == pytest.approx(outcomes[0]["metrics"]["test_rmse"])
    assert info["tags"]["mlpilot.source_run"] == first and info["tags"]["mlpilot.metric"]
    human = invoke_cli("models", "show", f"{name}@champion", env=env).stdout
    assert first in human and PROMPT in human and "load_data(" in human

    raw = pd.read_csv(eight_runs["data"]).drop(columns=["sales"]).head(25)
    rows = base / "rows.csv"
    raw.to_csv(rows, index=False)
    predicted = run_cli(
        "predict", "--model", f"models:/{name}@champion", "--data", str(rows), env=env, cwd=base
    )
    assert predicted.returncode == 0, predicted.stderr
    table = pd.read_csv(StringIO(predicted.stdout))
    assert len(table) == 25 and table["prediction"].notna().all()
    assert "Downloading artifacts" not in predicted.stderr

    doc = pymongo.MongoClient(eight_runs["nx"].uri)["mlpilot"]["runs"].find_one({"_id": first})
    assert doc["model"]["registered_name"] == name and doc["model"]["version"] == "1"


def test_runs_list_show_and_compare_by_prefix(eight_runs: dict) -> None:
    outcomes = _outcomes(eight_runs)
    env, experiment = eight_runs["env"], eight_runs["experiment"]
    listed = invoke_cli("runs", "list", "--experiment", experiment, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == CONCURRENT and {r["status"] for r in rows} == {"SUCCEEDED"}
    assert {r["run_id"] for r in rows} == {o["run_id"] for o in outcomes}
    limited = json.loads(
        invoke_cli("runs", "list", "-e", experiment, "--limit", "3", "--json", env=env).stdout
    )
    assert len(limited) == 3
    assert (
        json.loads(
            invoke_cli(
                "runs", "list", "-e", experiment, "--status", "failed", "--json", env=env
            ).stdout
        )
        == []
    )

    run_id = outcomes[2]["run_id"]
    shown = invoke_cli("runs", "show", run_id[:8], "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    assert info["run_id"] == run_id and info["status"] == "SUCCEEDED"
    assert info["plan"]["template"] == "quick-baseline"
    assert Path(info["pipeline_path"]).is_file()
    assert info["metrics"]["test_rmse"] == pytest.approx(outcomes[2]["metrics"]["test_rmse"])
    assert info["timings"]["total"] > 0 and info["events"][-1]["state"] == "SUCCEEDED"
    assert info["sources"] == ["mongodb", "mlflow"]
    human = invoke_cli("runs", "show", run_id[:8], env=env)
    assert "pipeline.py" in human.stdout and "RECORDING" in human.stdout

    a, b = outcomes[3]["run_id"], outcomes[4]["run_id"]
    compared = invoke_cli("runs", "compare", a[:8], b[:8], "--json", env=env)
    assert compared.returncode == 0, compared.stderr
    result = json.loads(compared.stdout)
    assert [r["run_id"] for r in result["runs"]] == [a, b]
    assert "test_rmse" in result["metric_keys"] and "total" in result["stages"]
    table = invoke_cli("runs", "compare", a[:8], b[:8], env=env).stdout
    assert a[:12] in table and b[:12] in table and "test_rmse" in table

    bad = invoke_cli("runs", "show", "zzzz", env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("error: no run with id 'zzzz'")


def test_unreachable_tracking_server_fails_fast_with_one_line(
    tmp_path: Path, sales_csv: Path, nx_server: NxServer
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    experiment = f"unreachable-{uuid.uuid4().hex[:8]}"
    env = tracking_env(tmp_path / "home", closed, nx_server.uri)
    started = time.monotonic()
    done = run_cli(
        "run", PROMPT, "--data", str(sales_csv), "--experiment", experiment, env=env, cwd=tmp_path
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1 and elapsed < 10, (elapsed, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and closed in errors[0] and "unreachable" in errors[0]
    assert "Traceback" not in done.stderr
    # no MLflow run could be created, so no document either: nothing is left RUNNING
    runs = pymongo.MongoClient(nx_server.uri)["mlpilot"]["runs"]
    assert runs.count_documents({"experiment": experiment}) == 0
    # the pipeline started while MLflow was being reached is stopped and its folder removed
    home = tmp_path / "home"
    assert not list((home / "runs").glob("*")) if (home / "runs").exists() else True
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any(str(home) in part for part in p.info["cmdline"] or [])
    ]
    assert left == [], "a pipeline process outlived its failed run"

    doctor = invoke_cli("doctor", "--json", env=env)
    assert doctor.returncode == 1
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["MLflow"]["status"] == "fail" and closed in checks["MLflow"]["detail"]
    assert checks["MongoDB"]["status"] == "ok" and checks["LLM"]["status"] == "info"
    assert "offline planner in use" in checks["LLM"]["detail"]
