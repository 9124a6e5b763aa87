"""Finding runs: lists, one run in full, and side-by-side comparisons.

The metadata store holds states, events, the plan and timings; MLflow holds the run,
its metrics, params and artifacts. Lists read the store (or MLflow alone when the store
is down); ``show`` and ``compare`` merge both. Run ids may be unique prefixes.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking import mlflow_store as ms
from mlpilot.tracking import vocab
from mlpilot.tracking.metadata import StoreUnavailable

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlflow import MlflowClient

STATES = vocab.STATES
SUMMARY_METRIC_PREFIXES = ("test_", "cv_", "hpo_")


def check_status(status: str | None) -> str | None:
    if status is None:
        return None
    upper = status.strip().upper()
    if upper not in STATES:
        raise TrackingError(f"unknown status {status!r}", hint=f"use one of: {', '.join(STATES)}")
    return upper


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat(timespec="seconds")
    return value


def _duration(doc: dict[str, Any]) -> float | None:
    start, end = doc.get("created_at"), doc.get("finished_at")
    if isinstance(start, datetime) and isinstance(end, datetime):
        return round((end - start).total_seconds(), 2)
    total = (doc.get("timings") or {}).get("total")
    return float(total) if isinstance(total, (int, float)) else None


def summary_from_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """One line of ``runs list`` from a run document."""
    plan = doc.get("plan") or {}
    metrics = doc.get("metrics") or {}
    main = doc.get("main_metric")
    return {
        "run_id": str(doc["_id"]),
        "created_at": _iso(doc.get("created_at")),
        "experiment": doc.get("experiment"),
        "status": doc.get("status"),
        "template": plan.get("template"),
        "engine": (doc.get("engine") or {}).get("used"),
        "prompt": doc.get("prompt") or "",
        "main_metric": main,
        "value": metrics.get(f"test_{main}") if main else None,
        "duration_s": _duration(doc),
    }


def summary_from_mlflow(run: Any, experiment: str | None) -> dict[str, Any]:
    """The same line from an MLflow run, when the store cannot be read."""
    tags = run.data.tags
    state = vocab.MLFLOW_TO_STATE.get(run.info.status) or tags.get(vocab.TAG_STATE) or "RUNNING"
    main = tags.get(vocab.TAG_METRIC) or None
    start, end = run.info.start_time, run.info.end_time
    return {
        "run_id": run.info.run_id,
        "created_at": _iso(datetime.fromtimestamp(start / 1000, tz=timezone.utc))
        if start
        else None,
        "experiment": experiment,
        "status": state,
        "template": tags.get(vocab.TAG_TEMPLATE),
        "engine": ms.engine_of(tags)["used"],
        "prompt": tags.get(vocab.TAG_PROMPT, ""),
        "main_metric": main,
        "value": run.data.metrics.get(f"test_{main}") if main else None,
        "duration_s": round((end - start) / 1000, 2) if start and end else None,
    }


def list_runs(
    store: Any, *, experiment: str | None = None, status: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    """The newest run documents, optionally of one experiment and/or status."""
    query: dict[str, Any] = {}
    if experiment:
        query["experiment"] = experiment
    if status:
        query["status"] = check_status(status)
    return [summary_from_doc(d) for d in store.find_runs(query, limit=limit)]


def list_runs_from_mlflow(
    client: MlflowClient,
    *,
    experiment: str | None = None,
    status: str | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """``list_runs`` answered by MLflow alone (agent runs; states as far as MLflow knows)."""
    if experiment:
        found = client.get_experiment_by_name(experiment)
        ids = [found.experiment_id] if found else []
    else:
        ids = ms.all_experiment_ids(client)
    if not ids:
        return []
    names = {i: _experiment_name(client, i) for i in ids}
    wanted = check_status(status)
    filters = [vocab.AGENT_RUNS_FILTER]
    if wanted in vocab.TERMINAL_STATES:
        filters.append(f"attributes.status = '{vocab.RunState(wanted).mlflow_status}'")
    elif wanted:
        filters.append("attributes.status = 'RUNNING'")
    runs = ms.search_all_runs(
        client,
        ids,
        " and ".join(filters),
        order_by=["attributes.start_time DESC"],
        limit=limit if not wanted or wanted in vocab.TERMINAL_STATES else None,
    )
    out = [summary_from_mlflow(r, names.get(r.info.experiment_id)) for r in runs]
    if wanted:
        out = [r for r in out if r["status"] == wanted]
    return out[:limit]


def _experiment_name(client: MlflowClient, experiment_id: str) -> str | None:
    try:
        return client.get_experiment(experiment_id).name
    except Exception as exc:
        logger.debug("experiment name not found: %s", exc)
        return None


# -- one run -----------------------------------------------------------------------------------
def resolve(client: MlflowClient | None, store: Any, ref: str) -> str:
    """The full run id for ``ref`` (an id or a unique prefix), from the store or MLflow."""
    from mlpilot.tracking.registry import resolve_run_id

    ref = ref.strip()
    if store is not None:
        with contextlib.suppress(StoreUnavailable):
            if store.get_run(ref) is not None:
                return ref
            if len(ref) >= 4:
                found = store.run_ids_with_prefix(ref, limit=2)
                if len(found) == 1:
                    return found[0]
                if len(found) > 1:
                    raise TrackingError(
                        f"run id prefix {ref!r} is ambiguous", hint="give more characters"
                    )
    if client is None:
        raise TrackingError(f"no run with id {ref!r}", hint="list runs with: mlpilot runs list")
    return resolve_run_id(client, None, ref)


def show(client: MlflowClient | None, store: Any, ref: str) -> dict[str, Any]:
    """Everything about one run: plan, code path, metrics, timings, events, and more."""
    run_id = resolve(client, store, ref)
    doc = None
    notes: list[str] = []
    store_answered = False
    if store is not None:
        try:
            doc = store.get_run(run_id)
            store_answered = True
        except StoreUnavailable as exc:
            notes.append(f"metadata store unavailable: {exc.message}")
    run = None
    if client is not None:
        from mlflow.exceptions import MlflowException

        try:
            run = client.get_run(run_id)
        except MlflowException:
            notes.append("MLflow has no run with this id")
    if doc is None and run is None:
        raise TrackingError(f"no run with id {run_id!r}", hint="list runs with: mlpilot runs list")
    if doc is None and store_answered:
        notes.append("no metadata document for this run (mlpilot doctor --repair rebuilds it)")
    return _merge(run_id, doc, run, client, notes)


def _merge(
    run_id: str, doc: dict[str, Any] | None, run: Any, client: Any, notes: list[str]
) -> dict[str, Any]:
    doc = doc or {}
    tags = run.data.tags if run is not None else {}
    metrics = dict(run.data.metrics) if run is not None else dict(doc.get("metrics") or {})
    plan = doc.get("plan")
    if plan is None and run is not None:
        from mlpilot.tracking.registry import load_json_artifact

        plan = load_json_artifact(client, run_id, "plan.json")
    state = doc.get("status")
    if state is None and run is not None:
        state = vocab.MLFLOW_TO_STATE.get(run.info.status) or tags.get(vocab.TAG_STATE)
    engine = doc.get("engine") or (ms.engine_of(tags) if tags else None)
    created = doc.get("created_at")
    if created is None and run is not None and run.info.start_time:
        created = datetime.fromtimestamp(run.info.start_time / 1000, tz=timezone.utc)
    finished = doc.get("finished_at")
    if finished is None and run is not None and run.info.end_time:
        finished = datetime.fromtimestamp(run.info.end_time / 1000, tz=timezone.utc)
    timings = doc.get("timings") or {
        k[5:-2]: v for k, v in metrics.items() if k.startswith("time_") and k.endswith("_s")
    }
    return {
        "run_id": run_id,
        "experiment": doc.get("experiment"),
        "experiment_id": doc.get("experiment_id") or (run.info.experiment_id if run else None),
        "status": state,
        "mlflow_status": run.info.status if run is not None else None,
        "prompt": doc.get("prompt") or tags.get(vocab.TAG_PROMPT),
        "planner": doc.get("planner") or tags.get(vocab.TAG_PLANNER),
        "template": (plan or {}).get("template") or tags.get(vocab.TAG_TEMPLATE),
        "session_id": doc.get("session_id") or tags.get(vocab.TAG_SESSION),
        "engine": engine,
        "created_at": _iso(created),
        "finished_at": _iso(finished),
        "duration_s": _duration(
            {"created_at": created, "finished_at": finished, "timings": timings}
        ),
        "plan": plan,
        "pipeline_path": doc.get("pipeline_path"),
        "run_dir": doc.get("run_dir"),
        "artifact_uri": run.info.artifact_uri if run is not None else None,
        "dataset": doc.get("dataset")
        or (
            {"fingerprint": tags[vocab.TAG_FINGERPRINT]} if vocab.TAG_FINGERPRINT in tags else None
        ),
        "target": doc.get("target") or tags.get(vocab.TAG_TARGET),
        "task": doc.get("task") or tags.get(vocab.TAG_TASK),
        "main_metric": doc.get("main_metric") or tags.get(vocab.TAG_METRIC),
        "metrics": dict(sorted(metrics.items())),
        "timings": timings,
        "params": dict(sorted(run.data.params.items())) if run is not None else {},
        "events": [
            {"at": _iso(e.get("at")), "state": e.get("state"), "message": e.get("message", "")}
            for e in doc.get("events") or []
            if isinstance(e, dict)
        ],
        "model": doc.get("model"),
        "study": doc.get("study")
        or ({"name": tags[vocab.TAG_OPTUNA_STUDY]} if vocab.TAG_OPTUNA_STUDY in tags else None),
        "error": doc.get("error")
        or ({"message": tags[vocab.TAG_ERROR]} if vocab.TAG_ERROR in tags else None),
        "notes": doc.get("notes") or [],
        "containment": doc.get("containment"),
        "sources": [
            s for s, present in (("mongodb", bool(doc)), ("mlflow", run is not None)) if present
        ],
        "warnings": notes,
    }


# -- several runs ------------------------------------------------------------------------------
def compare(client: MlflowClient | None, store: Any, refs: list[str]) -> dict[str, Any]:
    """Runs side by side: their fields, metrics, timings and the params that differ."""
    if len(refs) < 2:
        raise TrackingError("compare needs at least two run ids")
    runs = [show(client, store, ref) for ref in refs]
    ids = [r["run_id"] for r in runs]
    if len(set(ids)) != len(ids):
        raise TrackingError("the same run was given twice")
    metric_keys = sorted(
        {k for r in runs for k in r["metrics"] if not (k.startswith("time_") and k.endswith("_s"))}
    )
    stages = sorted({k for r in runs for k in r["timings"]})
    params = sorted({k for r in runs for k in r["params"]})
    differing = [p for p in params if len({r["params"].get(p) for r in runs}) > 1]
    best: dict[str, str] = {}
    for key in metric_keys:
        values = {r["run_id"]: r["metrics"].get(key) for r in runs}
        present = {k: v for k, v in values.items() if isinstance(v, (int, float))}
        if len(present) > 1 and key.startswith(("test_", "cv_")):
            lower = vocab.direction(key) == "minimize"
            best[key] = (min if lower else max)(present, key=present.get)
    return {
        "runs": [
            {
                k: r[k]
                for k in (
                    "run_id",
                    "experiment",
                    "status",
                    "template",
                    "planner",
                    "engine",
                    "prompt",
                    "created_at",
                    "duration_s",
                    "dataset",
                    "main_metric",
                    "metrics",
                    "timings",
                    "params",
                )
            }
            for r in runs
        ],
        "metric_keys": metric_keys,
        "stages": stages,
        "differing_params": differing,
        "best": best,
    }
