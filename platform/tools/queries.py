"""Query tools' answers: read MLflow, the metadata store and Optuna storage; start nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.tracking import vocab


@dataclass
class QueryContext:
    settings: Any
    store: Any = None
    profile: Any = None
    experiment: str = "mlpilot"

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


def show_runs(context: QueryContext, limit: int = 10) -> dict[str, Any]:
    client = context.client()
    experiment_id = context.experiment_id(client)
    if experiment_id is None:
        return {"experiment": context.experiment, "runs": []}
    runs = client.search_runs(
        [experiment_id],
        filter_string="tags.`mlpilot.kind` = 'agent_run'",
        order_by=["attributes.start_time DESC"],
        max_results=limit,
    )
    return {"experiment": context.experiment, "runs": [_run_summary(r) for r in runs]}


def show_best_model(context: QueryContext, metric: str | None = None) -> dict[str, Any]:
    from mlpilot.tracking import registry

    client = context.client()
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
        "ranked_by": f"test_{used}",
        "value": run.data.metrics.get(f"test_{used}"),
        "model_uri": registry.model_uri_of_run(client, run_id),
    }


def compare_runs(context: QueryContext, run_ids: list[str]) -> dict[str, Any]:
    from mlpilot.tracking import registry

    if len(run_ids) < 2:
        raise MlpilotError("compare_runs needs at least two run ids")
    client = context.client()
    experiment_id = context.experiment_id(client)
    rows = []
    for rid in run_ids:
        run = client.get_run(registry.resolve_run_id(client, experiment_id, rid))
        rows.append({**_run_summary(run), "params": dict(run.data.params)})
    keys = sorted({k for r in rows for k in r["metrics"]})
    params = sorted({k for r in rows for k in r["params"]})
    differing = [p for p in params if len({r["params"].get(p) for r in rows}) > 1]
    return {"runs": rows, "metric_keys": keys, "differing_params": differing}


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
