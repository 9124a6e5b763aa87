"""MongoDB (or any server speaking its wire protocol) through pymongo."""

from __future__ import annotations

from typing import Any

from mlpilot.tracking.metadata._base import MetadataStore


class MongoStore(MetadataStore):
    kind = "mongodb"

    def __init__(self, uri: str, database: str, timeout_ms: int = 2000) -> None:
        import pymongo

        self.uri = uri
        self._client = pymongo.MongoClient(
            uri,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(timeout_ms * 5, 10000),
            tz_aware=True,
            retryWrites=False,  # the nx-27017 test server and standalone mongod have no sessions
        )
        self._db = self._client[database]

    def collection(self, name: str) -> Any:
        return self._db[name]

    def _unavailable(self, exc: BaseException) -> bool:
        from pymongo.errors import (
            AutoReconnect,
            ConnectionFailure,
            NetworkTimeout,
            ServerSelectionTimeoutError,
        )

        return isinstance(
            exc, (AutoReconnect, ConnectionFailure, NetworkTimeout, ServerSelectionTimeoutError)
        )

    def close(self) -> None:
        self._client.close()
