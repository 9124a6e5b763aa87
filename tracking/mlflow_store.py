"""MLflow access for mlpilot: the client, experiments, and the tag names of DESIGN §4."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.platform.config.interrupts import shielded
from mlpilot.platform.errors import TrackingError
from mlpilot.tracking import schema_cache, vocab
from mlpilot.tracking.space import out_of_space, space_left

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings

PROMPT_TAG_CHARS = 500
CONNECT_TIMEOUT_S = 5.0


def mlpilot_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlpilot")
    except PackageNotFoundError:
        return "unknown"


def configure_http_timeouts() -> None:
    """Fail fast when a tracking server is down, instead of MLflow's minutes of retries;
    and keep MLflow's "View run at" lines off stdout (``--json`` prints JSON only)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def engine_tags(requested: str, used: str, reason: str) -> dict[str, str]:
    """``mlpilot.engine`` carries both the requested and the used engine ("cpu (requested
    auto)"); the parts are also separate tags, to filter on."""
    return {
        vocab.TAG_ENGINE: f"{used} (requested {requested})",
        vocab.TAG_ENGINE_REQUESTED: requested,
        vocab.TAG_ENGINE_USED: used,
        vocab.TAG_ENGINE_REASON: reason[:500],
    }


def engine_of(tags: dict[str, str]) -> dict[str, str | None]:
    """``{requested, used, reason}`` back from a run's tags (either form of ``mlpilot.engine``)."""
    used = tags.get(vocab.TAG_ENGINE_USED)
    if used is None and vocab.TAG_ENGINE in tags:
        used = tags[vocab.TAG_ENGINE].split(" (", 1)[0]
    return {
        "requested": tags.get(vocab.TAG_ENGINE_REQUESTED),
        "used": used,
        "reason": tags.get(vocab.TAG_ENGINE_REASON),
    }


