"""The MLflow Model Registry: versions with lineage tags, and aliases (never stages)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import TrackingError

if TYPE_CHECKING:
    from mlflow import MlflowClient

LOWER_IS_BETTER = frozenset({"rmse", "mae", "log_loss"})
DEFAULT_METRICS = ("rmse", "roc_auc", "accuracy", "r2")


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
    client: MlflowClient, experiment_id: str, run_id: str | None, metric: str | None
) -> tuple[str, str]:
    """(source run id, model uri) for ``run_id``, or for the experiment's best run."""
    if run_id is None:
        run_id, _ = best_run(client, experiment_id, metric)
    else:
        run_id = resolve_run_id(client, experiment_id, run_id)
    uri = model_uri_of_run(client, run_id)
    if uri is None:
        raise TrackingError(f"run {run_id} logged no model", hint="pick a run that trained a model")
    return run_id, uri


def resolve_run_id(client: MlflowClient, experiment_id: str | None, run_id: str) -> str:
    """Accept a full run id or a unique prefix of one."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id).info.run_id
    except MlflowException:
        pass
    if experiment_id is not None and len(run_id) >= 4:
        runs = client.search_runs([experiment_id], max_results=1000)
        matches = [r.info.run_id for r in runs if r.info.run_id.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise TrackingError(
                f"run id prefix {run_id!r} is ambiguous ({len(matches)} runs)",
                hint="give more characters",
            )
    raise TrackingError(f"no run with id {run_id!r}", hint="list runs with: mlpilot runs list")


def register(
    client: MlflowClient,
    *,
    model_uri: str,
    name: str,
    alias: str | None,
    source_run_id: str | None,
    lineage: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create a new version of ``name`` from ``model_uri`` with lineage tags; set ``alias``."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name, description="Registered by mlpilot")
    tags = {"mlpilot.source_run": source_run_id or "", **(lineage or {})}
    if source_run_id:
        run = client.get_run(source_run_id)
        for key in ("mlpilot.prompt", "mlpilot.dataset_fingerprint", "mlpilot.session_id"):
            if key in run.data.tags:
                tags.setdefault(key, run.data.tags[key])
    model_id = model_uri.split("/", 1)[1] if model_uri.startswith("models:/m-") else None
    version = client.create_model_version(
        name, source=model_uri, run_id=source_run_id, tags=tags, model_id=model_id
    )
    if alias:
        client.set_registered_model_alias(name, alias, version.version)
    return {
        "name": name,
        "version": str(version.version),
        "alias": alias,
        "source_run": source_run_id,
        "model_uri": model_uri,
    }
