"""MongoDB (or any server speaking its wire protocol) through pymongo."""

from __future__ import annotations

from typing import Any

from mlpilot.tracking.metadata._base import MetadataStore
from mlpilot.tracking.mlflow_store import redact_uri


class MongoStore(MetadataStore):
    """pymongo with short timeouts: an interactive command waits at most ``timeout_ms``
    for a server, and a write that cannot reach one raises ``StoreUnavailable``."""

    kind = "mongodb"

    def __init__(self, uri: str, database: str, timeout_ms: int = 2000) -> None:
        import pymongo

        self.uri = uri
        self.database = database
        self._client = pymongo.MongoClient(
            uri,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(timeout_ms * 5, 10000),
            tz_aware=True,
            retryWrites=False,  # the nx-27017 test server and standalone mongod have no sessions
        )
        self._db = self._client[database]

    def describe(self) -> str:
        return f"{redact_uri(self.uri)} (database {self.database})"

    def collection(self, name: str) -> Any:
        return self._db[name]

    def _unavailable(self, exc: BaseException) -> bool:
        from pymongo.errors import ConnectionFailure, NetworkTimeout, ServerSelectionTimeoutError

        # AutoReconnect and NotPrimaryError are ConnectionFailures too
        return isinstance(exc, (ConnectionFailure, NetworkTimeout, ServerSelectionTimeoutError))

    def _duplicate(self, exc: BaseException) -> bool:
        from pymongo.errors import DuplicateKeyError

        return isinstance(exc, DuplicateKeyError)

    def close(self) -> None:
        self._client.close()
