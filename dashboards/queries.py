"""All data the dashboard shows, read from MongoDB (run documents), MLflow and Optuna storage.

Pages call these functions only; nothing here renders anything. Reads are bounded (paging,
downsampling) so a history of 10,000 runs or a study of 20,000 trials stays responsive.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mlpilot.platform.config import Settings, get_settings
from mlpilot.tracking import registry, vocab

logger = logging.getLogger(__name__)

_STATE: dict[str, Any] = {}
_LOCK = threading.RLock()
SORTABLE = {"created_at", "status", "experiment", "template", "session_id"}
MAX_TRIAL_POINTS = 2000
#: lines in a parallel-coordinates plot: more only blur it and slow the browser down
MAX_PARALLEL_LINES = 200
STUDY_CACHE_S = 30.0
#: the most the dashboard reads of a run folder's pipeline.py
PIPELINE_MAX_BYTES = 4 * 2**20


def configure(settings: Settings | None = None) -> None:
    """Point the queries at a store (the app calls this once at start-up)."""
    with _LOCK:
        _STATE.clear()
        _STATE["settings"] = settings or get_settings()


def settings() -> Settings:
    if "settings" not in _STATE:
        configure()
    return _STATE["settings"]


_THREAD = threading.local()


def store() -> Any:
    """The metadata store, one per server thread (the embedded SQLite file is thread-bound)."""
    current = getattr(_THREAD, "store", None)
    if current is None or getattr(_THREAD, "settings", None) is not settings():
        from mlpilot.tracking.metadata import open_store

        current = _THREAD.store = open_store(settings())
        _THREAD.settings = settings()
    return current


def client() -> Any:
    with _LOCK:
        if "client" not in _STATE:
            from mlpilot.tracking.mlflow_store import make_client

            _STATE["client"] = make_client(settings())
        return _STATE["client"]


def mlflow_ui_url(run: dict[str, Any] | None = None) -> str | None:
    """A link into the MLflow UI when the tracking store is a server."""
    uri = settings().tracking_uri
    if not uri.startswith(("http://", "https://")):
        return None
    base = uri.rstrip("/")
    if run and run.get("experiment_id") and run.get("_id"):
        return f"{base}/#/experiments/{run['experiment_id']}/runs/{run['_id']}"
    return base


# -- runs ------------------------------------------------------------------------------------
@dataclass
class RunsPage:
    rows: list[dict[str, Any]]
    total: int


def runs_query(
    experiment: str | None = None,
    status: str | None = None,
    session: str | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if experiment:
        query["experiment"] = experiment
    if status:
        query["status"] = status
    if session:
        query["session_id"] = session
    if prompt:
        query["prompt"] = {"$regex": re.escape(prompt), "$options": "i"}
    return query


def list_runs(
    *,
    experiment: str | None = None,
    status: str | None = None,
    session: str | None = None,
    prompt: str | None = None,
    sort_by: str = "created_at",
    descending: bool = True,
    page: int = 0,
    page_size: int = 25,
    metric: str | None = None,
) -> RunsPage:
    """One page of agent runs, filtered and sorted in the store (never all in memory)."""
    query = runs_query(experiment, status, session, prompt)
    key = (
        sort_by
        if sort_by in SORTABLE
        else f"metrics.{sort_by}"
        if re.fullmatch(r"[\w.]+", sort_by)
        else "created_at"
    )
    projection = {
        "prompt": 1,
        "status": 1,
        "experiment": 1,
        "experiment_id": 1,
        "session_id": 1,
        "created_at": 1,
        "metrics": 1,
        "main_metric": 1,
        "plan.template": 1,
        "engine": 1,
        "error": 1,
    }
    docs = store().find_runs(
        query,
        sort=[(key, -1 if descending else 1)],
        limit=page_size,
        skip=page * page_size,
        projection=projection,
    )
    total = store().count_runs(query)
    rows = []
    for doc in docs:
        metrics = doc.get("metrics") or {}
        main = metric or doc.get("main_metric")
        rows.append(
            {
                "run_id": doc["_id"],
                "created_at": doc.get("created_at"),
                "status": doc.get("status"),
                "experiment": doc.get("experiment"),
                "experiment_id": doc.get("experiment_id"),
                "session_id": doc.get("session_id"),
                "prompt": doc.get("prompt") or "",
                "template": ((doc.get("plan") or {}).get("template")) or "",
                "engine": engine_label(doc.get("engine")),
                "metric": main or "",
                "value": metrics.get(f"test_{main}") if main else None,
                "error": ((doc.get("error") or {}).get("message")) or "",
            }
        )
    return RunsPage(rows, total)


def experiments() -> list[str]:
    try:
        return sorted(e.name for e in client().search_experiments())
    except Exception as exc:  # the dashboard still lists runs from MongoDB when MLflow is down
        logger.debug("the dashboard still lists runs from MongoDB when MLflow is down: %s", exc)
        return []


def metric_names(limit: int = 200) -> list[str]:
    docs = store().find_runs({}, sort=[("created_at", -1)], limit=limit, projection={"metrics": 1})
    names = {
        k.removeprefix("test_")
        for d in docs
        for k in (d.get("metrics") or {})
        if k.startswith("test_")
    }
    return sorted(names)


# -- one run -----------------------------------------------------------------------------------
def engine_label(engine: dict[str, Any] | None) -> str:
    """The engine a run used, and that it is the CPU rerun of a failed GPU leg."""
    engine = engine or {}
    used = str(engine.get("used") or "")
    fallback = engine.get("fallback")
    if fallback:
        return f"{used} (rerun: the {fallback.get('from') or 'gpu'} leg failed)"
    return used


def run_detail(run_id: str) -> dict[str, Any] | None:
    doc = store().get_run(run_id)
    if doc is None:
        return None
    detail: dict[str, Any] = {
        "doc": doc,
        "mlflow": None,
        "pipeline": None,
        "plots": [],
        "registry": [],
    }
    try:
        run = client().get_run(run_id)
        detail["mlflow"] = {
            "status": run.info.status,
            "params": dict(run.data.params),
            "metrics": dict(run.data.metrics),
            "tags": dict(run.data.tags),
        }
    except Exception as exc:
        logger.debug("MLflow details unavailable for the run: %s", exc)
        detail["mlflow_error"] = str(exc).splitlines()[0][:200]
    detail["pipeline"] = _pipeline_source(doc)
    detail["plots"] = _plots(run_id)
    detail["registry"] = _versions_of_run(run_id)
    detail["ui_url"] = mlflow_ui_url(doc)
    return detail


def cancel_run(run_id: str) -> str:
    """Ask the run's owner to stop it (``mlpilot runs cancel``); one line for the page."""
    from mlpilot.platform.agent.cancelling import cancel_run as cancel
    from mlpilot.platform.errors import MlpilotError

    try:
        return cancel(settings(), run_id, wait_s=10.0).message
    except MlpilotError as exc:
        return exc.one_line()


