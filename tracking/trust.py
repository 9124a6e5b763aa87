"""Models are verified before they are loaded (DESIGN §8).

A logged model is a pickle: loading it runs whatever code it holds. So when a model is
logged, the SHA-256 digest of every file of it is recorded in the home's owner-only
anchor store (``tracking/anchors.py``), keyed by the tracking URI and the logged model's
id; before any load, the files are fetched, their digests compared with that record, and
only that verified copy is loaded. A changed, added or missing file refuses the load in
one line. The ``mlpilot.model.sha256`` tags are written too, for people and the dashboard
only: MLflow's store is shared by every tool that reaches its URI, so a tag is never what
a model is checked against. Models whose digests are only tags (recorded before the anchor store) or none
load only with ``trust_unverified``; local folders only with ``trust_local``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking.anchors import AnchorStore, AnchorsUnreadable
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
_MODEL_FILE_LIMIT = 1 << 36  # one file of a model: far above any real one


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
    """Digest a just-logged model and anchor it in the home's private store."""
    with tempfile.TemporaryDirectory() as tmp:
        local = download(model_uri, Path(tmp), client)
        digests = digest_folder(local)
    anchor_digests(client, model_uri, digests, run_id)
    value = json.dumps(digests, sort_keys=True)
    model_id = logged_id(client, model_uri)
    # for display only (runs show, the dashboard): never what a load is checked against
    if model_id:
        client.set_logged_model_tags(model_id, {TAG_MODEL_DIGESTS: value})
    client.set_tag(run_id, TAG_MODEL_DIGESTS, value)
    return digests


def anchor_digests(
    client: MlflowClient, model_uri: str, digests: dict[str, str], run_id: str | None
) -> bool:
    """Record ``digests`` as the anchor of ``model_uri`` (its logged model, and its run
    for ``runs:/`` URIs); False where this process may not write the store."""
    store = AnchorStore.current()
    keys = [key for key in (_model_key(client, model_uri), run_id and f"run:{run_id}") if key]
    try:
        for key in keys:
            store.record_model(client.tracking_uri, key, digests, run_id)
    except PermissionError:
        # a pipeline's own account: the parent records what it logs on its behalf
        logger.debug("not anchoring %s: the private store is not writable here", model_uri)
        return False
    return bool(keys)


def vouch(client: MlflowClient, model_uri: str, digests: dict[str, str]) -> None:
    """The user's own record of ``model_uri`` as its files are now (``models verify
    --record``): the anchor, and the display tag."""
    if _model_key(client, model_uri) is None:
        raise TrackingError(f"{model_uri} names no logged model whose digests could be recorded")
    if not anchor_digests(client, model_uri, digests, None):
        raise TrackingError(
            f"cannot record the digests of {model_uri}: this account cannot write "
            f"{AnchorStore.current().folder}",
            hint="run it as the home's owner",
        )
    model_id = logged_id(client, model_uri)
    if model_id:  # for display only
        client.set_logged_model_tags(model_id, {TAG_MODEL_DIGESTS: json.dumps(digests)})


def recorded_digests(client: MlflowClient, model_uri: str) -> dict[str, str] | None:
    """The digests this home recorded for ``model_uri`` when it was logged (or vouched
    for), if any; raises ``AnchorsUnreadable`` in a process that may not read them."""
    key = _model_key(client, model_uri)
    if key is None:
        return None
    return AnchorStore.current().model_digests(client.tracking_uri, key)


def _model_key(client: MlflowClient, model_uri: str) -> str | None:
    """What a model's anchor is filed under: its logged model's id, else its run's."""
    model_id = logged_id(client, model_uri)
    if model_id:
        return model_id
    match = _RUN.match(model_uri)
    return f"run:{match['run']}" if match else None


