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
#: study loads one at a time (a lock per name would grow with every name a URL sends)
_STUDY_LOCK = threading.Lock()
#: the most the dashboard reads of a run folder's pipeline.py
PIPELINE_MAX_BYTES = 4 * 2**20
#: where a search run logs its Optuna plots (``platform/ml/hpo/summary.py``)
OPTUNA_PLOTS = "plots/optuna"


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


def warm_up() -> None:
    """The first request's one-off work, done before the server listens: opening the
    MLflow client imports mlflow, 2 s of a cold first Runs page's 2.5 s on 2 cores. The
    Optuna storage is left to the Studies page (replaying its journal is per storage)."""
    started = time.perf_counter()
    try:
        client()
    except Exception as exc:  # MLflow unreachable: the pages say so when they ask
        logger.warning("the MLflow client did not open at start-up: %s", exc)
    logger.info("dashboard queries warmed up in %.2f s", time.perf_counter() - started)


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
    # a callback's value is whatever JSON the browser sent: only text is a value to match
    # (an object such as {"$regex": …} would be an operator)
    for field, value in (("experiment", experiment), ("status", status), ("session_id", session)):
        if isinstance(value, str) and value:
            query[field] = value
    if isinstance(prompt, str) and prompt:
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
    filter_query: str | None = None,
) -> RunsPage:
    """One page of agent runs, filtered and sorted in the store (never all in memory).

    ``sort_by`` is a document field, a Runs column id or a metric name; ``filter_query``
    is the table's own per-column filter (``{status} = FAILED && {value} < 0.5``)."""
    query = runs_query(experiment, status, session, prompt)
    query = _merge(query, column_filters(filter_query, metric))
    key = sort_field(sort_by, metric)
    if key.startswith("metrics."):  # ranked by a metric: the runs without it rank nowhere
        query = _merge(query, {key: {"$exists": True}})
    docs = store().find_runs(
        query,
        sort=[(key, -1 if descending else 1)],
        limit=page_size,
        skip=page * page_size,
        projection=RUNS_PROJECTION,
    )
    total = store().count_runs(query)
    rows = [run_row(doc, metric) for doc in docs]
    _add_progress(rows, docs)
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


# -- the Runs table (issue 28) ---------------------------------------------------------------
#: each Runs column and the document field it filters and sorts on (``value`` is the
#: chosen metric's ``metrics.test_<metric>``, else each run's main metric)
#: Runs columns computed per row (a search's trial progress), not fields of the document
UNSORTED_COLUMNS = frozenset({"progress"})
RUN_FIELDS = {
    "created": "created_at",
    "status": "status",
    "run": "_id",
    "prompt": "prompt",
    "template": "plan.template",
    "planner": "planner",
    "engine": "engine.used",
    "metric": "main_metric",
    "experiment": "experiment",
    "session": "session_id",
}
RUNS_PROJECTION = {
    "prompt": 1,
    "status": 1,
    "experiment": 1,
    "experiment_id": 1,
    "session_id": 1,
    "created_at": 1,
    "metrics": 1,
    "main_metric": 1,
    "plan.template": 1,
    "planner": 1,
    "engine": 1,
    "error": 1,
}
#: what the live view reads of a running run: its search's size, study and trial events
PROGRESS_PROJECTION = {"plan.steps": 1, "study": 1, "events": 1, "created_at": 1}
_CLAUSE = re.compile(
    r"^\{(?P<col>[^{}]+)\}\s*(?P<op>is blank|is nil|[is]?(?:[<>!=]=?|[a-z]+))\s*(?P<val>.*)$"
)
_OPS = {"=": "$eq", "eq": "$eq", "!=": "$ne", "ne": "$ne", "<": "$lt", "lt": "$lt"}
_OPS |= {"<=": "$lte", "le": "$lte", ">": "$gt", "gt": "$gt", ">=": "$gte", "ge": "$gte"}


def field_of(doc: dict[str, Any], dotted: str) -> Any:
    """A document's field by its dotted name, in either shape a projection comes back in.

    pymongo (MongoDB, nx-27017) nests a projected ``plan.template`` as ``{"plan":
    {"template": …}}``; the embedded store (neosqlite) returns the flat key
    ``"plan.template"``. Reading only one shape left the template column empty."""
    if dotted in doc:
        return doc[dotted]
    value: Any = doc
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def value_field(metric: str | None) -> str:
    """The field the ``value`` column shows: the chosen metric's test score, else each run's
    main metric (whose values are of different metrics, so it sorts by the metric's name)."""
    if metric and re.fullmatch(r"\w+", metric):
        return f"metrics.test_{metric}"
    return "main_metric"


def sort_field(sort_by: str, metric: str | None = None) -> str:
    """The document field to sort on: a Runs column id, a field, or a metric's name."""
    if sort_by in RUN_FIELDS:
        return RUN_FIELDS[sort_by]
    if sort_by == "value":
        return value_field(metric)
    if sort_by in SORTABLE or sort_by in RUN_FIELDS.values():
        return sort_by
    if sort_by in UNSORTED_COLUMNS:  # shown, not stored: sorting on it would match no run
        return "created_at"
    if re.fullmatch(r"[\w.]+", sort_by):
        return sort_by if sort_by.startswith("metrics.") else f"metrics.{sort_by}"
    return "created_at"


