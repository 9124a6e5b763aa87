"""Models are verified before they are loaded (DESIGN §8).

A logged model is a pickle: loading it runs whatever code it holds. So when a model is
logged, the SHA-256 digest of every file of it is recorded (a tag on the logged model and
on its run, and in the run's MongoDB document); before any load, the files are fetched,
their digests compared with the record, and only that verified copy is loaded. A changed,
added or missing file refuses the load in one line. Models logged before digests existed
load only with ``trust_unverified``; local folders only with ``trust_local``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking.vocab import TAG_MODEL_DIGESTS

if TYPE_CHECKING:
    from mlflow import MlflowClient

logger = logging.getLogger(__name__)
_REGISTERED = re.compile(r"^models:/(?P<name>[^/@]+)(@(?P<alias>[\w-]+)|/(?P<version>\d+))$")
_LOGGED = re.compile(r"^models:/(?P<id>m-[0-9a-f]+)$")
_RUN = re.compile(r"^runs:/(?P<run>[0-9a-zA-Z]+)/(?P<path>.+)$")


#: written by MLflow's downloader itself (the registry name and version it was fetched
#: as): not one of the stored files, and never loaded as code
_DOWNLOAD_META = frozenset({"registered_model_meta"})


def digest_folder(folder: Path) -> dict[str, str]:
    """Relative path → SHA-256 of every file of the model under ``folder``."""
    digests = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.relative_to(folder).as_posix() in _DOWNLOAD_META:
            continue
        sha = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                sha.update(block)
        digests[path.relative_to(folder).as_posix()] = sha.hexdigest()
    return digests


def record_digests(client: MlflowClient, model_uri: str, run_id: str) -> dict[str, str]:
    """Digest a just-logged model and record it on the logged model and its run."""
    with tempfile.TemporaryDirectory() as tmp:
        local = download(model_uri, Path(tmp), client)
        digests = digest_folder(local)
    value = json.dumps(digests, sort_keys=True)
    model_id = logged_id(client, model_uri)
    if model_id:
        client.set_logged_model_tags(model_id, {TAG_MODEL_DIGESTS: value})
    client.set_tag(run_id, TAG_MODEL_DIGESTS, value)
    return digests


def recorded_digests(client: MlflowClient, model_uri: str) -> dict[str, str] | None:
    """The digests recorded for ``model_uri`` when it was logged (or vouched for), if any."""
    model_id = logged_id(client, model_uri)
    raw = None
    if model_id:
        raw = (client.get_logged_model(model_id).tags or {}).get(TAG_MODEL_DIGESTS)
    match = _RUN.match(model_uri)
    if raw is None and match:
        raw = client.get_run(match["run"]).data.tags.get(TAG_MODEL_DIGESTS)
    return json.loads(raw) if raw else None


def fetch_verified(
    client: MlflowClient,
    model_uri: str,
    dest: Path,
    *,
    trust_unverified: bool = False,
    trust_local: bool = False,
) -> Path:
    """The model's files in ``dest``, checked against their recorded digests."""
    if not model_uri.startswith(("models:/", "runs:/")):
        if not trust_local:
            raise TrackingError(
                f"{model_uri} is a local folder: its files were never verified",
                hint="load models from the tracking store, or pass --trust-local-model",
            )
        return Path(model_uri)
    local = download(model_uri, dest, client)
    expected = recorded_digests(client, model_uri)
    if expected is None:
        if trust_unverified:
            logger.warning("loading %s without digests (--trust-unverified)", model_uri)
            return local
        raise TrackingError(
            f"{model_uri} has no recorded digests (logged before mlpilot recorded them)",
            hint="check it, then: mlpilot models verify NAME/VERSION --record; "
            "or pass --trust-unverified",
        )
    problem = compare(expected, digest_folder(local))
    if problem:
        raise TrackingError(
            f"{model_uri} does not match its recorded digests: {problem}",
            hint="the model's files changed after it was logged: it is not loaded",
        )
    return local


def load_verified(
    client: MlflowClient,
    model_uri: str,
    dest: Path,
    *,
    trust_unverified: bool = False,
    trust_local: bool = False,
) -> object:
    """The model as a pyfunc, loaded from the copy whose digests were just checked."""
    import mlflow.pyfunc

    local = fetch_verified(
        client, model_uri, dest, trust_unverified=trust_unverified, trust_local=trust_local
    )
    return mlflow.pyfunc.load_model(str(local))


def compare(expected: dict[str, str], actual: dict[str, str]) -> str | None:
    """None when the files are exactly those recorded, else what differs (one line)."""
    expected = {k: v for k, v in expected.items() if k not in _DOWNLOAD_META}
    changed = sorted(k for k in expected if k in actual and actual[k] != expected[k])
    missing = sorted(set(expected) - set(actual))
    added = sorted(set(actual) - set(expected))
    parts = [
        f"{label} {', '.join(names[:3])}"
        for label, names in (("changed", changed), ("missing", missing), ("added", added))
        if names
    ]
    return "; ".join(parts) or None


def download(model_uri: str, dest: Path, client: MlflowClient) -> Path:
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException

    from mlpilot.tracking.mlflow_store import scoped_tracking_uri

    try:
        with scoped_tracking_uri(client.tracking_uri):  # models:/ resolves through it
            return Path(
                mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=str(dest))
            )
    except MlflowException as exc:
        first = str(exc.message).strip().splitlines()[0][:200]
        raise TrackingError(
            f"cannot fetch model {model_uri}: {first}",
            hint="list models and aliases with: mlpilot models list",
        ) from None


def logged_id(client: MlflowClient, model_uri: str) -> str | None:
    """The logged-model id behind ``model_uri`` (a registered version knows its own)."""
    if match := _LOGGED.match(model_uri):
        return match["id"]
    if match := _REGISTERED.match(model_uri):
        if match["alias"]:
            version = client.get_model_version_by_alias(match["name"], match["alias"])
        else:
            version = client.get_model_version(match["name"], match["version"])
        model_id = getattr(version, "model_id", None)
        if model_id:
            return str(model_id)
        source = str(version.source or "")
        return source.split("/", 1)[1] if source.startswith("models:/m-") else None
    return None