def _pipeline_source(doc: dict[str, Any]) -> str | None:
    from pathlib import Path

    from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

    path = doc.get("pipeline_path")
    if path:
        try:  # through the folder's handle: a link planted in the run folder is not followed
            with RunFolder(Path(path).parent) as folder:
                text = folder.read_text(Path(path).name, PIPELINE_MAX_BYTES)
        except UnsafeFile as exc:
            logger.debug("pipeline.py not read from its run folder: %s", exc)
            text = None
        if text is not None:
            return text
    try:
        local = client().download_artifacts(doc["_id"], "pipeline.py")
        return Path(local).read_text(encoding="utf-8", errors="replace")
    except Exception as exc:
        logger.debug("pipeline.py not readable: %s", exc)
        return None


def _plots(run_id: str, limit: int = 12) -> list[dict[str, str]]:
    """PNG plots of a run as data URIs (bytes from the artifact store, never HTML)."""
    from pathlib import Path

    try:
        items = client().list_artifacts(run_id, "plots")
    except Exception as exc:
        logger.debug("plots not readable: %s", exc)
        return []
    plots = []
    for item in items[:limit]:
        if item.is_dir or not item.path.endswith(".png"):
            continue
        try:
            data = Path(client().download_artifacts(run_id, item.path)).read_bytes()
        except Exception as exc:
            logger.debug("plots not readable: %s", exc)
            continue
        plots.append(
            {
                "name": item.path.split("/")[-1],
                "src": "data:image/png;base64," + base64.b64encode(data).decode(),
            }
        )
    return plots


