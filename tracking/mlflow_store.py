"""MLflow access for mlpilot: the client, experiments, and the tag names of DESIGN §4."""

from __future__ import annotations

import os
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
TAG_TEMPLATE = "mlpilot.template"
TAG_FINGERPRINT = "mlpilot.dataset_fingerprint"
TAG_VERSION = "mlpilot.version"
TAG_STATE = "mlpilot.state"
TAG_TARGET = "mlpilot.target"
TAG_TASK = "mlpilot.task"
TAG_METRIC = "mlpilot.metric"
PROMPT_TAG_CHARS = 500
CONNECT_TIMEOUT_S = 5.0


def mlpilot_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlpilot")
    except PackageNotFoundError:
        return "unknown"


def configure_http_timeouts() -> None:
    """Fail fast when a tracking server is down, instead of MLflow's minutes of retries."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")


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


def make_client(settings: Settings) -> MlflowClient:
    """An ``MlflowClient`` for the configured store; creates the embedded store's folders."""
    configure_http_timeouts()
    check_reachable(settings.tracking_uri)
    if settings.tracking_uri.startswith("sqlite:///"):
        Path(settings.tracking_uri.removeprefix("sqlite:///")).parent.mkdir(
            parents=True, exist_ok=True
        )
    import logging

    from mlflow import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # no "creating tables" chatter on the CLI
    return MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)


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
