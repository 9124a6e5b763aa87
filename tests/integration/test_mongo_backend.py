"""The pymongo path over TCP against a real MongoDB-wire-protocol server (nx-27017)."""

from __future__ import annotations

import json
from pathlib import Path

import pymongo
import pytest
from helpers import NxServer, run_cli

pytestmark = pytest.mark.integration


def test_store_round_trip_over_tcp(nx_server: NxServer) -> None:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect, new_event

    store = connect(
        Settings.from_env(
            {
                "MLPILOT_HOME": "/tmp/unused",
                "MLPILOT_MONGO_URI": nx_server.uri,
                "MLPILOT_MONGO_DB": "unit",
            }
        )
    )
    assert store.kind == "mongodb"
    event = new_event("RECEIVED", "hi")
    store.create_run("tcp-1", {"status": "RECEIVED", "experiment": "e"}, [event])
    store.update_run(
        "tcp-1",
        {"status": "SUCCEEDED", "metrics": {"test_rmse": 2.0}},
        [event, new_event("SUCCEEDED")],
    )
    doc = store.get_run("tcp-1")
    assert doc["status"] == "SUCCEEDED" and [e["state"] for e in doc["events"]] == [
        "RECEIVED",
        "SUCCEEDED",
    ]
    names = {ix["name"] for ix in pymongo.MongoClient(nx_server.uri)["unit"]["runs"].list_indexes()}
    assert any("session_id" in n for n in names) and any("status" in n for n in names)


@pytest.mark.slow
def test_a_run_writes_its_document_to_the_server(
    tmp_path: Path, sales_csv: Path, nx_server: NxServer
) -> None:
    env = {
        "MLPILOT_HOME": str(tmp_path / "home"),
        "MLPILOT_LLM": "offline",
        "MLPILOT_MONGO_URI": nx_server.uri,
        "MLPILOT_MONGO_DB": "e2e",
        "MLFLOW_TRACKING_URI": "",
    }
    done = run_cli(
        "run",
        "quick baseline with ridge regression to predict sales",
        "--data",
        str(sales_csv),
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    doc = pymongo.MongoClient(nx_server.uri)["e2e"]["runs"].find_one({"_id": outcome["run_id"]})
    assert doc is not None and doc["status"] == "SUCCEEDED"
    assert doc["plan"]["template"] == "quick-baseline" and doc["prompt"].startswith(
        "quick baseline"
    )
    assert [e["state"] for e in doc["events"]][-1] == "SUCCEEDED"
    assert not (tmp_path / "home" / "private" / "metadata.db").exists(), (
        "the embedded store was used instead of the server"
    )
    session = pymongo.MongoClient(nx_server.uri)["e2e"]["sessions"].find_one(
        {"_id": outcome["session_id"]}
    )
    assert session["context"]["target"] == "sales" and session["messages"][0]["role"] == "user"
