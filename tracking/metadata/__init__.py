"""Run metadata in MongoDB (``MLPILOT_MONGO_URI``) or the embedded file-backed default."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.tracking.metadata._base import (
    ACTIVE_STATES,
    BENCHMARKS,
    RUNS,
    SCHEMA_DOC_COLUMNS,
    SESSIONS,
    TERMINAL_STATES,
    MetadataStore,
    StoreUnavailable,
    new_event,
    revive,
    utcnow,
)
from mlpilot.tracking.metadata._outbox import Outbox, RecordingStore

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

__all__ = [
    "ACTIVE_STATES",
    "BENCHMARKS",
    "RUNS",
    "SCHEMA_DOC_COLUMNS",
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


def private_dir(settings: Settings) -> Path:
    """``$MLPILOT_HOME/private`` (owner only), where pipeline processes never look.

    Homes made before it existed kept these at the top: they move in once.
    """
    folder = settings.private_dir
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for old in (
            "metadata.db",
            "metadata.db-wal",
            "metadata.db-shm",
            "outbox.jsonl",
            "sessions",
        ):
            if (settings.home / old).exists() and not (folder / old).exists():
                (settings.home / old).replace(folder / old)
    folder.chmod(0o700)
    return folder


def connect(settings: Settings) -> MetadataStore:
    """The configured store, checked to answer (raises ``StoreUnavailable`` if not)."""
    private_dir(settings)
    if settings.mongo_uri:
        from mlpilot.tracking.metadata._pymongo import MongoStore

        store: MetadataStore = MongoStore(
            settings.mongo_uri, settings.mongo_db, settings.mongo_timeout_ms
        )
    else:
        store = _open_embedded(settings.embedded_store_path)
    store.ensure_indexes()
    return store


def _open_embedded(path: Path) -> MetadataStore:
    """The embedded store; a full disk while it is first made is one line, not sqlite's."""
    from mlpilot.platform.errors import TrackingError
    from mlpilot.tracking.metadata._embedded import EmbeddedStore
    from mlpilot.tracking.space import out_of_space, space_left

    try:
        store = EmbeddedStore(path)
        store.ensure_indexes()
    except Exception as exc:
        if not out_of_space(exc, path.parent):
            raise
        raise TrackingError(
            f"the metadata store {path} cannot be written: no space left on the device of "
            f"{path.parent} ({space_left(path.parent)})",
            hint="free some space and run the command again",
        ) from None
    return store


def open_store(settings: Settings) -> RecordingStore:
    """A store for writing runs: an unreachable server never stops a run (writes queue)."""
    private_dir(settings)
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
