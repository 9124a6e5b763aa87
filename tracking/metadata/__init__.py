"""Run metadata in MongoDB (``MLPILOT_MONGO_URI``) or the embedded file-backed default."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlpilot.tracking.metadata._base import (
    ACTIVE_STATES,
    BENCHMARKS,
    RUNS,
    SESSIONS,
    TERMINAL_STATES,
    MetadataStore,
    StoreUnavailable,
    new_event,
    revive,
    utcnow,
)
from mlpilot.tracking.metadata._outbox import Outbox, RecordingStore

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

__all__ = [
    "ACTIVE_STATES",
    "BENCHMARKS",
    "RUNS",
    "SESSIONS",
    "TERMINAL_STATES",
    "MetadataStore",
    "Outbox",
    "RecordingStore",
    "StoreUnavailable",
    "connect",
    "new_event",
    "open_store",
    "revive",
    "utcnow",
]


def connect(settings: Settings) -> MetadataStore:
    """The configured store, checked to answer (raises ``StoreUnavailable`` if not)."""
    if settings.mongo_uri:
        from mlpilot.tracking.metadata._pymongo import MongoStore

        store: MetadataStore = MongoStore(
            settings.mongo_uri, settings.mongo_db, settings.mongo_timeout_ms
        )
    else:
        from mlpilot.tracking.metadata._embedded import EmbeddedStore

        store = EmbeddedStore(settings.embedded_store_path)
    store.ensure_indexes()
    return store


def open_store(settings: Settings) -> RecordingStore:
    """A store for writing runs: an unreachable server never stops a run (writes queue)."""
    outbox = Outbox(settings.outbox_path)
    try:
        store: MetadataStore | None = connect(settings)
        error = None
    except StoreUnavailable as exc:
        store, error = None, exc.message
    recording = RecordingStore(store, outbox, store_error=error)
    if store is not None:
        recording.flush()
    return recording