def check_reachable(tracking_uri: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ``TrackingError`` at once if an HTTP tracking server does not answer."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    url = tracking_uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read(64)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return  # an authenticated server answers; credentials are MLflow's business
        raise TrackingError(
            f"MLflow tracking server at {tracking_uri} answered {exc.code} on /health",
            hint="check MLFLOW_TRACKING_URI",
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(
            f"MLflow tracking server at {tracking_uri} is unreachable ({reason})",
            hint="start it (mlflow server …) or unset MLFLOW_TRACKING_URI to use the local sqlite store",
        ) from None


def use_wal(path: Path) -> None:
    """Put the sqlite store in write-ahead-log mode (persistent, once per file): a commit
    costs one fsync instead of several, and readers (the dashboard, ``mlflow ui``) no
    longer block the run that writes. Best effort: a file that refuses keeps its mode."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5)) as db:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error:
        pass


def _has_schema(path: Path) -> bool:
    """Whether the sqlite file holds a whole MLflow schema (creation ran to its end:
    MLflow writes ``alembic_version`` once every table exists)."""
    import sqlite3

    if not path.exists() or path.stat().st_size == 0:
        return False
    try:
        uri = path.as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            if not {"alembic_version", "experiments", "runs"} <= tables:
                return False
            return db.execute("SELECT count(*) FROM alembic_version").fetchone()[0] > 0
    except sqlite3.Error as exc:  # unreadable: MLflow's own error says more than ours would
        logger.debug("schema check of %s failed: %s", path, exc)
        return True


def _set_aside(path: Path) -> None:
    """Move a store whose creation was cut short (an earlier full disk) out of the way."""
    aside = path.with_name(f"{path.name}.incomplete-{int(time.time())}")
    logger.warning("%s has no whole MLflow schema (creation cut short): moved to %s", path, aside)
    for suffix in ("-wal", "-shm", "-journal"):
        extra = path.with_name(path.name + suffix)
        if extra.exists():
            extra.replace(aside.with_name(aside.name + suffix))
    path.replace(aside)


def _initialise_sqlite(path: Path, artifact_root: str) -> None:
    """Create a fresh store with its Default experiment under our artifact root, on a copy.

    Left to itself MLflow roots the Default experiment at ``./mlruns`` of whichever process
    happens to create the database, and scatters artifacts into that working directory.
    The tables are created in a file beside the store and renamed in once whole: a creation
    cut short (a full disk, a kill) leaves no half-made store that every later command
    would trip on.
    """
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    # an early-started pipeline's containment may have made an empty store, shared with
    # the pipelines' account: the new one takes its owner, mode and ACL
    access = _access_of(path)
    if path.exists() and path.stat().st_size > 0:
        _set_aside(path)  # under the first-use lock: no one else is creating it
    building = path.with_name(f".{path.name}.{os.getpid()}.creating")
    uri = f"sqlite:///{building}"
    try:
        # MLflow finds the template's tables and adds only the Default experiment
        schema_cache.copy_template(building)
        store = SqlAlchemyStore(uri, artifact_root)
        store.engine.dispose()  # closed before the rename: no handle on the old name
        SqlAlchemyStore._engine_map.pop(uri, None)
        _give_access(building, access)
        _fsync(building)
        os.replace(building, path)
        _fsync(path.parent)
    except Exception as exc:
        _remove_building(building)
        if out_of_space(exc, path.parent):
            raise TrackingError(
                f"the MLflow store {path} could not be created: no space left on the "
                f"device of {path.parent} ({space_left(path.parent)})",
                hint="free some space and run the command again (nothing was half-created)",
            ) from None
        raise TrackingError(
            f"the MLflow store {path} could not be created: {_first_line(exc)}",
            hint="check that the folder is writable (MLPILOT_HOME, MLFLOW_TRACKING_URI)",
        ) from None


_ACL = "system.posix_acl_access"


def _access_of(path: Path) -> tuple[os.stat_result, bytes | None] | None:
    """Owner, mode and POSIX ACL of ``path``; None when it does not exist."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    try:
        acl: bytes | None = os.getxattr(path, _ACL)
    except OSError:  # no ACL on it, or none on this file system
        acl = None
    return info, acl


def _give_access(path: Path, access: tuple[os.stat_result, bytes | None] | None) -> None:
    if access is None:
        return
    info, acl = access
    with contextlib.suppress(PermissionError):  # not root: the group stays ours
        os.chown(path, info.st_uid, info.st_gid)
    path.chmod(info.st_mode & 0o7777)
    if acl is not None:
        os.setxattr(path, _ACL, acl)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_building(building: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            building.with_name(building.name + suffix).unlink()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


@contextlib.contextmanager
def scoped_tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's global tracking URI set to ``uri`` for the block, then restored.

    Only for the MLflow code paths that ignore the explicit client's URI (the registry's
    resolution of ``models:/m-…``); everything else uses explicit clients.
    """
    from mlflow.tracking._tracking_service import utils

    previous = utils._tracking_uri
    utils.set_tracking_uri(uri)
    try:
        yield
    finally:
        utils.set_tracking_uri(previous)


def make_client(settings: Settings) -> MlflowClient:
    """An ``MlflowClient`` for the configured store; creates the embedded store's folders.

    A cancelling signal waits until it is done: MLflow's import, or its migration, cut in
    half would leave the process (or the database) unusable for recording the cancel.
    """
    with shielded():
        return _make_client(settings)


def _make_client(settings: Settings) -> MlflowClient:
    import logging

    from mlflow import MlflowClient

    # after MLflow's import, which configures its loggers: no "creating tables" chatter
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    configure_http_timeouts()
    check_reachable(settings.tracking_uri)
    if not settings.tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)
    path = Path(settings.tracking_uri.removeprefix("sqlite:///"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _open_sqlite(settings, path)
    except OSError as exc:  # the folder or the lock beside the store
        if not out_of_space(exc, path.parent):
            raise
        raise TrackingError(
            f"the MLflow store {path} cannot be opened: no space left on the device of "
            f"{path.parent} ({space_left(path.parent)})",
            hint="free some space and run the command again",
        ) from None


def _open_sqlite(settings: Settings, path: Path) -> MlflowClient:
    from mlflow import MlflowClient

    # two first runs at once would both create the tables or both migrate them (and leave
    # the database half-migrated for good): one process at a time does it. MLflow opens
    # (and migrates) its store as the client is made, so that happens under the lock too.
    with first_use_lock(path):
        if not _has_schema(path):
            _initialise_sqlite(path, settings.artifact_root or (path.parent / "artifacts").as_uri())
        use_wal(path)
        client = MlflowClient(
            tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri
        )
        _open_stores(client)
    return client


@contextlib.contextmanager
def first_use_lock(database: Path) -> Iterator[None]:
    """An exclusive lock beside ``database`` while its schema is created or migrated."""
    import fcntl

    lock = database.with_name(database.name + ".init-lock")
    # read-only is enough for flock, and lets a pipeline's unprivileged account take it
    handle = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing releases the lock


def _open_stores(client: MlflowClient) -> None:
    """Create MLflow's stores now, under the lock: that is when it runs its migrations."""
    try:
        _ = client._tracking_client.store
        _ = client._get_registry_client().store
    except AttributeError as exc:  # another MLflow layout: the first call opens them instead
        logger.debug("stores open lazily: %s", exc)


def redact_uri(uri: str) -> str:
    """A URI fit to print: ``scheme://user:secret@host`` → ``scheme://user:***@host``."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", uri)


def all_experiment_ids(client: MlflowClient) -> list[str]:
    """Ids of every active experiment."""
    ids: list[str] = []
    token = None
    while True:
        page = client.search_experiments(max_results=1000, page_token=token)
        ids += [e.experiment_id for e in page]
        token = page.token
        if not token:
            return ids


def search_all_runs(
    client: MlflowClient,
    experiment_ids: list[str],
    filter_string: str = "",
    order_by: list[str] | None = None,
    limit: int | None = None,
) -> list:
    """Every run matching ``filter_string`` (paged through), up to ``limit``."""
    runs: list = []
    token = None
    while experiment_ids:
        page_size = 1000 if limit is None else min(1000, limit - len(runs))
        page = client.search_runs(
            experiment_ids,
            filter_string=filter_string,
            order_by=order_by,
            max_results=page_size,
            page_token=token,
        )
        runs += list(page)
        token = page.token
        if not token or (limit is not None and len(runs) >= limit):
            break
    return runs


def ensure_experiment(client: MlflowClient, name: str, artifact_root: str | None = None) -> str:
    """The id of experiment ``name``, created (with artifacts under ``artifact_root``) if needed."""
    from mlflow.exceptions import MlflowException

    try:
        existing = client.get_experiment_by_name(name)
        if existing is not None:
            if existing.lifecycle_stage == "deleted":
                client.restore_experiment(existing.experiment_id)
            return existing.experiment_id
        location = f"{artifact_root.rstrip('/')}/{_safe(name)}" if artifact_root else None
        return client.create_experiment(name, artifact_location=location)
    except MlflowException as exc:
        if "already exists" in str(exc):  # another process created it meanwhile
            found = client.get_experiment_by_name(name)
            if found is not None:
                return found.experiment_id
        raise TrackingError(
            f"MLflow refused experiment {name!r}: {str(exc).splitlines()[0]}"
        ) from None


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "experiment"
