"""Recording a finished pipeline: results into both stores, and into the session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpilot.platform.agent.sessions import Session, save_session
from mlpilot.platform.errors import describe_error
from mlpilot.platform.plan import Plan

if TYPE_CHECKING:
    from mlpilot.platform.agent.orchestrator import RunOutcome


def record_result(leg: Any, logger: Any, store: Any, outcome: RunOutcome, run_id: str) -> None:
    """RECORDING: the child's result.json into the outcome, MLflow (logs, timings) and MongoDB."""
    result = leg.result or {}
    for name in ("stdout.txt", "stderr.txt"):
        path = leg.run_dir / name
        if path.exists():
            logger.log_file(path, "logs")
    outcome.metrics.update(result.get("metrics", {}))
    outcome.timings.update(result.get("timings", {}))
    outcome.model_uri = result.get("model_uri")
    outcome.importance = result.get("importance")
    outcome.registered = result.get("registered")
    outcome.predictions = result.get("predictions")
    outcome.study = result.get("study")
    outcome.main_metric = result.get("main_metric")
    outcome.notes.extend(n for n in result.get("notes", []) if n not in outcome.notes)
    timings = {
        "stages_s": outcome.timings,
        "stage_peak_memory_mb": result.get("stage_memory_mb", {}),
        "peak_memory_mb": result.get("peak_memory_mb"),
        "engine": outcome.engine,
    }
    logger.log_dict(timings, "timings.json")
    fields: dict[str, Any] = {
        "metrics": outcome.metrics,
        "timings": outcome.timings,
        "main_metric": outcome.main_metric,
        "task": result.get("task"),
        "target": result.get("target"),
        "notes": outcome.notes,
        "pipeline_path": outcome.pipeline_path,
        "model": {
            "uri": outcome.model_uri,
            "registered_name": (outcome.registered or {}).get("name"),
            "version": (outcome.registered or {}).get("version"),
        },
    }
    if outcome.study:
        fields["study"] = outcome.study
    if result.get("data"):
        fields["dataset.rows"] = result["data"]["rows"]
    store.update_run(run_id, fields)
    if result.get("target"):
        logger.set_tags(
            {
                "mlpilot.target": result["target"],
                "mlpilot.task": result.get("task") or "",
                "mlpilot.metric": outcome.main_metric or "",
            }
        )


def remember_outcome(
    session: Session, outcome: RunOutcome, profile: Any, plan: Plan, store: Any
) -> None:
    """What the session keeps for follow-ups: data, target, last run, best run, a summary."""
    load = plan.step("load_data")
    session.remember(
        data_path=profile.path if profile else None,
        target=load.args.get("target") if load else None,
        last_run=outcome.run_id,
        last_plan=plan.to_dict(),
        experiment=outcome.experiment,
        metric=outcome.main_metric,
    )
    session.record_run(outcome, plan)  # the session's runs, model family and best run
    parts = [f"{k}={v:.4g}" for k, v in outcome.metrics.items() if k.startswith("test_")]
    if outcome.registered:
        parts.append(f"registered {outcome.registered['name']} v{outcome.registered['version']}")
    if outcome.predictions:
        parts.append(f"predictions in {outcome.predictions['path']}")
    if outcome.error:
        parts.append(describe_error(outcome.error))
    summary = f"{outcome.status.lower()}: " + ", ".join(parts)
    session.add("assistant", summary, outcome.run_id)
    save_session(store, session)
