"""Query tools' answers: read MLflow, the metadata store and Optuna storage; start nothing.

In a session that has runs (``mlpilot chat``, ``--session``), "the best run", "the last
runs" and "compare the last two" answer from the session's own runs; otherwise from the
whole experiment. Each answer says which (``scope``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.tracking import vocab

log = logging.getLogger(__name__)


@dataclass
class QueryContext:
    settings: Any
    store: Any = None
    profile: Any = None
    experiment: str = "mlpilot"
    #: the session's runs, oldest first (``Session.record_run`` entries); None outside one
    session_runs: list[dict[str, Any]] | None = None

    def client(self) -> Any:
        from mlpilot.tracking.mlflow_store import make_client

        return make_client(self.settings)

    def experiment_id(self, client: Any) -> str | None:
        found = client.get_experiment_by_name(self.experiment)
        return found.experiment_id if found else None


def describe_data(context: QueryContext) -> dict[str, Any]:
    profile = context.profile
    if profile is None:
        raise MlpilotError("describe_data needs a data file", hint="pass it with --data FILE")
    return {
        "path": profile.path,
        "rows": profile.rows,
        "columns": [
            {
                "name": c.name,
                "kind": c.kind,
                "missing": c.missing,
                "unique": c.unique,
                "samples": c.samples,
                **({"note": c.note} if c.note else {}),
            }
            for c in profile.columns
        ],
        "candidate_targets": profile.candidate_targets(),
        "notes": profile.notes,
    }


def _run_summary(run: Any) -> dict[str, Any]:
    tags = run.data.tags
    return {
        "run_id": run.info.run_id,
        "status": run.info.status,
        "state": tags.get(vocab.TAG_STATE),
        "prompt": tags.get(vocab.TAG_PROMPT, ""),
        "template": tags.get(vocab.TAG_TEMPLATE),
        "metric": tags.get(vocab.TAG_METRIC),
        "metrics": {
            k: v for k, v in run.data.metrics.items() if k.startswith(("test_", "cv_", "hpo_"))
        },
        "start_time": run.info.start_time,
    }


def show_runs(context: QueryContext, limit: int = 10, scope: str = "auto") -> dict[str, Any]:
    """The newest runs: the session's own when it has some (``scope="auto"``), else every
    experiment's ("the last 5 runs" means the user's runs, wherever they were logged)."""
    from mlpilot.tracking.mlflow_store import all_experiment_ids

    client = context.client()
    if context.session_runs and scope != "all":
        ids = [r["run_id"] for r in reversed(context.session_runs)][:limit]
        runs = [_summary_or_gone(client, rid) for rid in ids]
        return {"experiment": context.experiment, "scope": "session", "runs": runs}
    ids = all_experiment_ids(client)
    found = (
        client.search_runs(
            ids,
            filter_string="tags.`mlpilot.kind` = 'agent_run'",
            order_by=["attributes.start_time DESC"],
            max_results=limit,
        )
        if ids
        else []
    )
    names: dict[str, str] = {}
    runs = []
    for run in found:
        eid = run.info.experiment_id
        if eid not in names:
            names[eid] = client.get_experiment(eid).name
        runs.append({**_run_summary(run), "experiment": names[eid]})
    return {"experiment": None, "scope": "all", "runs": runs}


def _summary_or_gone(client: Any, run_id: str) -> dict[str, Any]:
    from mlflow.exceptions import MlflowException

    try:
        return _run_summary(client.get_run(run_id))
    except MlflowException:
        return {"run_id": run_id, "status": "DELETED"}


def best_entry(entries: list[dict[str, Any]], metric: str | None = None) -> dict[str, Any] | None:
    """The best of a session's runs: finished, with a model, ranked by ``test_<metric>``.

    ``metric`` defaults to the main metric of the most recent such run, so a session that
    moved from one task to another ranks the runs of the current one.
    """
    from mlpilot.tracking.registry import LOWER_IS_BETTER

    done = [e for e in entries if e.get("status") == "SUCCEEDED" and e.get("model_uri")]
    if metric is None:
        metric = next((e["metric"] for e in reversed(done) if e.get("metric")), None)
    ranked = [e for e in done if f"test_{metric}" in (e.get("metrics") or {})]
    if metric is None or not ranked:
        return None
    key = f"test_{metric}"
    pick = min if metric in LOWER_IS_BETTER else max
    best = pick(ranked, key=lambda e: e["metrics"][key])
    return {**best, "metric": metric}


def show_best_model(context: QueryContext, metric: str | None = None) -> dict[str, Any]:
    from mlpilot.tracking import registry

    client = context.client()
    if context.session_runs:
        best = best_entry(context.session_runs, metric)
        if best is None:
            raise MlpilotError(
                "no run of this session has finished with a model"
                + (f" and a test_{metric} metric" if metric else ""),
                hint="train one first, or list the experiment's runs with: mlpilot runs list",
            )
        run = client.get_run(best["run_id"])
        return {
            **_run_summary(run),
            "scope": "session",
            "ranked_by": f"test_{best['metric']}",
            "value": best["metrics"][f"test_{best['metric']}"],
            "model_uri": best["model_uri"],
        }
    experiment_id = context.experiment_id(client)
    if experiment_id is None:
        raise MlpilotError(
            f"experiment {context.experiment!r} has no runs yet",
            hint="train a model first with mlpilot run",
        )
    run_id, used = registry.best_run(client, experiment_id, metric)
    run = client.get_run(run_id)
    return {
        **_run_summary(run),
        "scope": "experiment",
        "ranked_by": f"test_{used}",
        "value": run.data.metrics.get(f"test_{used}"),
        "model_uri": registry.model_uri_of_run(client, run_id),
    }


def compare_runs(context: QueryContext, run_ids: list[str]) -> dict[str, Any]:
    """Runs side by side. Ids may be unique prefixes; no ids compares the last two runs."""
    client = context.client()
    experiment_id = context.experiment_id(client)
    if not run_ids:
        run_ids = _last_two(context, client, experiment_id)
    if len(run_ids) < 2:
        raise MlpilotError(
            "compare_runs needs at least two run ids", hint="list runs with: mlpilot runs list"
        )
    rows = []
    for rid in run_ids:
        run = client.get_run(_resolve_prefix(client, experiment_id, rid))
        rows.append({**_run_summary(run), "params": dict(run.data.params)})
    keys = sorted({k for r in rows for k in r["metrics"]})
    params = sorted({k for r in rows for k in r["params"]})
    differing = [p for p in params if len({r["params"].get(p) for r in rows}) > 1]
    return {"runs": rows, "metric_keys": keys, "differing_params": differing}


def _last_two(context: QueryContext, client: Any, experiment_id: str | None) -> list[str]:
    if context.session_runs:
        return [r["run_id"] for r in context.session_runs if r.get("metrics")][-2:]
    if experiment_id is None:
        return []
    runs = client.search_runs(
        [experiment_id],
        filter_string="tags.`mlpilot.kind` = 'agent_run'",
        order_by=["attributes.start_time DESC"],
        max_results=2,
    )
    return [r.info.run_id for r in reversed(runs)]


_HEX = re.compile(r"^[0-9a-f]{4,32}$")


def _resolve_prefix(client: Any, experiment_id: str | None, run_id: str) -> str:
    """A full run id for ``run_id`` or a prefix of one, looked up in the experiment first,
    then in every experiment; an ambiguous prefix fails listing the runs it matches."""
    from mlpilot.tracking import registry
    from mlpilot.tracking.mlflow_store import all_experiment_ids

    run_id = run_id.strip().lower() if _HEX.match(run_id.strip().lower()) else run_id.strip()
    if not _HEX.match(run_id) or len(run_id) == 32:
        return registry.resolve_run_id(client, experiment_id, run_id)
    scopes = [[experiment_id]] if experiment_id is not None else []
    scopes.append(all_experiment_ids(client))
    for ids in scopes:
        if not ids:
            continue
        runs = client.search_runs(
            ids, filter_string=f"attributes.run_id LIKE '{run_id}%'", max_results=11
        )
        matches = sorted({r.info.run_id for r in runs})
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            shown = ", ".join(m[:12] for m in matches[:10])
            raise MlpilotError(
                f"run id prefix {run_id!r} matches {len(matches)}{'+' if len(matches) > 10 else ''} runs: {shown}",
                hint="give more characters of the one you mean",
            )
    raise MlpilotError(f"no run with id {run_id!r}", hint="list runs with: mlpilot runs list")


def show_study(context: QueryContext, name: str | None = None) -> dict[str, Any]:
    import optuna

    from mlpilot.platform.ml.hpo import open_storage

    storage = open_storage(context.settings.optuna_storage)
    summaries = optuna.get_all_study_summaries(storage)
    if not summaries:
        raise MlpilotError(
            "there are no Optuna studies yet",
            hint="tune a model first, e.g. 'tune a random forest for 30 trials'",
        )
    if name is None:
        chosen = max(summaries, key=lambda s: s.datetime_start or 0)  # type: ignore[arg-type,return-value]
    else:
        matches = [s for s in summaries if s.study_name == name] or [
            s for s in summaries if s.study_name.startswith(name)
        ]
        if not matches:
            names = ", ".join(s.study_name for s in summaries[:10])
            raise MlpilotError(f"no study named {name!r}", hint=f"studies: {names}")
        chosen = matches[0]
    study = optuna.load_study(study_name=chosen.study_name, storage=storage)
    complete = [t for t in study.trials if t.value is not None]
    best = study.best_trial if complete else None
    return {
        "name": study.study_name,
        "storage": context.settings.optuna_storage,
        "direction": study.direction.name.lower(),
        "n_trials": len(study.trials),
        "states": {
            state: sum(t.state.name == state for t in study.trials)
            for state in ("COMPLETE", "PRUNED", "FAIL", "RUNNING")
        },
        "best_value": best.value if best else None,
        "best_params": best.params if best else None,
    }