def tag_digests(client: MlflowClient, model_uri: str) -> dict[str, str] | None:
    """The digests an MLflow tag claims (display only: pipelines can write tags)."""
    model_id = logged_id(client, model_uri)
    raw = None
    if model_id:
        raw = (client.get_logged_model(model_id).tags or {}).get(TAG_MODEL_DIGESTS)
    match = _RUN.match(model_uri)
    if raw is None and match:
        raw = client.get_run(match["run"]).data.tags.get(TAG_MODEL_DIGESTS)
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def unverified_error(client: MlflowClient, model_uri: str) -> TrackingError:
    """Why ``model_uri`` has no anchor: never recorded, or recorded only as MLflow tags."""
    if tag_digests(client, model_uri) is not None:
        return TrackingError(
            f"{model_uri} is unverified: its digests are only MLflow tags (recorded before "
            "mlpilot kept them in its private store), which pipelines can write",
            hint="check the model, then: mlpilot models verify REF --record; "
            "or pass --trust-unverified",
        )
    return TrackingError(
        f"{model_uri} has no recorded digests in this home (logged outside it, or before "
        "mlpilot recorded them)",
        hint="check it, then: mlpilot models verify NAME/VERSION --record; "
        "or pass --trust-unverified",
    )


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
    try:
        _check(client, model_uri, local, trust_unverified)
    except BaseException:
        # a refused copy is not left where a pipeline could read it (a planted link's
        # target may have been copied in)
        shutil.rmtree(local, ignore_errors=True)
        raise
    return local


def _check(client: MlflowClient, model_uri: str, local: Path, trust_unverified: bool) -> None:
    try:
        expected = recorded_digests(client, model_uri)
    except AnchorsUnreadable as exc:
        raise TrackingError(
            f"{model_uri} cannot be checked here: {exc.message}",
            hint="load models from the store through mlpilot (mlpilot predict), "
            "which checks them before a pipeline starts",
        ) from None
    if expected is None:
        if trust_unverified:
            logger.warning("loading %s without digests (--trust-unverified)", model_uri)
            return
        raise unverified_error(client, model_uri)
    problem = compare(expected, digest_folder(local))
    if problem:
        raise TrackingError(
            f"{model_uri} does not match its recorded digests: {problem}",
            hint="the model's files changed after it was logged: it is not loaded",
        )


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
        found = _local_files(client, model_uri)
        if found is not None:
            return _copy_without_links(model_uri, found, dest)
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


def _local_files(client: MlflowClient, model_uri: str) -> tuple[Path, Path] | None:
    """The folder of a logged model's files and its experiment's artifact folder, when the
    artifact store is a local folder."""
    model_id = logged_id(client, model_uri)
    if model_id is None:
        return None  # runs:/…: MLflow resolves it (its copy follows links)
    model = client.get_logged_model(model_id)
    source = urlparse_path(str(model.artifact_location or ""))
    if source is None:
        return None
    store = urlparse_path(client.get_experiment(model.experiment_id).artifact_location)
    return source, store or source


def _copy_without_links(model_uri: str, found: tuple[Path, Path], dest: Path) -> Path:
    """The model's regular files, copied without following a link: a link planted in the
    artifact store must not make root copy what it names (``/etc/shadow``) into a folder a
    pipeline then reads. Links above the experiment's folder are the operator's own."""
    from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

    source, store = found
    if _linked_below(store, source):
        raise TrackingError(
            f"cannot fetch model {model_uri}: its folder is reached through a link ({source})",
            hint="a link was planted in the artifact store: the model is not loaded",
        )
    try:
        with RunFolder(source.resolve()) as folder:
            for name, _size in folder.files():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                folder.copy_out(name, dest / name, _MODEL_FILE_LIMIT)
    except UnsafeFile as exc:
        raise TrackingError(f"cannot fetch model {model_uri}: {exc.message}") from None
    return dest


def _linked_below(store: Path, source: Path) -> bool:
    """Whether ``source`` lies outside ``store`` or any folder from ``store`` down to it
    is a symbolic link."""
    store, source = Path(os.path.abspath(store)), Path(os.path.abspath(source))
    if not source.is_relative_to(store):
        return True
    here = store
    for part in source.relative_to(store).parts:
        here = here / part
        if here.is_symlink():
            return True
    return False


def urlparse_path(uri: str | None) -> Path | None:
    """The local folder of a ``file:`` (or plain path) URI; None for anything else."""
    from urllib.parse import unquote, urlparse

    where = urlparse(uri or "")
    return Path(unquote(where.path)) if where.scheme in ("", "file") and where.path else None


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
