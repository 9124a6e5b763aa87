"""The metadata store under concurrency and failure: rev-guarded writes, the outbox, replay."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from mlpilot.tracking.metadata import (
    MetadataStore,
    Outbox,
    RecordingStore,
    StoreUnavailable,
    new_event,
)
from mlpilot.tracking.metadata._embedded import EmbeddedStore

WRITERS, WRITES = 4, 15


def _hammer(path: str, worker: int) -> None:
    store = EmbeddedStore(Path(path))
    for i in range(WRITES):
        store.update_run(
            "shared", {f"progress.w{worker}": i}, [new_event("RUNNING", f"{worker}/{i}")]
        )
    store.close()


def test_concurrent_processes_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = EmbeddedStore(path)
    store.ensure_indexes()
    store.create_run("shared", {"status": "RUNNING"}, [new_event("RECEIVED")])
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_hammer, args=(str(path), w)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    doc = store.get_run("shared")
    assert len(doc["events"]) == 1 + WRITERS * WRITES
    assert len({e["id"] for e in doc["events"]}) == len(doc["events"])
    assert doc["rev"] == 1 + WRITERS * WRITES
    assert doc["progress"] == {f"w{w}": WRITES - 1 for w in range(WRITERS)}


def test_replayed_create_merges_events_once_and_missing_rev_is_handled(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "m.db")
    first, second = new_event("RECEIVED"), new_event("PLANNING")
    store.create_run("r1", {"status": "RECEIVED"}, [first])
    store.create_run("r1", {"status": "PLANNING"}, [first, second])  # replayed, with more
    store.create_run("r1", {"status": "PLANNING"}, [first, second])
    doc = store.get_run("r1")
    assert [e["state"] for e in doc["events"]] == ["RECEIVED", "PLANNING"]
    assert doc["status"] == "PLANNING"

    store.collection("runs").insert_one({"_id": "legacy", "status": "RUNNING", "events": []})
    store.update_run("legacy", {"status": "SUCCEEDED"}, [new_event("SUCCEEDED")])
    doc = store.get_run("legacy")
    assert doc["status"] == "SUCCEEDED" and doc["rev"] == 1 and len(doc["events"]) == 1


class FlakyStore(MetadataStore):
    """An embedded store that is 'down' while ``down`` is set."""

    kind = "flaky"

    def __init__(self, path: Path) -> None:
        self.inner = EmbeddedStore(path)
        self.down = False

    def collection(self, name: str) -> Any:
        if self.down:
            raise ConnectionError("connection refused")
        return self.inner.collection(name)

    def _atomic(self) -> Any:
        return self.inner._atomic()

    def _unavailable(self, exc: BaseException) -> bool:
        return isinstance(exc, ConnectionError)


def test_writes_queue_while_down_and_replay_in_order(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path / "m.db")
    outbox = Outbox(tmp_path / "outbox.jsonl")
    recording = RecordingStore(store, outbox)
    recording.create_run("r2", {"status": "PLANNING"}, [new_event("PLANNING")])
    store.down = True
    recording.update_run("r2", {"status": "RUNNING"}, [new_event("RUNNING")])
    store.down = False  # back, but r2 has writes waiting: its next ones queue behind them
    recording.update_run(
        "r2", {"status": "SUCCEEDED", "metrics": {"test_rmse": 1.0}}, [new_event("SUCCEEDED")]
    )
    recording.save_session("s1", [{"role": "user", "content": "hi"}], {})
    assert [op["op"] for op in outbox.pending()] == ["update_run", "update_run"]
    assert recording.get_run("r2")["status"] == "PLANNING"
    assert recording.get_session("s1") is not None  # unrelated writes go straight through

    assert recording.flush() == 2
    doc = store.get_run("r2")
    assert doc["status"] == "SUCCEEDED" and doc["metrics"] == {"test_rmse": 1.0}
    assert [e["state"] for e in doc["events"]] == ["PLANNING", "RUNNING", "SUCCEEDED"]
    assert not outbox.path.exists()
    recording.update_run("r2", {"note": "direct again"})
    assert store.get_run("r2")["note"] == "direct again"


def test_replay_stops_at_the_first_unreachable_write_and_sets_aside_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outbox = Outbox(tmp_path / "outbox.jsonl")
    outbox.append(
        {"op": "create_run", "run_id": "a", "fields": {"status": "RUNNING"}, "events": []}
    )
    outbox.append({"op": "explode", "run_id": "a"})
    outbox.append(
        {"op": "update_run", "run_id": "a", "fields": {"status": "SUCCEEDED"}, "events": []}
    )
    store = FlakyStore(tmp_path / "m.db")
    store.down = True
    assert outbox.replay(store) == 0 and len(outbox.pending()) == 3
    store.down = False
    assert outbox.replay(store) == 2
    assert store.get_run("a")["status"] == "SUCCEEDED" and outbox.pending() == []
    rejected = outbox.rejected_path.read_text()
    assert '"explode"' in rejected and "unknown outbox operation" in rejected
    assert "refused a queued explode write" in capsys.readouterr().err


def _append_many(path: str, worker: int) -> None:
    outbox = Outbox(Path(path))
    for i in range(50):
        outbox.append(
            {"op": "update_run", "run_id": f"w{worker}", "fields": {"i": i}, "events": []}
        )


def test_appends_during_a_replay_are_never_lost(tmp_path: Path) -> None:
    path = tmp_path / "outbox.jsonl"
    store = EmbeddedStore(tmp_path / "m.db")
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_append_many, args=(str(path), w)) for w in range(3)]
    for proc in procs:
        proc.start()
    outbox, applied = Outbox(path), 0
    while any(p.is_alive() for p in procs):
        applied += outbox.replay(store)
    for proc in procs:
        proc.join(30)
    applied += outbox.replay(store)
    assert applied == 150
    assert {store.get_run(f"w{w}")["i"] for w in range(3)} == {49}


def test_unreachable_store_message_is_one_short_line() -> None:
    from mlpilot.tracking.metadata._pymongo import MongoStore

    store = MongoStore("mongodb://user:secret@127.0.0.1:1", "db", timeout_ms=200)
    assert "secret" not in store.describe() and "user:***@" in store.describe()
    with pytest.raises(StoreUnavailable) as caught:
        store.ping()
    assert "configured timeouts" not in caught.value.message
    assert len(caught.value.message) < 260
