"""The MLflow Model Registry: versions with lineage tags, and aliases (never stages).

Model references accept ``NAME@ALIAS``, ``NAME/VERSION``, ``NAME`` (the latest version)
and the same behind ``models:/``. Registering, promoting and showing go through the
functions here, from the CLI (``mlpilot models …``) and the ``register_model`` tool alike.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking import vocab
from mlpilot.tracking.mlflow_store import scoped_tracking_uri
from mlpilot.tracking.vocab import (
    LINEAGE_RUN_TAGS,
    LOWER_IS_BETTER,
    TAG_METRIC_VALUE,
    TAG_SOURCE_RUN,
)

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlflow import MlflowClient

DEFAULT_METRICS = ("rmse", "roc_auc", "accuracy", "r2")
_RUN_ID = re.compile(r"^[0-9A-Za-z-]+$")


@contextlib.contextmanager
def mlflow_errors(what: str) -> Iterator[None]:
    """MLflow's exceptions as one-line ``TrackingError``s that say what was being done."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except MlflowException as exc:
        first = (str(exc.message if hasattr(exc, "message") else exc).strip().splitlines() or [""])[
            0
        ]
        raise TrackingError(f"{what}: {first[:300]}") from None


# -- runs ---------------------------------------------------------------------------------------
def model_uri_of_run(client: MlflowClient, run_id: str) -> str | None:
    """``models:/m-…`` of the latest model a run logged, or None."""
    run = client.get_run(run_id)
    outputs = getattr(run, "outputs", None)
    model_outputs = list(getattr(outputs, "model_outputs", None) or [])
    if model_outputs:
        latest = max(model_outputs, key=lambda m: m.step)
        return f"models:/{latest.model_id}"
    found = client.search_logged_models(
        [run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    return f"models:/{found[0].model_id}" if found else None


def best_run(client: MlflowClient, experiment_id: str, metric: str | None) -> tuple[str, str]:
    """(run id, metric) of the best finished agent run that logged a model."""
    candidates = [metric] if metric else list(DEFAULT_METRICS)
    for name in candidates:
        key = f"test_{name}"
        order = "ASC" if name in LOWER_IS_BETTER else "DESC"
        runs = client.search_runs(
            [experiment_id],
            filter_string=f"attributes.status = 'FINISHED' and metrics.{key} > -1e300",
            order_by=[f"metrics.{key} {order}"],
            max_results=20,
        )
        for run in runs:
            if model_uri_of_run(client, run.info.run_id):
                return run.info.run_id, name
    wanted = metric or " / ".join(candidates)
    raise TrackingError(
        f"no finished run with a model and a test_{wanted} metric in this experiment",
        hint="train a model first (mlpilot run …), or pass a run id",
    )


def resolve_source(
    client: MlflowClient, experiment_id: str | None, run_id: str | None, metric: str | None
) -> tuple[str, str]:
    """(source run id, model uri) for ``run_id``, or for the experiment's best run."""
    if run_id is None:
        if experiment_id is None:
            raise TrackingError("no run given and no experiment to pick the best run from")
        run_id, _ = best_run(client, experiment_id, metric)
    else:
        run_id = resolve_run_id(client, experiment_id, run_id)
    uri = model_uri_of_run(client, run_id)
    if uri is None:
        raise TrackingError(f"run {run_id} logged no model", hint="pick a run that trained a model")
    return run_id, uri


def resolve_run_id(client: MlflowClient, experiment_id: str | None, run_id: str) -> str:
    """Accept a full run id or a unique prefix of one (at least 4 characters).

    Prefixes are looked up in ``experiment_id``, or in every experiment when it is None.
    """
    from mlflow.exceptions import MlflowException

    run_id = run_id.strip()
    if not run_id or not _RUN_ID.match(run_id):
        raise TrackingError(f"{run_id!r} is not a run id", hint="list runs with: mlpilot runs list")
    try:
        return client.get_run(run_id).info.run_id
    except MlflowException:
        pass
    if len(run_id) >= 4:
        matches = _runs_with_prefix(client, experiment_id, run_id)
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise TrackingError(
                f"run id prefix {run_id!r} is ambiguous ({len(matches)} runs)",
                hint="give more characters",
            )
    raise TrackingError(f"no run with id {run_id!r}", hint="list runs with: mlpilot runs list")


def _runs_with_prefix(client: MlflowClient, experiment_id: str | None, prefix: str) -> list[str]:
    from mlflow.exceptions import MlflowException

    from mlpilot.tracking.mlflow_store import all_experiment_ids, search_all_runs

    ids = [experiment_id] if experiment_id is not None else all_experiment_ids(client)
    if not ids:
        return []
    try:
        runs = client.search_runs(
            ids, filter_string=f"attributes.run_id LIKE '{prefix}%'", max_results=10
        )
        return sorted({r.info.run_id for r in runs})
    except MlflowException:  # a store without LIKE on run ids: look through them all
        runs = search_all_runs(client, ids)
        return sorted({r.info.run_id for r in runs if r.info.run_id.startswith(prefix)})


# -- references ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelRef:
    """A registered model, and optionally one version of it by alias or number."""

    name: str
    alias: str | None = None
    version: str | None = None

    @property
    def uri(self) -> str:
        if self.alias:
            return f"models:/{self.name}@{self.alias}"
        if self.version:
            return f"models:/{self.name}/{self.version}"
        return f"models:/{self.name}/latest"

    def __str__(self) -> str:
        if self.alias:
            return f"{self.name}@{self.alias}"
        return f"{self.name}/{self.version}" if self.version else self.name


def parse_model_ref(text: str) -> ModelRef:
    """``NAME@ALIAS``, ``NAME/VERSION`` or ``NAME``, with or without ``models:/``."""
    ref = text.strip().removeprefix("models:/")
    if not ref or (ref.startswith("m-") and "@" not in ref and "/" not in ref):
        raise TrackingError(
            f"{text!r} is not a registered model reference",
            hint="use NAME@ALIAS, NAME/VERSION or NAME",
        )
    if "@" in ref:
        name, alias = ref.rsplit("@", 1)
        if not name or not alias:
            raise TrackingError(f"{text!r} is not a registered model reference")
        return ModelRef(name, alias=alias)
    if "/" in ref:
        name, version = ref.rsplit("/", 1)
        if version == "latest":
            return ModelRef(name)
        if not version.isdigit():
            raise TrackingError(f"{text!r}: the version must be a number (or latest)")
        return ModelRef(name, version=version)
    return ModelRef(ref)


def quote_filter_value(value: str) -> str | None:
    """``value`` as a string literal of an MLflow search filter, or None when none can hold
    it: MLflow's parser reads no escapes, so a ``'`` needs double quotes and a value with
    both quote characters cannot be written at all."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    return None


def model_versions(client: MlflowClient, name: str) -> list[Any]:
    """Every version of the registered model ``name``, newest first, whatever its name holds."""
    quoted = quote_filter_value(name)
    with mlflow_errors(f"cannot list the versions of {name!r}"):
        if quoted is not None:
            found = list(client.search_model_versions(f"name = {quoted}"))
        else:  # no filter can name it: look through every version
            found = [v for v in _all_versions(client) if v.name == name]
    return sorted(found, key=lambda v: int(v.version), reverse=True)


def _all_versions(client: MlflowClient) -> list[Any]:
    versions: list[Any] = []
    token = None
    while True:
        page = client.search_model_versions(max_results=1000, page_token=token)
        versions += list(page)
        token = page.token
        if not token:
            return versions


def get_version(client: MlflowClient, ref: ModelRef) -> Any:
    """The ``ModelVersion`` ``ref`` points to (its latest version when it names none)."""
    with mlflow_errors(f"no model version {ref}"):
        if ref.alias:
            return client.get_model_version_by_alias(ref.name, ref.alias)
        if ref.version:
            return client.get_model_version(ref.name, ref.version)
        client.get_registered_model(ref.name)
    versions = model_versions(client, ref.name)
    if not versions:
        raise TrackingError(f"registered model {ref.name!r} has no versions")
    return versions[0]


# -- listing ------------------------------------------------------------------------------------
def list_models(client: MlflowClient) -> list[dict[str, Any]]:
    """Every registered model: name, latest version, aliases, version count, last update."""
    models: list[Any] = []
    token = None
    with mlflow_errors("cannot list registered models"):
        while True:
            page = client.search_registered_models(max_results=1000, page_token=token)
            models += list(page)
            token = page.token
            if not token:
                break
    out = []
    for model in sorted(models, key=lambda m: m.name):
        versions = model_versions(client, model.name)
        out.append(
            {
                "name": model.name,
                "versions": len(versions),
                "latest_version": versions[0].version if versions else None,
                "aliases": {a: str(v) for a, v in sorted((model.aliases or {}).items())},
                "description": model.description or "",
                "updated_at": _iso(model.last_updated_timestamp),
            }
        )
    return out


def list_versions(client: MlflowClient, name: str) -> list[dict[str, Any]]:
    """The versions of ``name``, newest first, with aliases, source run and metric."""
    with mlflow_errors(f"no registered model {name!r}"):
        model = client.get_registered_model(name)
    by_version: dict[str, list[str]] = {}
    for alias, version in (model.aliases or {}).items():
        by_version.setdefault(str(version), []).append(alias)
    return [
        _version_summary(v, sorted(by_version.get(str(v.version), [])))
        for v in model_versions(client, name)
    ]


def _version_summary(version: Any, aliases: list[str]) -> dict[str, Any]:
    tags = dict(version.tags or {})
    metric = tags.get(vocab.TAG_METRIC)
    return {
        "name": version.name,
        "version": str(version.version),
        "aliases": aliases,
        "status": version.status,
        "source_run": version.run_id or tags.get(TAG_SOURCE_RUN) or None,
        "model_uri": f"models:/{version.model_id}"
        if getattr(version, "model_id", None)
        else version.source,
        "metric": metric,
        "metric_value": _number(tags.get(TAG_METRIC_VALUE)),
        "created_at": _iso(version.creation_timestamp),
        "tags": tags,
    }


# -- changing -----------------------------------------------------------------------------------
def register(
    client: MlflowClient,
    *,
    model_uri: str,
    name: str,
    alias: str | None,
    source_run_id: str | None,
    lineage: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create a new version of ``name`` from ``model_uri`` with lineage tags; set ``alias``.

    Lineage tags: the source run, and the run's prompt, dataset fingerprint, session,
    target, task, and main metric with its test value.
    """
    from mlflow.exceptions import MlflowException

    created = False
    with mlflow_errors(f"cannot register model {name!r}"):
        try:
            client.get_registered_model(name)
        except MlflowException:
            try:
                client.create_registered_model(name, description="Registered by mlpilot")
                created = True
            except MlflowException as exc:
                if "already exists" not in str(exc):  # another process created it meanwhile
                    raise
    tags = {TAG_SOURCE_RUN: source_run_id or "", **(lineage or {})}
    if source_run_id:
        run = client.get_run(source_run_id)
        for key in LINEAGE_RUN_TAGS:
            if run.data.tags.get(key):
                tags.setdefault(key, run.data.tags[key])
        metric = tags.get(vocab.TAG_METRIC)
        value = run.data.metrics.get(f"test_{metric}") if metric else None
        if value is not None:
            tags.setdefault(TAG_METRIC_VALUE, f"{value:.6g}")
    tags = {k: str(v)[:5000] for k, v in tags.items() if v not in (None, "")}
    model_id = model_uri.split("/", 1)[1] if model_uri.startswith("models:/m-") else None
    with mlflow_errors(f"cannot register {model_uri} as {name!r}"):
        # MLflow's database registry resolves models:/m-… through the *global* tracking
        # URI, not this client's (a TODO in MLflow): point it at this client's store
        with scoped_tracking_uri(client.tracking_uri):
            version = client.create_model_version(
                name, source=model_uri, run_id=source_run_id, tags=tags, model_id=model_id
            )
        if alias:
            _set_alias_or_undo(client, name, alias, str(version.version), created)
    return {
        "name": name,
        "version": str(version.version),
        "alias": alias,
        "source_run": source_run_id,
        "model_uri": model_uri,
    }


def _set_alias_or_undo(
    client: MlflowClient, name: str, alias: str, version: str, created: bool
) -> None:
    """Point the alias at the new version; if that fails, the version (and a model created
    for it) is removed again: a registration is whole or absent."""
    try:
        client.set_registered_model_alias(name, alias, version)
    except BaseException:
        try:
            client.delete_model_version(name, version)
            if created:
                client.delete_registered_model(name)
        except Exception as exc:  # the alias error is the one to report
            logger.warning("could not undo %s version %s: %s", name, version, exc)
        raise


def promote(client: MlflowClient, name: str, version: str, alias: str) -> dict[str, Any]:
    """Point ``name@alias`` at ``version``; returns the version it pointed to before."""
    from mlflow.exceptions import MlflowException

    with mlflow_errors(f"no version {version} of model {name!r}"):
        client.get_model_version(name, str(version))
    previous = None
    with contextlib.suppress(MlflowException):
        previous = str(client.get_model_version_by_alias(name, alias).version)
    with mlflow_errors(f"cannot set alias {alias!r} on {name}/{version}"):
        client.set_registered_model_alias(name, alias, str(version))
    return {"name": name, "alias": alias, "version": str(version), "previous": previous}


#: MLflow's own alias checks, private and renamed between releases (3.18 dropped
#: ``model_`` from both names): the first name found is used
_ALIAS_CHECKS = (
    ("_validate_alias_name", "_validate_model_alias_name"),
    ("_validate_alias_name_reserved", "_validate_model_alias_name_reserved"),
)
#: what those checks refuse, for an MLflow that has neither name (the same rules)
_ALIAS_CHARACTERS = re.compile(r"[\w\-]+")
_ALIAS_VERSION = re.compile(r"[vV]\d+")
_ALIAS_MAX = 255


def alias_problem(alias: str) -> str | None:
    """Why MLflow would refuse ``alias`` (its own rules, in one line), or None."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils import validation

    checks = [
        next((getattr(validation, n) for n in names if hasattr(validation, n)), None)
        for names in _ALIAS_CHECKS
    ]
    if None in checks:
        return _own_alias_problem(alias)
    try:
        for check in checks:
            check(alias)
    except MlflowException as exc:
        return exc.message.splitlines()[0]
    return None


def _own_alias_problem(alias: str) -> str | None:
    if not alias:
        return "Registered model alias name cannot be empty."
    if not _ALIAS_CHARACTERS.fullmatch(alias) or len(alias) > _ALIAS_MAX:
        return (
            f"Invalid alias name: {alias!r}: letters, digits, underscores and dashes, at most "
            f"{_ALIAS_MAX} characters."
        )
    if alias.lower() == "latest":
        return "'latest' alias name (case insensitive) is reserved."
    if _ALIAS_VERSION.fullmatch(alias):
        return f"Version alias name {alias!r} is reserved."
    return None


def remove_alias(client: MlflowClient, name: str, alias: str) -> dict[str, Any]:
    """Delete ``name@alias``; returns the version it pointed to (the version stays)."""
    with mlflow_errors(f"model {name!r} has no alias {alias!r}"):
        previous = str(client.get_model_version_by_alias(name, alias).version)
    with mlflow_errors(f"cannot delete alias {alias!r} of {name}"):
        client.delete_registered_model_alias(name, alias)
    return {"name": name, "alias": alias, "version": None, "previous": previous}


# -- lineage ------------------------------------------------------------------------------------
def describe_version(client: MlflowClient, ref: ModelRef, store: Any = None) -> dict[str, Any]:
    """A version with its lineage: source run, prompt, plan, dataset, metrics.

    ``store`` (the metadata store, optional) supplies the run document when it has one;
    otherwise everything comes from MLflow (tags and the run's ``plan.json``).
    """
    version = get_version(client, ref)
    with mlflow_errors(f"no registered model {ref.name!r}"):
        model = client.get_registered_model(ref.name)
    aliases = sorted(a for a, v in (model.aliases or {}).items() if str(v) == str(version.version))
    summary = _version_summary(version, aliases)
    tags = summary["tags"]
    lineage: dict[str, Any] = {
        "source_run": summary["source_run"],
        "prompt": tags.get(vocab.TAG_PROMPT),
        "dataset_fingerprint": tags.get(vocab.TAG_FINGERPRINT),
        "target": tags.get(vocab.TAG_TARGET),
        "task": tags.get(vocab.TAG_TASK),
        "metric": summary["metric"],
        "metric_value": summary["metric_value"],
        "plan": None,
        "dataset": None,
        "metrics": {},
        "run_status": None,
        "experiment_id": None,
    }
    run_id = summary["source_run"]
    if run_id:
        _add_run_lineage(client, run_id, lineage, store)
    return {**{k: v for k, v in summary.items() if k != "tags"}, "tags": tags, "lineage": lineage}


def _add_run_lineage(
    client: MlflowClient, run_id: str, lineage: dict[str, Any], store: Any
) -> None:
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException:
        lineage["run_status"] = "deleted"
        return
    lineage["run_status"] = run.info.status
    lineage["experiment_id"] = run.info.experiment_id
    lineage["metrics"] = dict(sorted(run.data.metrics.items()))
    lineage["prompt"] = lineage["prompt"] or run.data.tags.get(vocab.TAG_PROMPT)
    lineage["dataset_fingerprint"] = lineage["dataset_fingerprint"] or run.data.tags.get(
        vocab.TAG_FINGERPRINT
    )
    doc = None
    if store is not None:
        try:
            doc = store.get_run(run_id)
        except Exception as exc:  # a store that is down only costs the extras
            logger.debug("run document unavailable for the lineage: %s", exc)
    if doc:
        lineage["plan"] = doc.get("plan")
        lineage["prompt"] = doc.get("prompt") or lineage["prompt"]
        lineage["dataset"] = doc.get("dataset")
        lineage["session_id"] = doc.get("session_id")
    if lineage["plan"] is None:
        lineage["plan"] = load_json_artifact(client, run_id, "plan.json")
    if lineage["dataset"] is None:
        lineage["dataset"] = _dataset_input(run)


def load_json_artifact(client: MlflowClient, run_id: str, path: str) -> Any:
    """A run's JSON artifact, or None when it has none."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            local = client.download_artifacts(run_id, path, tmp)
            return json.loads(Path(local).read_text(encoding="utf-8"))
    except Exception as exc:
        logger.debug("JSON artifact not readable: %s", exc)
        return None


def _dataset_input(run: Any) -> dict[str, Any] | None:
    inputs = getattr(getattr(run, "inputs", None), "dataset_inputs", None) or []
    if not inputs:
        return None
    dataset = inputs[0].dataset
    out: dict[str, Any] = {"name": dataset.name, "digest": dataset.digest}
    with contextlib.suppress(ValueError, TypeError, AttributeError):  # not MLflow's JSON
        out["source"] = json.loads(dataset.source).get("uri") or dataset.source
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        profile = json.loads(dataset.profile or "{}")
        out["rows"] = profile.get("num_rows")
    return out


def _iso(millis: int | None) -> str | None:
    if not millis:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


# -- both stores (issue 28) ---------------------------------------------------------------------
#: how many registry changes a run document keeps (the newest): a model whose alias moves
#: every hour must not grow its run's document without bound
MAX_RECORDED_CHANGES = 200


def register_run(
    client: MlflowClient, store: Any, run_id: str, name: str, alias: str | None, by: str
) -> dict[str, Any]:
    """Register the model run ``run_id`` logged as a new version of ``name`` (and point
    ``alias`` at it), then note it on the run's document: ``mlpilot models register`` and
    the dashboard both come here. Only the logged model's URI is handed to the registry:
    nothing is downloaded, loaded or unpickled."""
    source_run, model_uri = resolve_source(client, None, run_id, None)
    version = register(
        client, model_uri=model_uri, name=name, alias=alias, source_run_id=source_run
    )
    record_change(
        store,
        source_run,
        {"action": "registered", "name": name, "version": version["version"], "alias": alias},
        by,
    )
    return version


def move_alias(
    client: MlflowClient, store: Any, name: str, version: str, alias: str, by: str
) -> dict[str, Any]:
    """``promote`` recorded on the run document of the version the alias now names."""
    result = promote(client, name, version, alias)
    action = "alias moved" if result["previous"] not in (None, str(version)) else "alias set"
    change: dict[str, Any] = {
        "action": action,
        "name": name,
        "version": str(version),
        "alias": alias,
    }
    change["previous"] = result["previous"]
    record_change(store, _run_of(client, name, str(version)), change, by)
    return result


def delete_alias(
    client: MlflowClient, store: Any, name: str, alias: str, by: str
) -> dict[str, Any]:
    """``remove_alias`` recorded on the run document of the version the alias named."""
    result = remove_alias(client, name, alias)
    change = {"action": "alias deleted", "name": name, "version": None, "alias": alias}
    run_id = _run_of(client, name, str(result["previous"]))
    record_change(store, run_id, {**change, "previous": result["previous"]}, by)
    return result


def _run_of(client: MlflowClient, name: str, version: str) -> str | None:
    try:
        found = client.get_model_version(name, version)
    except Exception as exc:  # the registry already changed; only the record is skipped
        logger.debug("no source run for %s/%s: %s", name, version, exc)
        return None
    return found.run_id or dict(found.tags or {}).get(TAG_SOURCE_RUN) or None


def record_change(store: Any, run_id: str | None, change: dict[str, Any], by: str) -> bool:
    """Note a registry change on the run's metadata document (DESIGN §5 ``model``): the
    version a registration made in ``model.registered_name``/``model.version``, and every
    change, alias moves included, appended to ``model.registry``. A run without a document
    (not mlpilot's) or a store that is down is skipped: MLflow's registry is the record,
    and the reconciler repairs the registered version. Whether it was recorded."""
    import uuid
    from datetime import datetime, timezone

    from mlpilot.platform.errors import MlpilotError

    if store is None or not run_id:
        return False
    try:
        doc = store.get_run(run_id)
        if doc is None:
            return False
        # text, not a datetime: every backend returns it as it was written
        at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        entry = {"id": uuid.uuid4().hex[:12], "at": at, **change, "by": by}
        model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
        history = [*(model.get("registry") or []), entry][-MAX_RECORDED_CHANGES:]
        updated = {**model, "registry": history}
        if change["action"] == "registered":
            updated.update(registered_name=change["name"], version=change["version"])
        # the whole sub-document: a ``model: null`` takes no dotted field
        store.update_run(run_id, {"model": updated})
    except MlpilotError as exc:  # down, refused, full: MLflow has already changed
        logger.info("registry change not recorded on run %s: %s", run_id, exc)
        return False
    return True
