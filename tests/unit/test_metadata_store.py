"""The embedded metadata store: idempotent writes, rev guard, events, outbox replay."""

from __future__ import annotations

from pathlib import Path

from mlpilot.tracking.metadata import Outbox, RecordingStore, new_event
from mlpilot.tracking.metadata._embedded import EmbeddedStore


def test_create_update_and_replayed_events_are_idempotent(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "m.db")
    store.ensure_indexes()
    first = new_event("RECEIVED", "hello")
    store.create_run("r1", {"status": "RECEIVED", "experiment": "e"}, [first])
    store.create_run("r1", {"status": "RECEIVED", "experiment": "e"}, [first])  # replayed
    second = new_event("RUNNING", "go")
    store.update_run("r1", {"status": "RUNNING", "metrics.test_rmse": 1.5}, [second])
    store.update_run("r1", {"status": "RUNNING"}, [second])  # replayed
    doc = store.get_run("r1")
    assert doc["status"] == "RUNNING" and doc["metrics"] == {"test_rmse": 1.5}
    assert [e["state"] for e in doc["events"]] == ["RECEIVED", "RUNNING"]
    assert doc["rev"] >= 4 and doc["created_at"] <= doc["updated_at"]


def test_writes_queue_in_the_outbox_and_replay_in_order(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.jsonl")
    down = RecordingStore(None, outbox, store_error="connection refused")
    down.create_run("r2", {"status": "RECEIVED"}, [new_event("RECEIVED")])
    down.update_run("r2", {"status": "SUCCEEDED"}, [new_event("SUCCEEDED")])
    assert len(outbox.pending()) == 2
    store = EmbeddedStore(tmp_path / "m.db")
    assert outbox.replay(store) == 2 and outbox.pending() == []
    doc = store.get_run("r2")
    assert doc["status"] == "SUCCEEDED" and [e["state"] for e in doc["events"]] == [
        "RECEIVED",
        "SUCCEEDED",
    ]
    assert outbox.replay(store) == 0
