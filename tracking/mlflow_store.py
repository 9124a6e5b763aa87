"""MLflow access for mlpilot: the client, experiments, and the tag names of DESIGN §4."""

from __future__ import annotations

import contextlib
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.platform.errors import TrackingError

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings

TAG_KIND = "mlpilot.kind"
TAG_SESSION = "mlpilot.session_id"
TAG_PROMPT = "mlpilot.prompt"
TAG_PLANNER = "mlpilot.planner"
TAG_ENGINE = "mlpilot.engine"
TAG_ENGINE_REQUESTED = "mlpilot.engine.requested"
TAG_ENGINE_USED = "mlpilot.engine.used"
TAG_ENGINE_REASON = "mlpilot.engine.reason"
TAG_TEMPLATE = "mlpilot.template"
TAG_FINGERPRINT = "mlpilot.dataset_fingerprint"
TAG_VERSION = "mlpilot.version"
TAG_STATE = "mlpilot.state"
TAG_TARGET = "mlpilot.target"
TAG_TASK = "mlpilot.task"
TAG_METRIC = "mlpilot.metric"
TAG_ERROR = "mlpilot.error"
TAG_ERROR_STAGE = "mlpilot.error.stage"
#: the positive class of a binary task (the rule: metrics.positive_label)
TAG_POSITIVE_CLASS = "mlpilot.positive_class"
#: a run started from a saved plan (``mlpilot run --plan FILE``): the file and its digest
TAG_PLAN_FILE = "mlpilot.plan.file"
TAG_PLAN_SHA256 = "mlpilot.plan.sha256"
KIND_AGENT_RUN = "agent_run"
AGENT_RUNS_FILTER = "tags.`mlpilot.kind` = 'agent_run'"
#: MLflow's terminal run statuses and the mlpilot states they end as (DESIGN §2)
MLFLOW_TO_STATE = {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "KILLED": "CANCELLED"}
STATE_TO_MLFLOW = {state: status for status, state in MLFLOW_TO_STATE.items()}
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
        TAG_ENGINE: f"{used} (requested {requested})",
        TAG_ENGINE_REQUESTED: requested,
        TAG_ENGINE_USED: used,
        TAG_ENGINE_REASON: reason[:500],
    }


def engine_of(tags: dict[str, str]) -> dict[str, str | None]:
    """``{requested, used, reason}`` back from a run's tags (either form of ``mlpilot.engine``)."""
    used = tags.get(TAG_ENGINE_USED)
    if used is None and TAG_ENGINE in tags:
        used = tags[TAG_ENGINE].split(" (", 1)[0]
    return {
        "requested": tags.get(TAG_ENGINE_REQUESTED),
        "used": used,
        "reason": tags.get(TAG_ENGINE_REASON),
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


def _initialise_sqlite(uri: str, artifact_root: str) -> None:
    """Create a fresh store with its Default experiment under our artifact root.

    Left to itself MLflow roots the Default experiment at ``./mlruns`` of whichever process
    happens to create the database, and scatters artifacts into that working directory.
    """
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    with contextlib.suppress(Exception):  # another process initialised it first
        SqlAlchemyStore(uri, artifact_root)


def make_client(settings: Settings) -> MlflowClient:
    """An ``MlflowClient`` for the configured store; creates the embedded store's folders."""
    import logging

    from mlflow import MlflowClient

    # after MLflow's import, which configures its loggers: no "creating tables" chatter
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    configure_http_timeouts()
    check_reachable(settings.tracking_uri)
    if settings.tracking_uri.startswith("sqlite:///"):
        path = Path(settings.tracking_uri.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.stat().st_size == 0:
            _initialise_sqlite(
                settings.tracking_uri,
                settings.artifact_root or (path.parent / "artifacts").as_uri(),
            )
        use_wal(path)
    return MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)


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
