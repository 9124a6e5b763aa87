"""The run-metadata store of DESIGN §5, over any PyMongo-like collection API.

Writes are idempotent: documents are created with ``$setOnInsert`` + ``$set`` and
updated by read-modify-write guarded by ``rev`` (retried on a concurrent change);
events carry ids so a replayed write never appends an event twice. Backends whose
single operations are not atomic across processes (the embedded SQLite file) make each
write one transaction through ``_atomic``.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import re
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)

RUNS = "runs"
SESSIONS = "sessions"
BENCHMARKS = "benchmarks"
TERMINAL_STATES = vocab.TERMINAL_STATES
ACTIVE_STATES = vocab.ACTIVE_STATES
#: columns a run document's ``dataset.schema`` lists (``profile.json`` keeps them all):
#: a wide table's card would not fit a document
SCHEMA_DOC_COLUMNS = 1000
_RETRIES = 20


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_event(state: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex[:12],
        "at": utcnow(),
        "state": state,
        "message": message,
        **extra,
    }


_TIMESTAMPS = ("created_at", "updated_at", "finished_at")


def _as_datetime(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return value
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def revive(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """Timestamps as aware datetimes, whichever backend stored them (neosqlite may return text)."""
    if doc is None:
        return None
    for key in _TIMESTAMPS:
        if key in doc:
            doc[key] = _as_datetime(doc[key])
    for event in doc.get("events", []) or []:
        if isinstance(event, dict) and "at" in event:
            event["at"] = _as_datetime(event["at"])
    for message in doc.get("messages", []) or []:
        if isinstance(message, dict) and "at" in message:
            message["at"] = _as_datetime(message["at"])
    return doc


def _merge_events(
    stored: list[dict[str, Any]], fresh: list[dict[str, Any]] | tuple[dict[str, Any], ...]
) -> list[dict[str, Any]]:
    """``stored`` plus the events of ``fresh`` not seen yet (by id), in order."""
    known = {e.get("id") for e in stored if isinstance(e, dict)}
    merged = list(stored)
    for event in fresh:
        if event.get("id") not in known:
            merged.append(event)
            known.add(event.get("id"))
    return merged


class StoreUnavailable(TrackingError):
    """The metadata store cannot be reached (the write may go to the outbox)."""


class MetadataStore(abc.ABC):
    """Runs, sessions and benchmarks. Subclasses provide collections and error mapping."""

    kind: str = "abstract"

    @abc.abstractmethod
    def collection(self, name: str) -> Any:
        """A PyMongo-like collection."""

    @abc.abstractmethod
    def _unavailable(self, exc: BaseException) -> bool:
        """Is ``exc`` a connectivity failure (rather than a bug or a bad document)?"""

    def _duplicate(self, exc: BaseException) -> bool:
        """Did an upsert lose a race against another insert of the same ``_id``?"""
        return type(exc).__name__ == "DuplicateKeyError"

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """One write as one transaction, where the backend needs it (default: nothing)."""
        yield

    def describe(self) -> str:
        """Where the store lives, without credentials."""
        return self.kind

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def ping(self) -> None:
        self._call(lambda: self.collection(RUNS).count_documents({"_id": "__ping__"}))

    def _call(self, fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:
            if self._unavailable(exc):
                first = (str(exc).splitlines() or [type(exc).__name__])[0]
                reason = first.split(" (configured timeouts")[0].split(", Timeout:")[0]
                raise StoreUnavailable(f"metadata store unreachable: {reason[:200]}") from exc
            raise

    # -- indexes --------------------------------------------------------------------------------
    def ensure_indexes(self) -> None:
        def create() -> None:
            runs = self.collection(RUNS)
            runs.create_index([("session_id", 1)])
            runs.create_index([("experiment", 1), ("created_at", -1)])
            runs.create_index([("status", 1)])
            self.collection(SESSIONS).create_index([("updated_at", -1)])

        self._call(create)

    # -- runs -----------------------------------------------------------------------------------
    def create_run(
        self,
        run_id: str,
        fields: dict[str, Any],
        events: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> None:
        """Create (or, replayed, re-apply) a run document with its first events."""
        fields = dict(fields)
        now = utcnow()
        on_insert = {"created_at": fields.pop("created_at", now), "events": list(events)}

        def write() -> None:
            coll = self.collection(RUNS)
            for _ in range(_RETRIES):
                try:
                    with self._atomic():
                        result = coll.update_one(
                            {"_id": run_id},
                            {
                                "$setOnInsert": on_insert,
                                "$set": {**fields, "updated_at": now},
                                "$inc": {"rev": 1},
                            },
                            upsert=True,
                        )
                except Exception as exc:
                    if self._duplicate(exc):
                        continue  # another writer inserted it first: now it matches
                    raise
                if result.matched_count and events:
                    self._merge_into(coll, run_id, {}, events)  # the document existed already
                return
            raise TrackingError(f"run {run_id}: too many concurrent inserts")

        self._call(write)

    def update_run(
        self,
        run_id: str,
        fields: dict[str, Any],
        events: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> None:
        """Set ``fields`` (dotted paths allowed) and append new ``events``; ``rev`` + 1."""
        self._call(lambda: self._merge_into(self.collection(RUNS), run_id, fields, events))

    def _merge_into(
        self,
        coll: Any,
        run_id: str,
        fields: dict[str, Any],
        events: list[dict[str, Any]] | tuple[dict[str, Any], ...],
    ) -> None:
        for _ in range(_RETRIES):
            with self._atomic():
                doc = coll.find_one({"_id": run_id}, {"rev": 1, "events": 1})
                if doc is None:
                    try:
                        coll.update_one(
                            {"_id": run_id},
                            {
                                "$setOnInsert": {"created_at": utcnow(), "events": []},
                                "$inc": {"rev": 0},
                            },
                            upsert=True,
                        )
                    except Exception as exc:
                        if not self._duplicate(exc):
                            raise
                    continue
                stored = list(doc.get("events") or [])
                merged = _merge_events(stored, events)
                update = {**fields, "updated_at": utcnow()}
                if len(merged) != len(stored):
                    update["events"] = merged
                guard = doc.get("rev", {"$exists": False})
                result = coll.update_one(
                    {"_id": run_id, "rev": guard}, {"$set": update, "$inc": {"rev": 1}}
                )
                if result.matched_count:
                    return
        raise TrackingError(f"run {run_id}: too many concurrent updates")

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return revive(self._call(lambda: self.collection(RUNS).find_one({"_id": run_id})))

    def run_ids_with_prefix(self, prefix: str, limit: int = 2) -> list[str]:
        """Ids of run documents that start with ``prefix`` (at most ``limit``)."""
        query = {"_id": {"$regex": "^" + re.escape(prefix)}}
        return [
            str(d["_id"])
            for d in self._call(
                lambda: list(self.collection(RUNS).find(query, {"_id": 1}).limit(limit))
            )
        ]

    def find_runs(
        self,
        query: dict[str, Any] | None = None,
        *,
        sort: list[tuple[str, int]] | None = None,
        limit: int = 50,
        skip: int = 0,
        projection: dict[str, int] | None = None,
    ) -> list[dict[str, Any]]:
        def read() -> list[dict[str, Any]]:
            cursor = self.collection(RUNS).find(query or {}, projection)
            cursor = cursor.sort(sort or [("created_at", -1)])
            if skip:
                cursor = cursor.skip(skip)
            if limit:
                cursor = cursor.limit(limit)
            return [revive(doc) for doc in cursor]

        return self._call(read)

    def count_runs(self, query: dict[str, Any] | None = None) -> int:
        return int(self._call(lambda: self.collection(RUNS).count_documents(query or {})))

    # -- sessions -------------------------------------------------------------------------------
    def save_session(
        self, session_id: str, messages: list[dict[str, Any]], context: dict[str, Any]
    ) -> None:
        now = utcnow()

        def write() -> None:
            with self._atomic():
                self.collection(SESSIONS).update_one(
                    {"_id": session_id},
                    {
                        "$setOnInsert": {"created_at": now},
                        "$set": {"messages": messages, "context": context, "updated_at": now},
                    },
                    upsert=True,
                )

        self._call(write)

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        return revive(self._call(lambda: self.collection(SESSIONS).find_one({"_id": session_id})))

    def list_sessions(self, limit: int = 20) -> list[dict[str, Any]]:
        return [
            revive(d)
            for d in self._call(
                lambda: list(
                    self.collection(SESSIONS).find({}).sort([("updated_at", -1)]).limit(limit)
                )
            )
        ]

    # -- benchmarks -----------------------------------------------------------------------------
    def save_benchmark(self, benchmark_id: str, doc: dict[str, Any]) -> None:
        now = utcnow()

        def write() -> None:
            with self._atomic():
                self.collection(BENCHMARKS).update_one(
                    {"_id": benchmark_id},
                    {"$setOnInsert": {"created_at": now}, "$set": doc},
                    upsert=True,
                )

        self._call(write)

    def find_benchmarks(
        self, query: dict[str, Any] | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        return [
            revive(d)
            for d in self._call(
                lambda: list(
                    self.collection(BENCHMARKS)
                    .find(query or {})
                    .sort([("created_at", -1)])
                    .limit(limit)
                )
            )
        ]