def _versions_of_run(run_id: str) -> list[dict[str, Any]]:
    quoted = registry.quote_filter_value(run_id)
    if quoted is None:
        return []
    try:
        versions = client().search_model_versions(f"run_id = {quoted}")
    except Exception as exc:
        logger.debug("registry versions unavailable: %s", exc)
        return []
    return [
        {"name": v.name, "version": v.version, "aliases": list(getattr(v, "aliases", []) or [])}
        for v in versions
    ]


def compare_runs(run_ids: list[str]) -> dict[str, Any]:
    rows = []
    for run_id in run_ids:
        doc = store().get_run(run_id) or {"_id": run_id}
        params: dict[str, str] = {}
        try:
            params = dict(client().get_run(run_id).data.params)
        except Exception as exc:  # the run's MLflow side is gone: metrics from MongoDB only
            logger.debug("parameters of run %s unavailable: %s", run_id, exc)
        rows.append(
            {
                "run_id": run_id,
                "prompt": doc.get("prompt", ""),
                "status": doc.get("status"),
                "metrics": doc.get("metrics") or {},
                "params": params,
                "timings": doc.get("timings") or {},
            }
        )
    metric_keys = sorted({k for r in rows for k in r["metrics"] if not k.endswith("_std")})
    param_keys = sorted({k for r in rows for k in r["params"]})
    differing = [k for k in param_keys if len({r["params"].get(k) for r in rows}) > 1]
    return {"rows": rows, "metric_keys": metric_keys, "differing_params": differing}


def recent_run_options(limit: int = 200) -> list[dict[str, str]]:
    docs = store().find_runs(
        {}, sort=[("created_at", -1)], limit=limit, projection={"prompt": 1, "status": 1}
    )
    return [
        {
            "label": f"{d['_id'][:8]} · {d.get('status', '')} · {(d.get('prompt') or '')[:60]}",
            "value": d["_id"],
        }
        for d in docs
    ]


# -- engines -------------------------------------------------------------------------------------
def benchmarks(limit: int = 500) -> list[dict[str, Any]]:
    return store().find_benchmarks({}, limit=limit)


# -- studies -------------------------------------------------------------------------------------
def _optuna_storage() -> Any:
    with _LOCK:
        if "optuna" not in _STATE:
            from mlpilot.platform.ml.hpo import open_storage

            _STATE["optuna"] = open_storage(settings().optuna_storage)
        return _STATE["optuna"]


def studies() -> list[dict[str, Any]]:
    """Every study, newest first. Reads the storage's own index: optuna's study summaries
    walk every trial of every study and take seconds on a 20,000-trial history."""
    storage = _optuna_storage()
    try:
        frozen = storage.get_all_studies()
    except Exception as exc:
        logger.debug("Optuna storage unavailable: %s", exc)
        return []
    out = []
    for study in sorted(frozen, key=lambda s: s._study_id, reverse=True):
        out.append(
            {
                "name": study.study_name,
                "n_trials": len(storage.get_all_trials(study._study_id, deepcopy=False)),
                "direction": study.direction.name.lower()
                if len(study.directions) == 1
                else "multi",
            }
        )
    return out


