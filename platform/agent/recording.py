"""Recording a finished pipeline: results into both stores, and into the session."""

from __future__ import annotations

from typing import Any

from mlpilot.platform.agent.request import RunOutcome
from mlpilot.platform.agent.sessions import Session, save_session
from mlpilot.platform.errors import describe_error
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.protocol import PipelineResult
from mlpilot.platform.plan import Plan
from mlpilot.tracking import vocab


def record_result(leg: Any, logger: Any, store: Any, outcome: RunOutcome, run_id: str) -> None:
    """RECORDING: the child's result into the outcome, MLflow (logs, timings) and MongoDB."""
    result: PipelineResult = leg.result or PipelineResult(status=protocol.FAILED)
    log_output(leg, logger)
    outcome.metrics.update(result.metrics)
    outcome.timings.update(result.timings)
    outcome.model_uri = result.model_uri
    outcome.importance = result.importance
    outcome.registered = result.registered
    outcome.predictions = result.predictions
    outcome.study = result.study
    outcome.main_metric = result.main_metric
    outcome.notes.extend(n for n in result.notes if n not in outcome.notes)
    _record_fallback(leg, logger, outcome)
    timings = {
        "stages_s": outcome.timings,
        # DESIGN §4: the device each stage really ran on, measured in the pipeline
        "devices": result.devices,
        "accelerators": result.accelerators,
        "startup_s": result.startup_s,
        "wall_s": round(leg.child.duration_s, 4),
        "stage_peak_memory_mb": result.stage_memory_mb,
        "peak_memory_mb": result.peak_memory_mb,
        "gpu_peak_memory_mb": getattr(leg, "gpu_peak_memory_mb", None),
        "engine": outcome.engine,
    }
    logger.log_dict(timings, "timings.json")
    if result.devices:
        logger.set_tags(device_tags(result.devices))
    fields = _run_fields(result, outcome)
    fields["devices"] = result.devices
    _record_containment(leg, logger, fields)
    store.update_run(run_id, fields)
    if result.target:
        logger.set_tags(
            {
                vocab.TAG_TARGET: result.target,
                vocab.TAG_TASK: result.task or "",
                vocab.TAG_METRIC: outcome.main_metric or "",
            }
        )


def log_output(leg: Any, logger: Any) -> None:
    """``logs/stdout.txt`` and ``logs/stderr.txt`` from what the parent captured from the
    child's pipes, never from the run folder's files (the pipeline can swap them for links)."""
    child = getattr(leg, "child", None)
    if child is None:
        return
    for name, data in ((protocol.STDOUT_FILE, child.stdout), (protocol.STDERR_FILE, child.stderr)):
        logger.log_text(data.decode("utf-8", errors="replace"), f"logs/{name}")


def _record_containment(leg: Any, logger: Any, fields: dict[str, Any]) -> None:
    """What the child ran under: containment.json, two tags, and the MongoDB run's field."""
    if getattr(leg, "containment", None) is None:
        return
    contained = leg.containment.to_dict()
    fields["containment"] = contained
    logger.log_dict(contained, "containment.json")
    logger.set_tags(
        {
            vocab.TAG_CONTAINMENT_USER: contained["user"],
            vocab.TAG_CONTAINMENT_NETWORK: contained["network"],
        }
    )


def device_tags(devices: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``mlpilot.device.<stage>``: gpu, cpu, or mixed with what ran on the CPU."""
    from mlpilot.platform.ml.devices import describe_device

    return {
        vocab.device_tag(stage): describe_device(record)[:500] for stage, record in devices.items()
    }


def _record_fallback(leg: Any, logger: Any, outcome: RunOutcome) -> None:
    """An ``auto`` run whose GPU leg died before its first stage, or failed with a device
    error at any stage, and reran whole on the CPU: engine, note and tags say so."""
    fallback = getattr(leg, "fallback", None)
    if not fallback:
        return
    from mlpilot.tracking.mlflow_store import engine_tags

    engine = dict(outcome.engine or {})
    engine.update(used=leg.engine, reason=fallback["reason"], fallback=fallback)
    outcome.engine = engine
    why = fallback.get("why") or "died before its first stage"
    note = f"the GPU leg {why} ({fallback['error']}); rerun on the CPU"
    if note not in outcome.notes:
        outcome.notes.append(note)
    tags = engine_tags(str(engine.get("requested") or "auto"), leg.engine, fallback["reason"])
    tags[vocab.TAG_ENGINE_FALLBACK_ERROR] = str(fallback["error"])[:500]
    logger.set_tags(tags)


def _run_fields(result: PipelineResult, outcome: RunOutcome) -> dict[str, Any]:
    """The MongoDB run document's fields from a finished pipeline (DESIGN §5)."""
    fields: dict[str, Any] = {
        "metrics": outcome.metrics,
        "timings": outcome.timings,
        "main_metric": outcome.main_metric,
        "task": result.task,
        "target": result.target,
        "notes": outcome.notes,
        "pipeline_path": outcome.pipeline_path,
        "model": {
            "uri": outcome.model_uri,
            "registered_name": (outcome.registered or {}).get("name"),
            "version": (outcome.registered or {}).get("version"),
            **({"sha256": result.model_digests} if result.model_digests else {}),
        },
    }
    if outcome.study:
        fields["study"] = outcome.study
    if result.data:
        fields["dataset.rows"] = result.data["rows"]
    if result.labels:  # classes, and the positive one of a binary task
        fields["labels"] = result.labels
    if outcome.engine:
        fields["engine"] = outcome.engine
    return fields


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
