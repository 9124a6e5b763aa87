"""MongoDB (or any server speaking its wire protocol) through pymongo."""

from __future__ import annotations

import logging
import traceback
from typing import Any

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking.metadata._base import MetadataStore, StoreUnavailable
from mlpilot.tracking.mlflow_store import redact_uri

logger = logging.getLogger(__name__)

#: MongoDB's error code for failed authentication
_AUTH_FAILED = 18
_AUTH_HINT = (
    "check the user, password and authSource in MLPILOT_MONGO_URI, or set "
    "authMechanism=… to one the server offers (a server without authentication takes a URI "
    "without credentials)"
)


class MongoStore(MetadataStore):
    """pymongo with short timeouts: an interactive command waits at most ``timeout_ms``
    for a server, and a write that cannot reach one raises ``StoreUnavailable``."""

    kind = "mongodb"

    def __init__(self, uri: str, database: str, timeout_ms: int = 2000) -> None:
        import pymongo
        from pymongo.errors import ConfigurationError, InvalidURI

        self.uri = uri
        self.database = database
        try:
            self._client = pymongo.MongoClient(
                uri,
                serverSelectionTimeoutMS=timeout_ms,
                connectTimeoutMS=timeout_ms,
                socketTimeoutMS=max(timeout_ms * 5, 10000),
                tz_aware=True,
                retryWrites=False,  # the nx-27017 test server and standalone mongod have no sessions
            )
        except (ConfigurationError, InvalidURI) as exc:  # also an unknown authMechanism
            raise TrackingError(
                f"MLPILOT_MONGO_URI {redact_uri(uri)} is not usable: {_first_line(exc)}",
                hint="see https://www.mongodb.com/docs/manual/reference/connection-string/",
            ) from None
        self._db = self._client[database]

    def describe(self) -> str:
        return f"{redact_uri(self.uri)} (database {self.database})"

    def collection(self, name: str) -> Any:
        return self._db[name]

    def _call(self, fn: Any) -> Any:
        """A failed login is not an unreachable server (no outbox: the URI is wrong) and
        must not surface as pymongo's own ``KeyError: 'payload'``: one line, naming both."""
        try:
            return super()._call(fn)
        except StoreUnavailable:
            raise
        except Exception as exc:
            problem = self._auth_problem(exc)
            if problem is None:
                raise
            logger.debug("authentication failed", exc_info=True)
            raise TrackingError(problem, hint=_AUTH_HINT) from None

    def _auth_problem(self, exc: BaseException) -> str | None:
        """What went wrong logging in, or None when ``exc`` is not about authentication."""
        from pymongo.errors import OperationFailure

        server = self._server()
        mechanism = self._mechanism()
        if isinstance(exc, OperationFailure) and (
            exc.code == _AUTH_FAILED or "auth" in str(exc).lower()
        ):
            return f"MongoDB at {server} refused the login ({mechanism}): {_first_line(exc)}"
        frames = traceback.extract_tb(exc.__traceback__)
        if any("pymongo" in f.filename and f.filename.endswith("auth.py") for f in frames):
            return (
                f"MongoDB at {server} did not complete {mechanism} authentication "
                f"({type(exc).__name__}: {_first_line(exc)}): the server may not support "
                "it, or authentication at all"
            )
        return None

    def _server(self) -> str:
        from pymongo import uri_parser

        try:
            nodes = uri_parser.parse_uri(self.uri, warn=True)["nodelist"]
            return ", ".join(f"{host}:{port}" for host, port in nodes)
        except Exception as exc:  # the URI parsed when the client was made: cannot happen
            logger.debug("URI not parsed again: %s", exc)
            return redact_uri(self.uri)

    def _mechanism(self) -> str:
        from pymongo import uri_parser

        try:
            options = uri_parser.parse_uri(self.uri, warn=True)["options"]
        except Exception as exc:
            logger.debug("URI not parsed again: %s", exc)
            options = {}
        named = options.get("authMechanism") or options.get("authmechanism")
        return f"{named}" if named else "SCRAM (pymongo's default mechanism)"

    def _unavailable(self, exc: BaseException) -> bool:
        from pymongo.errors import ConnectionFailure, NetworkTimeout, ServerSelectionTimeoutError

        # AutoReconnect and NotPrimaryError are ConnectionFailures too
        return isinstance(exc, (ConnectionFailure, NetworkTimeout, ServerSelectionTimeoutError))

    def _duplicate(self, exc: BaseException) -> bool:
        from pymongo.errors import DuplicateKeyError

        return isinstance(exc, DuplicateKeyError)

    def close(self) -> None:
        self._client.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