def study_trials(name: str) -> dict[str, Any]:
    """Trials of a study as columns, cached briefly and downsampled for plotting."""
    now = time.monotonic()
    cache = _STATE.setdefault("study_cache", {})
    hit = cache.get(name)
    if hit and now - hit[0] < STUDY_CACHE_S:
        return hit[1]
    data = _load_study(name)
    cache[name] = (now, data)
    return data


@lru_cache(maxsize=32)
def _importances(name: str, n_trials: int) -> dict[str, float]:
    import optuna

    study = optuna.load_study(study_name=name, storage=_optuna_storage())
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if len(complete) < 3:
        return {}
    sample = complete if len(complete) <= 1000 else complete[:: len(complete) // 1000]
    view = optuna.create_study(direction=study.direction)
    view.add_trials(sample)
    try:
        return {k: float(v) for k, v in optuna.importance.get_param_importances(view).items()}
    except Exception as exc:
        logger.debug("parameter importances unavailable: %s", exc)
        return {}


def _load_study(name: str) -> dict[str, Any]:
    import numpy as np
    import optuna

    study = optuna.load_study(study_name=name, storage=_optuna_storage())
    trials = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state.name == "COMPLETE" and t.value is not None
    ]
    numbers = np.array([t.number for t in trials], dtype=int)
    values = np.array([t.value for t in trials], dtype=float)
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    best = (
        np.maximum.accumulate(values)
        if maximize and len(values)
        else np.minimum.accumulate(values)
        if len(values)
        else values
    )
    keep = _downsample(len(trials), MAX_TRIAL_POINTS)
    params = sorted({k for t in trials for k in t.params})
    param_rows = [
        {**{k: trials[i].params.get(k) for k in params}, "value": values[i]}
        for i in _downsample(len(trials), MAX_PARALLEL_LINES)
    ]
    return {
        "name": name,
        "direction": "maximize" if maximize else "minimize",
        "n_trials": len(study.get_trials(deepcopy=False)),
        "n_complete": len(trials),
        "best_value": float(best[-1]) if len(best) else None,
        "best_params": study.best_params if trials else {},
        "history": {
            "number": numbers[keep].tolist(),
            "value": values[keep].tolist(),
            "best": best[keep].tolist(),
        },
        "params": params,
        "param_rows": param_rows,
        "importances": _importances(name, len(trials)),
        "downsampled": len(keep) < len(trials),
    }


def _downsample(n: int, limit: int) -> list[int]:
    if n <= limit:
        return list(range(n))
    step = n / limit
    picked = sorted({int(i * step) for i in range(limit)} | {n - 1})
    return picked


# -- registry ------------------------------------------------------------------------------------
def registered_models() -> list[dict[str, Any]]:
    out = []
    try:
        models = client().search_registered_models(max_results=500)
    except Exception as exc:
        logger.debug("registry unavailable: %s", exc)
        return out
    for model in models:
        aliases = dict(getattr(model, "aliases", {}) or {})
        try:
            versions = registry.model_versions(client(), model.name)
        except Exception as exc:  # one unreadable model leaves the others on the page
            logger.warning("versions of %r unavailable: %s", model.name, exc)
            versions = []
        rows = []
        for v in versions:
            tags = dict(v.tags or {})
            rows.append(
                {
                    "version": v.version,
                    "aliases": [a for a, ver in aliases.items() if str(ver) == str(v.version)],
                    "run_id": v.run_id,
                    "source_run": tags.get(vocab.TAG_SOURCE_RUN) or v.run_id,
                    "prompt": tags.get(vocab.TAG_PROMPT, ""),
                    "metric": tags.get(vocab.TAG_METRIC, ""),
                    "metric_value": tags.get(vocab.TAG_METRIC_VALUE, ""),
                    "fingerprint": tags.get(vocab.TAG_FINGERPRINT, ""),
                    "created": v.creation_timestamp,
                }
            )
        out.append({"name": model.name, "aliases": aliases, "versions": rows})
    return out
