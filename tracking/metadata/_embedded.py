"""The embedded default: a file-backed store with MongoDB document semantics (neosqlite)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlpilot.tracking.metadata._base import MetadataStore

logger = logging.getLogger(__name__)


class EmbeddedStore(MetadataStore):
    """One SQLite file under ``$MLPILOT_HOME``; no server, safe for one user's processes.

    neosqlite reads a document and then writes it back, so a write is made one
    ``BEGIN IMMEDIATE`` transaction: other processes wait for the file lock (up to 30 s)
    instead of racing the ``rev`` guard.
    """

    kind = "embedded"

    def __init__(self, path: Path) -> None:
        import neosqlite

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0
        self._conn = neosqlite.Connection(str(path), timeout=30)
        self._collections: dict[str, Any] = {}

    def describe(self) -> str:
        return f"embedded file {self.path}"

    def collection(self, name: str) -> Any:
        with self._lock:
            if name not in self._collections:
                self._collections[name] = self._conn[name]
            return self._collections[name]

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        with self._lock:
            if self._depth:  # already inside this thread's transaction
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            db = self._conn.db
            db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                with contextlib.suppress(sqlite3.Error):
                    db.rollback()
                raise
            self._depth = 0
            db.commit()

    def _unavailable(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error, AttributeError):  # closed, or never opened
            self._conn.close()
