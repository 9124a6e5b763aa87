"""The outbox: metadata writes that failed because the store was down, kept for replay.

``RecordingStore`` wraps a store. A write that fails with the store unreachable is
appended to a JSON-lines file under ``$MLPILOT_HOME``; once a run has writes waiting
there, its later writes queue behind them so they replay in order. ``replay`` applies
the queue (writes are idempotent, so replaying twice is harmless). Appends and replays
hold an advisory lock on a sibling ``.lock`` file, so several processes can share one
outbox without losing a write that lands while another process replays.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from mlpilot.tracking.metadata._base import MetadataStore, StoreUnavailable, utcnow

logger = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$date": value.isoformat()}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$date"}:
            return datetime.fromisoformat(value["$date"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _line(op: dict[str, Any]) -> str:
    return json.dumps(_encode(op), ensure_ascii=False, default=str) + "\n"


class Outbox:
    """A JSON-lines queue of write operations, safe to share between processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.rejected_path = path.with_name(path.stem + ".rejected.jsonl")
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.lock_path.open("a") as handle:
                if fcntl:
                    fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    if fcntl:
                        fcntl.flock(handle, fcntl.LOCK_UN)

    def append(self, op: dict[str, Any]) -> None:
        op = {**op, "queued_at": op.get("queued_at") or utcnow()}
        with self._locked(), self.path.open("a", encoding="utf-8") as fh:
            fh.write(_line(op))
            fh.flush()
            os.fsync(fh.fileno())

    def pending(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        ops = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    ops.append(_decode(json.loads(line)))
                except json.JSONDecodeError:
                    continue  # a torn last line from a crash: skip it
        return ops

    def pending_run_ids(self) -> set[str]:
        return {op["run_id"] for op in self.pending() if op.get("run_id")}

    def replay(self, store: MetadataStore) -> int:
        """Apply queued writes in order; keep what still fails. Returns how many applied.

        A write the store refuses for another reason than connectivity (a bad document)
        would block the queue forever: it is moved to ``outbox.rejected.jsonl`` instead.
        """
        with self._locked():
            ops = self.pending()
            applied = 0
            for i, op in enumerate(ops):
                try:
                    _apply(store, op)
                except StoreUnavailable:
                    self._rewrite(ops[i:])
                    return applied
                except Exception as exc:
                    logger.debug("an outbox entry could not be replayed yet: %s", exc)
                    self._reject(op, exc)
                    continue
                applied += 1
            self._rewrite([])
            return applied

    def _reject(self, op: dict[str, Any], exc: Exception) -> None:
        record = {**op, "rejected": f"{type(exc).__name__}: {str(exc)[:300]}"}
        with self.rejected_path.open("a", encoding="utf-8") as fh:
            fh.write(_line(record))
        print(
            f"warning: the metadata store refused a queued {op.get('op')} write "
            f"({type(exc).__name__}); kept in {self.rejected_path}",
            file=sys.stderr,
        )

    def _rewrite(self, ops: list[dict[str, Any]]) -> None:
        if not ops:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(_line(op) for op in ops), encoding="utf-8")
        tmp.replace(self.path)


def _apply(store: MetadataStore, op: dict[str, Any]) -> None:
    kind = op["op"]
    if kind == "create_run":
        store.create_run(op["run_id"], dict(op["fields"]), op.get("events", []))
    elif kind == "update_run":
        store.update_run(op["run_id"], op["fields"], op.get("events", []))
    elif kind == "save_session":
        store.save_session(op["session_id"], op["messages"], op["context"])
    elif kind == "save_benchmark":
        store.save_benchmark(op["benchmark_id"], op["doc"])
    else:
        raise ValueError(f"unknown outbox operation {kind!r}")


class RecordingStore:
    """A store whose writes never fail for connectivity: they fall back to the outbox.

    Reads go straight to the wrapped store and raise ``StoreUnavailable`` when it is down.
    """

    def __init__(
        self, store: MetadataStore | None, outbox: Outbox, *, store_error: str | None = None
    ) -> None:
        self.store = store
        self.outbox = outbox
        self.store_error = store_error
        self.queued = 0
        self._warned = False
        self._queued_runs: set[str] = outbox.pending_run_ids()

    @property
    def kind(self) -> str:
        return self.store.kind if self.store else "unavailable"

    def _write(self, op: dict[str, Any], run_id: str | None = None) -> None:
        if self.store is not None and (run_id is None or run_id not in self._queued_runs):
            try:
                _apply(self.store, op)
                return
            except StoreUnavailable as exc:
                self.store_error = exc.message
        self.outbox.append(op)
        self.queued += 1
        if run_id:
            self._queued_runs.add(run_id)
        if not self._warned:
            self._warned = True
            print(
                f"warning: metadata store unavailable ({self.store_error}); writes are kept in "
                f"{self.outbox.path} — run `mlpilot doctor --repair` once it is back",
                file=sys.stderr,
            )

    def create_run(
        self,
        run_id: str,
        fields: dict[str, Any],
        events: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> None:
        self._write(
            {"op": "create_run", "run_id": run_id, "fields": fields, "events": list(events)}, run_id
        )

    def update_run(
        self,
        run_id: str,
        fields: dict[str, Any],
        events: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> None:
        self._write(
            {"op": "update_run", "run_id": run_id, "fields": fields, "events": list(events)}, run_id
        )

    def save_session(
        self, session_id: str, messages: list[dict[str, Any]], context: dict[str, Any]
    ) -> None:
        self._write(
            {
                "op": "save_session",
                "session_id": session_id,
                "messages": messages,
                "context": context,
            }
        )

    def save_benchmark(self, benchmark_id: str, doc: dict[str, Any]) -> None:
        self._write({"op": "save_benchmark", "benchmark_id": benchmark_id, "doc": doc})

    def flush(self) -> int:
        """Try to replay the outbox now (e.g. at the end of a run)."""
        if self.store is None or not self.outbox.path.exists():
            return 0
        try:
            applied = self.outbox.replay(self.store)
        finally:
            self._queued_runs = self.outbox.pending_run_ids()
        return applied

    def __getattr__(self, name: str) -> Any:
        # reads go straight to the store (and fail clearly when it is down)
        if name.startswith("__") or name in ("store", "outbox", "store_error"):
            raise AttributeError(name)
        if self.store is None:
            raise StoreUnavailable(self.store_error or "metadata store unavailable")
        return getattr(self.store, name)
