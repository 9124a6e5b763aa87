"""MongoDB stopped in the middle of a run: the run completes, its writes wait in the outbox,
and ``mlpilot doctor --repair`` after a restart makes MongoDB agree with MLflow."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pymongo
import pytest
from helpers import MLPILOT, MlflowServer, NxServer, invoke_cli, read_jsonl, tracking_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMPT = "find the key features driving sales and train a random forest"


def _latest_status(uri: str) -> str | None:
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=500)
    try:
        doc = client["mlpilot"]["runs"].find_one({}, sort=[("created_at", -1)])
        return doc["status"] if doc else None
    except pymongo.errors.PyMongoError:
        return None
    finally:
        client.close()


def test_mongo_down_mid_run_then_doctor_repair(
    tmp_path: Path, sales_csv: Path, mlflow_server: MlflowServer
) -> None:
    from mlflow import MlflowClient

    (tmp_path / "nx").mkdir()
    nx = NxServer(tmp_path / "nx")
    nx.start()
    try:
        home = tmp_path / "home"
        env = tracking_env(home, mlflow_server.uri, nx.uri, MLPILOT_MONGO_TIMEOUT_MS="1000")
        proc = subprocess.Popen(
            [MLPILOT, "run", PROMPT, "--data", str(sales_csv), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            cwd=tmp_path,
        )
        deadline = time.monotonic() + 120
        while _latest_status(nx.uri) != "RUNNING":
            assert proc.poll() is None, "the run ended before MongoDB could be stopped"
            assert time.monotonic() < deadline, "the run never reached RUNNING"
            time.sleep(0.1)
        nx.stop()  # MongoDB goes away while the pipeline runs
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        outcome = json.loads(out)
        run_id = outcome["run_id"]
        assert outcome["status"] == "SUCCEEDED"
        assert "writes are kept in" in err and "doctor --repair" in err

        client = MlflowClient(mlflow_server.uri)
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        queued = read_jsonl(home / "private" / "outbox.jsonl")
        mine = [op for op in queued if op.get("run_id") == run_id]
        assert mine and mine[-1]["fields"]["status"] == "SUCCEEDED"
        assert any("metrics" in op["fields"] for op in mine)
        assert any(op["op"] == "save_session" for op in queued)

        nx.start()  # same database file, same port
        runs = pymongo.MongoClient(nx.uri)["mlpilot"]["runs"]
        assert runs.find_one({"_id": run_id})["status"] == "RUNNING"  # stale until repaired

        checks = json.loads(invoke_cli("doctor", "--json", env=env).stdout)["checks"]
        outbox = next(c for c in checks if c["name"] == "outbox")
        assert outbox["status"] == "warn" and str(len(queued)) in outbox["detail"]

        repaired = invoke_cli("doctor", "--repair", "--json", env=env)
        assert repaired.returncode == 0, repaired.stderr
        report = json.loads(repaired.stdout)["repair"]
        assert report["replayed"] == len(queued) and report["still_queued"] == 0
        assert not (home / "private" / "outbox.jsonl").exists()
        doc = runs.find_one({"_id": run_id})
        assert doc["status"] == "SUCCEEDED"
        assert doc["metrics"] == pytest.approx(run.data.metrics)
        assert [e["state"] for e in doc["events"]][-1] == "SUCCEEDED"
        assert len({e["id"] for e in doc["events"]}) == len(doc["events"])
        assert not [c for c in report["changes"] if c["run_id"] == run_id]  # replay sufficed

        # a lost document is rebuilt from MLflow: plan, prompt, metrics, status
        runs.delete_one({"_id": run_id})
        report = json.loads(invoke_cli("doctor", "--repair", "--json", env=env).stdout)["repair"]
        assert {"run_id": run_id, "action": "created"}.items() <= next(
            c for c in report["changes"] if c["run_id"] == run_id
        ).items()
        rebuilt = runs.find_one({"_id": run_id})
        assert rebuilt["status"] == "SUCCEEDED" and rebuilt["prompt"] == PROMPT
        assert rebuilt["plan"] == doc["plan"] and rebuilt["metrics"] == pytest.approx(
            doc["metrics"]
        )
        assert rebuilt["dataset"]["fingerprint"] == doc["dataset"]["fingerprint"]
        assert rebuilt["engine"]["used"] == "cpu"

        again = json.loads(invoke_cli("doctor", "--repair", "--json", env=env).stdout)["repair"]
        assert not [c for c in again["changes"] if c["run_id"] == run_id]
    finally:
        nx.stop()