def column_filters(filter_query: str | None, metric: str | None = None) -> dict[str, Any]:
    """The Runs table's per-column filter expression as a store query.

    DataTable writes ``{col} op value`` clauses joined by ``&&``; an unknown column or
    operator is dropped (and logged), never passed to the store as text."""
    clauses: list[dict[str, Any]] = []
    for part in (filter_query or "").split(" && "):
        match = _CLAUSE.match(part.strip())
        if not match:
            if part.strip():
                logger.debug("ignored a filter clause: %r", part[:100])
            continue
        clause = _clause(match["col"].strip(), match["op"].strip(), _unquote(match["val"]), metric)
        if clause is not None:
            clauses.append(clause)
    if not clauses:
        return {}
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


def _clause(column: str, op: str, value: str, metric: str | None) -> dict[str, Any] | None:
    if column == "value":
        field = value_field(metric)
    elif column in RUN_FIELDS:
        field = RUN_FIELDS[column]
    else:
        logger.debug("ignored a filter on an unknown column: %r", column[:60])
        return None
    op = op.removeprefix("i").removeprefix("s") if op not in ("is blank", "is nil") else op
    if op in ("is blank", "is nil"):
        return {field: None}
    if field == "created_at":
        return _date_clause(op, value)
    if field.startswith("metrics."):
        return _number_clause(field, op, value)
    if op == "contains" or (op in ("eq", "=") and field in ("_id", "prompt")):
        return {field: {"$regex": re.escape(value), "$options": "i"}}
    if op in _OPS and op in ("=", "eq", "!=", "ne"):
        return {field: {_OPS[op]: value}}
    logger.debug("ignored the filter operator %r on %s", op[:20], column)
    return None


def _number_clause(field: str, op: str, value: str) -> dict[str, Any] | None:
    try:
        number = float(value)
    except ValueError:
        logger.debug("ignored a non-numeric filter on %s: %r", field, value[:40])
        return None
    if op in ("contains", "datestartswith"):
        op = "="
    return {field: {_OPS[op]: number}} if op in _OPS else None


def _date_clause(op: str, value: str) -> dict[str, Any] | None:
    """``2026-12`` (a month), ``2026-12-07`` (a day), with ``>``/``<`` or as a prefix."""
    from datetime import datetime, timedelta, timezone

    text = value.strip()
    parts = re.fullmatch(r"(\d{4})(?:-(\d{1,2}))?(?:-(\d{1,2}))?", text)
    if not parts:
        logger.debug("ignored a date filter: %r", text[:40])
        return None
    year, month, day = int(parts[1]), int(parts[2] or 1), int(parts[3] or 1)
    try:
        start = datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:  # 2026-13, 2026-02-30: no such date, so no such filter
        logger.debug("ignored an impossible date filter: %r", text)
        return None
    if parts[3]:
        end = start + timedelta(days=1)
    elif parts[2]:
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
    else:
        end = datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    if op in ("<", "lt"):
        return {"created_at": {"$lt": start}}
    if op in ("<=", "le"):
        return {"created_at": {"$lt": end}}
    if op in (">", "gt"):
        return {"created_at": {"$gte": end}}
    if op in (">=", "ge"):
        return {"created_at": {"$gte": start}}
    return {"created_at": {"$gte": start, "$lt": end}}


