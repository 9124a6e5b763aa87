"""The embedded default: a file-backed store with MongoDB document semantics (neosqlite)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

from mlpilot.tracking.metadata._base import MetadataStore


class EmbeddedStore(MetadataStore):
    """One SQLite file under ``$MLPILOT_HOME``; no server, safe for one user's processes."""

    kind = "embedded"

    def __init__(self, path: Path) -> None:
        import neosqlite

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._conn = neosqlite.Connection(str(path), timeout=30)
        self._collections: dict[str, Any] = {}

    def collection(self, name: str) -> Any:
        with self._lock:
            if name not in self._collections:
                self._collections[name] = self._conn[name]
            return self._collections[name]

    def _unavailable(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