def _merge(query: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Both queries at once: a field both constrain goes through ``$and``."""
    if not extra:
        return query
    if not query:
        return extra
    if set(query) & set(extra):
        return {"$and": [query, extra]}
    return {**query, **extra}


def run_row(doc: dict[str, Any], metric: str | None = None) -> dict[str, Any]:
    """One Runs row from a projected document (either projection shape)."""
    metrics = field_of(doc, "metrics") or {}
    main = metric or field_of(doc, "main_metric")
    return {
        "run_id": doc["_id"],
        "created_at": field_of(doc, "created_at"),
        "status": field_of(doc, "status"),
        "experiment": field_of(doc, "experiment"),
        "experiment_id": field_of(doc, "experiment_id"),
        "session_id": field_of(doc, "session_id"),
        "prompt": field_of(doc, "prompt") or "",
        "template": field_of(doc, "plan.template") or "",
        "planner": field_of(doc, "planner") or "",
        "engine": engine_label(field_of(doc, "engine")),
        "metric": main or "",
        "value": metrics.get(f"test_{main}") if main else None,
        "error": (field_of(doc, "error") or {}).get("message") or "",
        "progress": None,
    }


def _add_progress(rows: list[dict[str, Any]], docs: list[dict[str, Any]]) -> None:
    """A running search's trials so far (for the live progress bar), read for the
    page's running rows only: their trial events are the largest part of a document."""
    active = set(vocab.ACTIVE_STATES)
    ids = [r["run_id"] for r in rows if r["status"] in active]
    if not ids:
        return
    found = store().find_runs({"_id": {"$in": ids}}, limit=len(ids), projection=PROGRESS_PROJECTION)
    by_id = {d["_id"]: trial_progress(d) for d in found}
    for row in rows:
        row["progress"] = by_id.get(row["run_id"])


def trial_progress(doc: dict[str, Any]) -> dict[str, Any] | None:
    """``{done, total, budget_s, elapsed_s}`` of a search, None for a run that searches
    nothing. Trials done come from the study itself when its storage answers, else from
    the run's last recorded trial event (recorded every tenth trial)."""
    steps = field_of(doc, "plan.steps") or []
    search = next(
        (
            s.get("args") or {}
            for s in steps
            if isinstance(s, dict) and s.get("tool") == "optimize_model"
        ),
        None,
    )
    if search is None:
        return None
    last = next(
        (
            e.get("detail") or {}
            for e in reversed(field_of(doc, "events") or [])
            if isinstance(e, dict) and (e.get("detail") or {}).get("type") == "trial"
        ),
        {},
    )
    study = (field_of(doc, "study") or {}).get("name")
    done = _trials_done(study) if study else None
    created = field_of(doc, "created_at")
    elapsed = (
        (_utcnow() - created).total_seconds() if hasattr(created, "tzinfo") and created else None
    )
    return {
        "done": done if done is not None else int(last.get("n") or 0),
        "total": search.get("trials") or last.get("total"),
        "budget_s": search.get("timeout_s"),
        "elapsed_s": elapsed,
    }


def active_run_count() -> int:
    """Runs not yet in a terminal state, in the whole store: the Runs page refreshes
    itself while there is one (the ``status`` index answers it)."""
    return store().count_runs({"status": {"$in": list(vocab.ACTIVE_STATES)}})


def _utcnow() -> Any:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def _trials_done(study: str) -> int | None:
    """Finished trials of a study, from its storage (the proxy writes them as they end)."""
    try:
        storage = _optuna_storage()
        study_id = storage.get_study_id_from_name(study)
        trials = storage.get_all_trials(study_id, deepcopy=False)
    except Exception as exc:  # not created yet, or the storage is unreadable: use the events
        logger.debug("trials of study %r unavailable: %s", study, exc)
        return None
    return sum(1 for t in trials if t.state.is_finished())


# -- the Compare page (issue 28) -------------------------------------------------------------
#: the most runs one comparison reads and draws
MAX_COMPARE = 100
COMPARE_PROJECTION = {
    "prompt": 1,
    "status": 1,
    "experiment": 1,
    "experiment_id": 1,
    "created_at": 1,
    "planner": 1,
    "plan": 1,
    "metrics": 1,
    "main_metric": 1,
    "timings": 1,
    "dataset": 1,
    "engine": 1,
    "task": 1,
    "target": 1,
}


def compare_view(run_ids: list[str]) -> dict[str, Any]:
    """Up to ``MAX_COMPARE`` runs side by side, in the order given: one store query and one
    MLflow search for all of them (not a round trip per run: 100 runs stay fast)."""
    from mlpilot.dashboards import comparison

    ids = list(dict.fromkeys(r for r in run_ids if r))
    dropped = max(0, len(ids) - MAX_COMPARE)
    ids = ids[:MAX_COMPARE]
    found = store().find_runs(
        {"_id": {"$in": ids}}, limit=len(ids) or 1, projection=COMPARE_PROJECTION
    )
    docs = {d["_id"]: d for d in found}
    runs = _mlflow_runs(ids, {field_of(d, "experiment_id") for d in found})
    rows = [compare_row(i, docs.get(i) or {"_id": i}, runs.get(i)) for i in ids]
    for row, label, colour in zip(
        rows, comparison.unique_labels(rows), comparison.colours(len(rows)), strict=True
    ):
        row["label"], row["colour"] = label, colour
    keys = sorted(
        {
            k
            for r in rows
            for k in r["metrics"]
            if not comparison.is_timing(k) and not k.endswith("_std")
        }
    )
    return {
        "rows": rows,
        "metric_keys": [k for k in keys if comparison.is_model_metric(k)],
        "other_keys": [k for k in keys if not comparison.is_model_metric(k)],
        "timing_keys": sorted({k for r in rows for k in r["timings"]}),
        "param_keys": sorted({k for r in rows for k in r["params"]}),
        "differing_params": comparison.differing(rows, "params"),
        "dropped": dropped,
    }


def compare_row(run_id: str, doc: dict[str, Any], run: Any) -> dict[str, Any]:
    """One run of a comparison from its document and its MLflow run (either may be gone)."""
    mlflow_metrics = dict(run.data.metrics) if run is not None else {}
    params = dict(run.data.params) if run is not None else {}
    metrics = field_of(doc, "metrics") or mlflow_metrics
    timings = field_of(doc, "timings") or {
        k[5:-2]: v for k, v in mlflow_metrics.items() if k.startswith("time_") and k.endswith("_s")
    }
    timings = {  # the stages' seconds, wherever they were recorded, and the speedups
        **{k: v for k, v in metrics.items() if k.startswith(("time_", "speedup_"))},
        **{f"time_{k}_s": v for k, v in timings.items()},
    }
    dataset = field_of(doc, "dataset") or {}
    return {
        "run_id": run_id,
        "prompt": field_of(doc, "prompt") or "",
        "status": field_of(doc, "status"),
        "template": field_of(doc, "plan.template") or "",
        "model": params.get("model.family") or _planned_model(doc),
        "planner": field_of(doc, "planner") or "",
        "engine": engine_label(field_of(doc, "engine")),
        "main_metric": field_of(doc, "main_metric"),
        "metrics": {k: v for k, v in metrics.items() if k not in timings},
        "timings": timings,
        "params": params,
        "dataset": {
            "file": str(dataset.get("path") or "").rsplit("/", 1)[-1],
            "fingerprint": str(dataset.get("fingerprint") or "")[:12],
            "rows": dataset.get("rows"),
            "columns": dataset.get("cols"),
            "target": field_of(doc, "target"),
            "task": field_of(doc, "task"),
        },
        "found": bool(field_of(doc, "status")) or run is not None,
    }


def _planned_model(doc: dict[str, Any]) -> str:
    """The family the plan asked for (``auto`` says nothing, so it is left out)."""
    for step in field_of(doc, "plan.steps") or []:
        model = (step.get("args") or {}).get("model") if isinstance(step, dict) else None
        if isinstance(model, str) and model != "auto":
            return model
    return ""


def _mlflow_runs(ids: list[str], experiment_ids: set[Any]) -> dict[str, Any]:
    """The MLflow runs of ``ids`` in one search (their parameters live only there)."""
    quoted = [q for q in (registry.quote_filter_value(i) for i in ids) if q]
    experiments = sorted(str(e) for e in experiment_ids if e)
    if not quoted or not experiments:
        return {}
    try:
        found = client().search_runs(
            experiments,
            filter_string=f"attributes.run_id IN ({', '.join(quoted)})",
            max_results=max(len(quoted), 1),
        )
    except Exception as exc:  # MLflow down: metrics from MongoDB, no parameters
        logger.debug("MLflow runs of the comparison unavailable: %s", exc)
        return {}
    return {r.info.run_id: r for r in found}


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
    detail["search"] = _search(run_id, doc)
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


def _plots(run_id: str, limit: int = 12, folder: str = "plots") -> list[dict[str, str]]:
    """PNG plots of a run as data URIs (bytes from the artifact store, never HTML)."""
    from pathlib import Path

    try:
        items = client().list_artifacts(run_id, folder)
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


def _search(run_id: str, doc: dict[str, Any]) -> dict[str, Any] | None:
    """A search run's study (name, counts, best) and the Optuna plots it logged
    (``plots/optuna``: PNGs shown inline; the Plotly page only named, since its inline
    scripts cannot run under the dashboard's CSP)."""
    study = doc.get("study") or {}
    if not study.get("name"):
        return None
    return {
        "study": study,
        "plots": _plots(run_id, folder=OPTUNA_PLOTS),
        "page": f"{OPTUNA_PLOTS}/study.html",
    }


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


#: runs the Compare picker offers before anything is typed, and at most per search: the
#: picker indexes every substring of each option's id and label, and 300 options (100
#: chosen, 200 recent) took the browser 0.4 s before the comparison was even asked for
RECENT_OPTIONS = 20
SEARCH_OPTIONS = 50


def run_options(
    chosen: list[str], search: str | None = None, limit: int = RECENT_OPTIONS
) -> list[dict[str, str]]:
    """Options of the Compare picker: the chosen runs first (in order), then the most
    recent runs, or, with ``search``, the runs whose id starts with it or whose prompt
    contains it (any run of the store, not only recent ones)."""
    chosen = [c for c in chosen if isinstance(c, str) and c]
    projection = {"prompt": 1, "status": 1}
    found = store().find_runs(
        {"_id": {"$in": chosen}}, limit=len(chosen) or 1, projection=projection
    )
    by_id = {d["_id"]: d for d in found}
    query: dict[str, Any] = {}
    if isinstance(search, str) and search.strip():
        text = re.escape(search.strip()[:100])
        query = {
            "$or": [
                {"_id": {"$regex": f"^{text}"}},
                {"prompt": {"$regex": text, "$options": "i"}},
            ]
        }
    more = store().find_runs(query, sort=[("created_at", -1)], limit=limit, projection=projection)
    options = [_run_option(c, by_id.get(c)) for c in chosen]
    return options + [_run_option(d["_id"], d) for d in more if d["_id"] not in set(chosen)]


def _run_option(run_id: str, doc: dict[str, Any] | None) -> dict[str, str]:
    if doc is None:  # a stale link: the id is all there is to show
        return {"label": run_id, "value": run_id}
    label = f"{run_id[:8]} · {doc.get('status', '')} · {(doc.get('prompt') or '')[:60]}"
    return {"label": label, "value": run_id}


# -- engines -------------------------------------------------------------------------------------
def benchmarks(limit: int = 500) -> list[dict[str, Any]]:
    return store().find_benchmarks({}, limit=limit)


# -- studies -------------------------------------------------------------------------------------
#: the trial states the Studies page draws, each its own marker
DRAWN_STATES = ("COMPLETE", "PRUNED", "FAIL")
#: trials whose intermediate values are drawn: enough to see pruning at work, few enough
#: for SVG
MAX_CURVES = 120
#: trials a per-family importance is computed from (fANOVA's cost grows with them)
IMPORTANCE_SAMPLE = 1000


def _optuna_storage() -> Any:
    with _LOCK:
        if "optuna" not in _STATE:
            from mlpilot.platform.ml.hpo import open_storage

            _STATE["optuna"] = open_storage(settings().optuna_storage)
        return _STATE["optuna"]


def studies() -> list[dict[str, Any]]:
    """Every study, most trials first, with its metric and the experiments of its runs.
    Reads the storage's own index: optuna's study summaries walk every trial of every
    study and take seconds on a 20,000-trial history."""
    storage = _optuna_storage()
    try:
        frozen = storage.get_all_studies()
    except Exception as exc:
        logger.debug("Optuna storage unavailable: %s", exc)
        return []
    runs = study_runs([s.study_name for s in frozen])
    out = []
    for study in frozen:
        spec = study.user_attrs.get(vocab.ATTR_SPEC) or {}
        found = runs.get(study.study_name, [])
        out.append(
            {
                "name": study.study_name,
                "n_trials": len(storage.get_all_trials(study._study_id, deepcopy=False)),
                "direction": study.direction.name.lower()
                if len(study.directions) == 1
                else "multi",
                "metric": _study_metric(spec, found),
                "experiments": sorted({r["experiment"] for r in found if r["experiment"]}),
                "study_id": study._study_id,
            }
        )
    # the busiest study first: it is the one the page opens on
    out.sort(key=lambda s: (-s["n_trials"], -s["study_id"]))
    return out


def study_runs(names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The agent runs that made or joined each study: run id, experiment, metric."""
    if not names:
        return {}
    try:
        docs = store().find_runs(
            {"study.name": {"$in": list(names)}},
            limit=max(1000, 4 * len(names)),
            projection={"study": 1, "experiment": 1},
        )
    except Exception as exc:  # the studies still show without MongoDB, unattributed
        logger.debug("runs of the studies unavailable: %s", exc)
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        study = doc.get("study") or {}
        out.setdefault(str(study.get("name")), []).append(
            {
                "run_id": doc["_id"],
                "experiment": doc.get("experiment") or "",
                "metric": study.get("metric") or "",
            }
        )
    return out


def _study_metric(spec: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    metric = spec.get("metric") if isinstance(spec, dict) else None
    return str(metric or next((r["metric"] for r in runs if r["metric"]), "") or "objective")


def study_trials(name: str) -> dict[str, Any] | None:
    """A study shaped for plotting, cached briefly and downsampled; None when there is no
    such study (a stale link, a deleted study) or it has several objectives."""
    cache = _STATE.setdefault("study_cache", {})
    # one load at a time: a page's callbacks ask for the same study at once, and each
    # loading it on its own doubled a first visit's seconds
    with _STUDY_LOCK:
        now = time.monotonic()
        hit = cache.get(name)
        if hit and now - hit[0] < STUDY_CACHE_S:
            return hit[1]
        try:
            data = _load_study(name)
        except (KeyError, RuntimeError) as exc:  # optuna: no record; study.direction: multi
            logger.info("study %r not shown: %s", name[:100], exc)
            return None
        cache[name] = (now, data)
        return data


def _load_study(name: str) -> dict[str, Any]:
    import optuna

    study = optuna.load_study(study_name=name, storage=_optuna_storage())
    trials = study.get_trials(deepcopy=False)
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    direction = "maximize" if maximize else "minimize"
    rows = trial_rows(trials)
    complete = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    families = sorted({r["family"] for r in rows if r["family"]})
    runs = study_runs([name]).get(name, [])
    line = best_so_far(rows, direction)
    drawn = drawn_rows(rows, MAX_TRIAL_POINTS, set(best_steps(line)["number"]))
    best = study.best_trial if complete else None
    values = [float(t.value) for t in complete]  # type: ignore[arg-type]
    return {
        "name": name,
        "direction": direction,
        "metric": _study_metric(study.user_attrs.get(vocab.ATTR_SPEC) or {}, runs),
        "experiments": sorted({r["experiment"] for r in runs if r["experiment"]}),
        "run_ids": [r["run_id"] for r in runs],
        "n_trials": len(trials),
        "counts": {s: sum(r["state"] == s for r in rows) for s in DRAWN_STATES},
        "n_complete": len(complete),
        "best_value": float(best.value) if best and best.value is not None else None,
        "best_params": dict(best.params) if best else {},
        "best_family": _family(best.params) if best else None,
        "rows": drawn,
        "n_finished": len(rows),
        # over every complete trial, not only the drawn ones: normalising by the drawn
        # ones alone could put an undrawn trial (or the best-so-far line) above 1
        "value_range": (min(values), max(values)) if values else None,
        "best": best_steps(line),
        "curves": intermediate_curves(trials, MAX_CURVES),
        "families": families,
        "params": sorted({k for t in complete for k in t.params}),
        "log_params": sorted(
            {k for t in complete[:50] for k, d in t.distributions.items() if getattr(d, "log", 0)}
        ),
        "param_rows": [
            {**complete[i].params, "value": float(complete[i].value)}  # type: ignore[arg-type]
            for i in _downsample(len(complete), MAX_PARALLEL_LINES)
        ],
        "importances": _importances(name, len(complete)),
        "downsampled": len(drawn) < len(rows),
    }


def _family(params: dict[str, Any]) -> str | None:
    from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM

    family = params.get(FAMILY_PARAM)
    return None if family is None else str(family)


def trial_rows(trials: list[Any]) -> list[dict[str, Any]]:
    """One row per finished trial (complete, pruned, failed), in trial order.

    A pruned trial has no value of its own: it is drawn at the last value it reported,
    as optuna-dashboard does; a failed trial has none (``value`` None). ``elapsed_s`` is
    when the trial ended, counted from the study's first start.
    """
    finished = [t for t in trials if t.state.name in DRAWN_STATES]
    starts = [t.datetime_start for t in trials if t.datetime_start is not None]
    origin = min(starts) if starts else None
    rows = []
    for t in sorted(finished, key=lambda t: t.number):
        if t.state.name == "COMPLETE":
            value = t.value
        elif t.state.name == "PRUNED" and t.intermediate_values:
            value = t.intermediate_values[max(t.intermediate_values)]
        else:
            value = None
        end = t.datetime_complete or t.datetime_start
        rows.append(
            {
                "number": t.number,
                "state": t.state.name,
                "value": None if value is None else float(value),
                "elapsed_s": (end - origin).total_seconds() if end and origin else None,
                "family": _family(t.params),
                "reason": str(t.user_attrs.get(vocab.ATTR_FAIL_REASON) or "")[:200],
            }
        )
    return rows


def best_so_far(rows: list[dict[str, Any]], direction: str) -> dict[str, list[Any]]:
    """The best complete value after each complete trial (pruned and failed ones never
    count: they are not results), with the trial's number and end time."""
    better = max if direction == "maximize" else min
    out: dict[str, list[Any]] = {"number": [], "elapsed_s": [], "value": []}
    best: float | None = None
    for row in rows:
        if row["state"] != "COMPLETE" or row["value"] is None:
            continue
        best = row["value"] if best is None else better(best, row["value"])
        out["number"].append(row["number"])
        out["elapsed_s"].append(row["elapsed_s"])
        out["value"].append(best)
    return out


def best_steps(best: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The best-so-far line at its corners only: the trials that improved it, and the
    last complete trial (so it runs to the end). Drawn as a step line (``hv``) it is the
    same line as one point per complete trial, where thinning it to evenly spread points
    would move its steps; a 20,000-trial study's line has a few dozen corners."""
    values = best["value"]
    keep = [i for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
    if values and keep[-1] != len(values) - 1:
        keep.append(len(values) - 1)
    return {k: [column[i] for i in keep] for k, column in best.items()}


def drawn_rows(
    rows: list[dict[str, Any]], limit: int, new_bests: set[int] | frozenset[int] = frozenset()
) -> list[dict[str, Any]]:
    """The trials to draw as markers: all of them up to ``limit``, else ``limit`` evenly
    spread over the study plus every trial that set a new best (``new_bests``: trial
    numbers), so the best-so-far line's corners and the best trial stay hoverable. Each
    SVG marker is a DOM node: 20,000 of them take the browser seconds to draw."""
    if len(rows) <= limit:
        return rows
    picked = set(_downsample(len(rows), limit))
    picked.update(i for i, r in enumerate(rows) if r["number"] in new_bests)
    return [rows[i] for i in sorted(picked)]


def intermediate_curves(trials: list[Any], limit: int) -> list[dict[str, Any]]:
    """The values trials reported while they ran (pruning decides on these), for at most
    ``limit`` trials evenly spread over the study."""
    reported = [
        t for t in trials if t.intermediate_values and t.state.name in ("COMPLETE", "PRUNED")
    ]
    picked = [reported[i] for i in _downsample(len(reported), limit)]
    return [
        {
            "number": t.number,
            "state": t.state.name,
            "steps": sorted(t.intermediate_values),
            "values": [float(t.intermediate_values[s]) for s in sorted(t.intermediate_values)],
        }
        for t in picked
    ]


def normalised(values: list[float | None], direction: str, low: float, high: float) -> list[Any]:
    """Values on one scale where up is better: 1 at the best of ``low``..``high`` in the
    metric's direction, 0 at the worst; studies of different metrics share an axis."""
    span = high - low
    out: list[Any] = []
    for v in values:
        if v is None:
            out.append(None)
        elif span == 0:
            out.append(1.0)
        else:
            out.append((v - low) / span if direction == "maximize" else (high - v) / span)
    return out


def metric_bounds(data: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each metric's range over the complete trials of the given studies: studies of the
    same metric are normalised together, so they stay comparable with each other."""
    bounds: dict[str, tuple[float, float]] = {}
    for d in data:
        values = list(d.get("value_range") or ()) or [
            r["value"] for r in d["rows"] if r["state"] == "COMPLETE" and r["value"] is not None
        ]
        if not values:
            continue
        key = metric_key(d)
        low, high = bounds.get(key, (min(values), max(values)))
        bounds[key] = (min(low, *values), max(high, *values))
    return bounds


def metric_key(d: dict[str, Any]) -> str:
    """The axis a study is drawn on: its metric and direction ("objective" when unknown)."""
    return f"{d['metric']} ({d['direction']})"


@lru_cache(maxsize=32)
def _importances(name: str, n_complete: int) -> dict[str, dict[str, float]]:
    """Parameter importances per family (``""``: a study of one family), cached per study
    and number of complete trials.

    A mixed-family (AutoML) study's parameters are prefixed by family ("xgb.max_depth"), and
    importances over the whole study know only the parameters every trial has: ``family``.
    Each family's trials are therefore assessed on their own.
    """
    import optuna

    study = optuna.load_study(study_name=name, storage=_optuna_storage())
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    return {
        family: found
        for family, group in trials_by_family(complete).items()
        if (found := importances_of(group, study.direction))
    }


def trials_by_family(trials: list[Any]) -> dict[str, list[Any]]:
    """Trials grouped by the family they fitted; ``""`` holds a single-family study's."""
    groups: dict[str, list[Any]] = {}
    for t in trials:
        groups.setdefault(_family(t.params) or "", []).append(t)
    return groups


def importances_of(trials: list[Any], direction: Any) -> dict[str, float]:
    """fANOVA importances of the parameters these (complete) trials share, the family
    prefix dropped; {} below three trials or when no parameter varies."""
    import warnings

    import optuna

    from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM

    if len(trials) < 3:
        return {}
    sample = [trials[i] for i in _downsample(len(trials), IMPORTANCE_SAMPLE)]
    view = optuna.create_study(direction=direction)
    view.add_trials(sample)
    shared = set.intersection(*(set(t.params) for t in sample)) - {FAMILY_PARAM}
    varying = [p for p in sorted(shared) if len({repr(t.params[p]) for t in sample}) > 1]
    if not varying:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(view, params=varying)
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:
        logger.debug("parameter importances unavailable: %s", exc)
        return {}
    return {k.split(".", 1)[-1]: float(v) for k, v in found.items()}


def parallel_data(d: dict[str, Any], family: str | None) -> dict[str, Any]:
    """Axes and lines of a parallel-coordinates plot, each axis scaled to 0..1.

    Numeric parameters get a linear (or, when searched on a log scale, logarithmic) axis;
    categorical ones (encodings, the family itself) one evenly spaced tick per choice.
    ``family`` picks one family's trials of a mixed study (its parameters have values only
    there); None draws every trial on the parameters they all have.
    """
    from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM

    rows = [r for r in d["param_rows"] if family is None or r.get(FAMILY_PARAM) == family]
    names = [p for p in d["params"] if rows and all(r.get(p) is not None for r in rows)]
    if family is not None:
        names = [p for p in names if p != FAMILY_PARAM]
    axes = [
        _axis(p, [r[p] for r in rows], p in d["log_params"])
        for p in names
        if len({repr(r[p]) for r in rows}) > 1 or p == FAMILY_PARAM
    ][:10]
    axes.append(_axis("value", [r["value"] for r in rows], False))
    lines = [[ax["scale"](r[ax["name"]]) for ax in axes] for r in rows]
    for ax in axes:
        del ax["scale"]
    return {"axes": axes, "lines": lines, "values": [r["value"] for r in rows]}


def _axis(name: str, values: list[Any], log: bool) -> dict[str, Any]:
    import math

    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        choices = sorted({str(v) for v in values})
        spot = {
            c: (i / (len(choices) - 1) if len(choices) > 1 else 0.5) for i, c in enumerate(choices)
        }
        return {"name": name, "kind": "choice", "choices": choices, "scale": lambda v: spot[str(v)]}
    log = log and min(values) > 0
    f = math.log10 if log else float
    low, high = f(min(values)), f(max(values))

    def scale(v: Any) -> float:
        return 0.5 if high == low else (f(v) - low) / (high - low)

    kind = "log" if log else "number"
    return {"name": name, "kind": kind, "low": min(values), "high": max(values), "scale": scale}


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


def set_model_alias(name: str, alias: str, version: str) -> tuple[bool, str]:
    """Point ``name@alias`` at ``version`` (set or move it) through the function
    ``mlpilot models promote`` uses, recorded in both stores; whether it worked and one line for the page. The caller is a callback, so the
    request already passed the dashboard's gate (credentials, origin, CSRF token)."""
    from mlpilot.platform.errors import MlpilotError

    alias = (alias or "").strip()
    problem = registry.alias_problem(alias) if alias else "an alias needs a name"
    if problem:
        return False, f"alias {alias!r} is refused: {problem}"
    try:
        result = registry.move_alias(client(), store(), name, str(version), alias, by="dashboard")
    except MlpilotError as exc:
        return False, exc.one_line()
    logger.info("dashboard: %s@%s -> version %s (was %s)", name, alias, version, result["previous"])
    was = f" (was version {result['previous']})" if result["previous"] else " (new alias)"
    return True, f"{name}@{alias} → version {version}{was}"


def delete_model_alias(name: str, alias: str) -> tuple[bool, str]:
    """Delete ``name@alias`` (the version it named stays registered)."""
    from mlpilot.platform.errors import MlpilotError

    alias = (alias or "").strip()
    if not alias:
        return False, "name the alias to delete"
    try:
        result = registry.delete_alias(client(), store(), name, alias, by="dashboard")
    except MlpilotError as exc:
        return False, exc.one_line()
    logger.info("dashboard: deleted %s@%s (was version %s)", name, alias, result["previous"])
    return True, f"{name}@{alias} deleted (it named version {result['previous']})"


# -- speedups and benchmarks (issue 28 item 4) -------------------------------------------------
#: benchmark documents the pages read: enough for years of compare runs, few enough to
#: draw in SVG
MAX_BENCHMARKS = 1000


def speedup_benchmarks(limit: int = MAX_BENCHMARKS) -> list[dict[str, Any]]:
    """The documents with per-stage CPU and GPU times: compare runs' and stages.py's,
    newest first. Compare documents have no ``kind``, so the shapes are told apart in
    ``speedups_view.is_speedup_doc`` rather than in the query."""
    from mlpilot.dashboards.speedups_view import is_speedup_doc

    return [d for d in store().find_benchmarks({}, limit=limit) if is_speedup_doc(d)]


def benchmarks_of_kind(kind: str, limit: int = 100) -> list[dict[str, Any]]:
    """``benchmarks`` documents of one ``kind`` (``automl``, ``scale``), newest first."""
    return store().find_benchmarks({"kind": kind}, limit=limit)


# -- the Chat page (issue 28) ----------------------------------------------------------------
#: the data files the chat's picker offers at most, and the runs it looks back over
DATA_CHOICES = 30
DATA_LOOKBACK_RUNS = 300
DATA_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".json", ".xlsx")


def data_file_choices(session_id: str | None) -> list[dict[str, str]]:
    """The data files a chat can pick: this session's uploads, then the data sets of recent
    runs still on disk, newest first, each once. Only these may be picked, so the picker
    cannot be made to name any other file on the server."""
    from pathlib import Path

    paths: list[Path] = []
    # a session id comes from the browser: it names a folder only once the store knows it
    if session_id and store().get_session(session_id) is not None:
        folder = settings().sessions_dir / session_id / "uploads"
        if folder.is_dir():
            paths += sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    docs = store().find_runs(
        {"dataset.path": {"$exists": True}},
        sort=[("created_at", -1)],
        limit=DATA_LOOKBACK_RUNS,
        projection={"dataset": 1},
    )
    paths += [Path(str((field_of(d, "dataset") or {}).get("path") or "")) for d in docs]
    choices: dict[str, dict[str, str]] = {}
    for path in paths:
        value = str(path)
        if value in choices or not path.name.lower().endswith(DATA_SUFFIXES):
            continue
        # a relative path was the CLI's working directory's, not the dashboard's
        if path.is_absolute() and path.is_file():
            choices[value] = {"label": f"{path.name} — {path.parent}", "value": value}
        if len(choices) >= DATA_CHOICES:
            break
    return list(choices.values())


def choose_data_file(session_id: str, path: str) -> bool:
    """Make ``path`` the session's data file, if the picker offered it."""
    from mlpilot.platform.agent.sessions import load_session, save_session

    if path not in {c["value"] for c in data_file_choices(session_id)}:
        logger.info("dashboard: refused a data file the picker did not offer: %r", path)
        return False
    session = load_session(store(), session_id)
    session.remember(data_path=path)
    save_session(store(), session)
    logger.info("dashboard: session %s uses %s", session_id, path)
    return True


# -- models: register, history and lineage (issue 28 item 5) -------------------------------------
def register_run_model(run_id: str, name: str, alias: str | None) -> tuple[bool, str]:
    """Register the model ``run_id`` logged as a new version of ``name`` (optionally at
    ``alias``) through ``mlpilot models register``'s own function, recorded in both stores.
    The caller is a callback: the request already passed the dashboard's gate."""
    from mlpilot.platform.errors import MlpilotError

    name, alias = (name or "").strip(), (alias or "").strip() or None
    if not name:
        return False, "name the registered model"
    if not run_id:
        return False, "choose a run that logged a model"
    # before anything exists: a refused alias leaves no version behind
    problem = registry.alias_problem(alias) if alias else None
    if problem:
        return False, f"alias {alias!r} is refused: {problem}"
    try:
        done = registry.register_run(client(), store(), run_id, name, alias, by="dashboard")
    except MlpilotError as exc:
        return False, exc.one_line()
    logger.info("dashboard: registered %s version %s from run %s", name, done["version"], run_id)
    at = f" as @{alias}" if alias else ""
    return True, f"registered {name} version {done['version']}{at} from run {done['source_run']}"


def runs_with_models(limit: int = 200) -> list[dict[str, str]]:
    """Dropdown options: the newest finished runs whose document names a logged model."""
    docs = store().find_runs(
        {"model.uri": {"$regex": "^models:/"}},
        sort=[("created_at", -1)],
        limit=limit,
        projection={"prompt": 1, "plan.template": 1},
    )
    return [
        {
            "label": f"{d['_id'][:8]} · {field_of(d, 'plan.template') or ''} · "
            f"{(d.get('prompt') or '')[:60]}",
            "value": d["_id"],
        }
        for d in docs
    ]


def model_history(name: str) -> list[dict[str, Any]]:
    """Every version of ``name``, newest first: its run, created time and aliases, the
    lineage of the run that produced it (prompt, template, data set, metric, from the run
    document where there is one, else the version's tags) and the registry changes the
    run documents recorded for this model (alias moves included), oldest first."""
    try:
        versions = registry.list_versions(client(), name)
    except Exception as exc:
        logger.debug("versions of %r unavailable: %s", name, exc)
        return []
    docs = _run_docs([v["source_run"] for v in versions if v["source_run"]])
    return [_version_lineage(name, v, docs.get(v["source_run"] or "")) for v in versions]


def _run_docs(run_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not run_ids:
        return {}
    projection = {"prompt": 1, "plan.template": 1, "dataset": 1, "main_metric": 1}
    projection.update({"metrics": 1, "model": 1, "status": 1})
    try:
        docs = store().find_runs({"_id": {"$in": sorted(set(run_ids))}}, projection=projection)
    except Exception as exc:  # a store that is down costs the extras, not the versions
        logger.debug("run documents unavailable for the lineage: %s", exc)
        return {}
    return {d["_id"]: d for d in docs}


def _version_lineage(name: str, v: dict[str, Any], doc: dict[str, Any] | None) -> dict[str, Any]:
    tags = v["tags"]
    doc = doc or {}
    metric = v["metric"] or doc.get("main_metric") or ""
    value = v["metric_value"]
    if value is None and metric:
        value = (doc.get("metrics") or {}).get(f"test_{metric}")
    dataset = doc.get("dataset") or {}
    changes = [c for c in registry_changes(doc) if c.get("name") == name]
    return {
        "version": v["version"],
        "aliases": v["aliases"],
        "created_at": v["created_at"],
        "run_id": v["source_run"],
        "has_doc": bool(doc),
        "prompt": doc.get("prompt") or tags.get(vocab.TAG_PROMPT, ""),
        "template": field_of(doc, "plan.template") or "",
        "dataset": dataset.get("path") or "",
        "fingerprint": dataset.get("fingerprint") or tags.get(vocab.TAG_FINGERPRINT, ""),
        "metric": metric,
        "metric_value": value,
        "changes": changes,
    }


def registry_changes(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The registry changes a run document recorded (``model.registry``), oldest first."""
    model = (doc or {}).get("model")
    changes = model.get("registry") if isinstance(model, dict) else None
    return [c for c in changes or [] if isinstance(c, dict)]


def run_registrations(run_id: str) -> dict[str, Any]:
    """A run's side of the registry: the versions made from its model (with their aliases)
    and the registry changes its document recorded."""
    try:
        doc = store().get_run(run_id)
    except Exception as exc:
        logger.debug("run document unavailable: %s", exc)
        doc = None
    return {"versions": _versions_of_run(run_id), "changes": registry_changes(doc)}
