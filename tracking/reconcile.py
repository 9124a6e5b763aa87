"""The reconciler: make the MongoDB run documents agree with MLflow, and say what changed.

MLflow is the record of what ran (a run, its status, its metrics); the metadata store
keeps the rest (states, events). ``reconcile`` walks MLflow's agent runs
(``mlpilot.kind=agent_run``) and the store's unfinished documents and:

- creates a missing document from MLflow (tags, ``plan.json``, ``prompt.txt``, the data
  profile, metrics; FINISHED → SUCCEEDED, FAILED → FAILED, KILLED → CANCELLED);
- fixes a status or metrics that differ from a terminated MLflow run;
- ends an MLflow run left RUNNING whose document has ended (MLflow went away at the end);
- ends a document stuck in a non-terminal state whose MLflow run has ended, or whose
  MLflow run no longer exists;
- optionally (``stale_after_s``) fails runs RUNNING in both stores whose process stopped
  updating them long ago;
- ends a run whose mlpilot process died while it was RUNNING or RECORDING by what its
  pipeline's result in the run folder says (``result_file``, read without following
  links): SUCCEEDED, with MLflow's metrics and model and the version it registered, when
  the pipeline succeeded; FAILED otherwise.

Writes are idempotent (event ids are derived from the run and the fix), so repairing
twice changes nothing the second time.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.tracking import mlflow_store as ms
from mlpilot.tracking import vocab
from mlpilot.tracking.metadata import (
    ACTIVE_STATES,
    SCHEMA_DOC_COLUMNS,
    TERMINAL_STATES,
    MetadataStore,
    utcnow,
)
from mlpilot.tracking.owner import owner_state
from mlpilot.tracking.registry import load_json_artifact, model_uri_of_run
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlflow import MlflowClient

REPAIR_NOTE = "by mlpilot doctor --repair"
#: the largest pipeline result a repair reads
RESULT_LIMIT = 32 * 2**20
#: states in which a dead owner may have left a pipeline's finished result unrecorded
RESULT_STATES = ("RUNNING", "RECORDING")
#: a result's status when its pipeline succeeded (``protocol.SUCCEEDED``)
PIPELINE_SUCCEEDED = "succeeded"
#: an unfinished MLflow run younger than this may not have its document yet: leave it
NEW_RUN_GRACE_S = 300.0


@dataclass
class Change:
    run_id: str
    action: str  # created, status, metrics, stuck, orphaned, abandoned, recovered, mlflow-ended
    detail: str


@dataclass
class ReconcileReport:
    checked: int = 0
    changes: list[Change] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    skipped: list[Change] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _when(millis: int | None) -> datetime | None:
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc) if millis else None


def _event(run_id: str, fix: str, state: str, at: datetime | None, message: str) -> dict[str, Any]:
    return {
        "id": f"rc-{fix}-{run_id[:8]}",
        "at": at or utcnow(),
        "state": state,
        "message": message,
    }


def _age_s(run: Any) -> float:
    return time.time() - (run.info.start_time or 0) / 1000


def _state_of(run: Any) -> str:
    """The mlpilot state an MLflow run stands for."""
    mapped = vocab.MLFLOW_TO_STATE.get(run.info.status)
    if mapped:
        return mapped
    tagged = run.data.tags.get(vocab.TAG_STATE)
    return tagged if tagged in ACTIVE_STATES else "RUNNING"


def _error_of(run: Any, state: str) -> dict[str, Any] | None:
    if state not in ("FAILED", "CANCELLED"):
        return None
    message = run.data.tags.get(vocab.TAG_ERROR) or (
        "cancelled" if state == "CANCELLED" else "the run failed (reason not recorded)"
    )
    return {"type": "Recovered", "message": message, "stage": None}


def _timings(metrics: dict[str, float]) -> dict[str, float]:
    return {
        key[len("time_") : -len("_s")]: value
        for key, value in metrics.items()
        if key.startswith("time_") and key.endswith("_s")
    }


def _same_metrics(ours: dict[str, Any] | None, theirs: dict[str, float]) -> bool:
    ours = ours or {}
    if set(ours) != set(theirs):
        return False
    for key, value in theirs.items():
        try:
            if not math.isclose(float(ours[key]), float(value), rel_tol=1e-9, abs_tol=1e-12):
                return False
        except (TypeError, ValueError):
            return False
    return True


def _load_text(client: MlflowClient, run_id: str, path: str) -> str | None:
    import tempfile
    from pathlib import Path

    try:
        with tempfile.TemporaryDirectory() as tmp:
            return Path(client.download_artifacts(run_id, path, tmp)).read_text(encoding="utf-8")
    except Exception as exc:
        logger.debug("artifact not readable; the run tag stands in: %s", exc)
        return None


def doc_from_mlflow(client: MlflowClient, run: Any, experiment: str | None) -> dict[str, Any]:
    """The fields of a ``runs`` document rebuilt from an MLflow agent run."""
    tags = run.data.tags
    run_id = run.info.run_id
    state = _state_of(run)
    metrics = dict(run.data.metrics)
    profile = load_json_artifact(client, run_id, "data/profile.json") or {}
    columns = profile.get("columns") or []
    dataset = {
        "path": profile.get("path"),
        "fingerprint": tags.get(vocab.TAG_FINGERPRINT) or profile.get("fingerprint"),
        "rows": profile.get("rows"),
        "cols": len(columns) or None,
        "schema": [
            {"name": str(c.get("name"))[:200], "kind": c.get("kind")}
            for c in columns[:SCHEMA_DOC_COLUMNS]
        ],
    }
    fields: dict[str, Any] = {
        "session_id": tags.get(vocab.TAG_SESSION),
        "experiment": experiment,
        "experiment_id": run.info.experiment_id,
        "prompt": _load_text(client, run_id, "prompt.txt") or tags.get(vocab.TAG_PROMPT, ""),
        "planner": tags.get(vocab.TAG_PLANNER),
        "plan": load_json_artifact(client, run_id, "plan.json"),
        "status": state,
        "dataset": dataset,
        "engine": ms.engine_of(tags),
        "metrics": metrics,
        "timings": _timings(metrics),
        "main_metric": tags.get(vocab.TAG_METRIC) or None,
        "target": tags.get(vocab.TAG_TARGET) or None,
        "task": tags.get(vocab.TAG_TASK) or None,
        "model": {"uri": _safe_model_uri(client, run_id), "registered_name": None, "version": None},
        "created_at": _when(run.info.start_time) or utcnow(),
        "repaired_from": "mlflow",
    }
    if state in TERMINAL_STATES:
        fields["finished_at"] = _when(run.info.end_time) or utcnow()
    error = _error_of(run, state)
    if error:
        fields["error"] = error
    return fields


def _safe_model_uri(client: MlflowClient, run_id: str) -> str | None:
    try:
        return model_uri_of_run(client, run_id)
    except Exception as exc:
        logger.debug("no model URI recorded for the run: %s", exc)
        return None


class Reconciler:
    def __init__(
        self,
        client: MlflowClient,
        store: MetadataStore,
        *,
        dry_run: bool = False,
        skip_run_ids: set[str] | frozenset[str] = frozenset(),
        stale_after_s: float | None = None,
        result_file: str | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.dry_run = dry_run
        self.skip_run_ids = set(skip_run_ids)
        self.stale_after_s = stale_after_s
        #: the pipeline's result in its run folder (``protocol.RESULT_FILE``, named by the
        #: caller: tracking sits below the protocol); None: runs whose owner died end FAILED
        self.result_file = result_file
        self.report = ReconcileReport()
        self._experiments: dict[str, str | None] = {}

    def run(self) -> ReconcileReport:
        seen: set[str] = set()
        experiment_ids = ms.all_experiment_ids(self.client)
        for run in ms.search_all_runs(self.client, experiment_ids, vocab.AGENT_RUNS_FILTER):
            seen.add(run.info.run_id)
            self._check(run, self.store.get_run(run.info.run_id))
        for doc in self.store.find_runs({"status": {"$in": list(ACTIVE_STATES)}}, limit=0):
            run_id = str(doc["_id"])
            if run_id in seen:
                continue
            run = self._mlflow_run(run_id)
            if run is None:
                self._orphaned(doc)
            else:
                self._check(run, doc)
        return self.report

    # -- one run --------------------------------------------------------------------------------
    def _check(self, run: Any, doc: dict[str, Any] | None) -> None:
        run_id = run.info.run_id
        self.report.checked += 1
        if run_id in self.skip_run_ids:
            self.report.skipped.append(
                Change(run_id, "skipped", "writes still queued in the outbox")
            )
            return
        if doc is None:
            if run.info.status not in vocab.MLFLOW_TO_STATE and _age_s(run) < NEW_RUN_GRACE_S:
                self.report.in_progress.append(run_id)  # its orchestrator may be writing it now
            else:
                self._create(run)
            return
        state = _state_of(run)
        terminal = run.info.status in vocab.MLFLOW_TO_STATE
        if not terminal:
            if doc.get("status") in TERMINAL_STATES:
                self._end_in_mlflow(run, doc["status"])
            elif self._stale(run, doc):
                self._abandon(run, doc)
            else:
                self.report.in_progress.append(run_id)
            return
        fields: dict[str, Any] = {}
        events: list[dict[str, Any]] = []
        if doc.get("status") != state:
            stuck = doc.get("status") not in TERMINAL_STATES
            action = "stuck" if stuck else "status"
            ended = _when(run.info.end_time)
            fields.update(status=state, finished_at=ended or utcnow())
            error = _error_of(run, state)
            if error and not doc.get("error"):
                fields["error"] = error
            message = f"marked {state} {REPAIR_NOTE}: its MLflow run ended {run.info.status}"
            events.append(_event(run_id, state.lower(), state, ended, message))
            self._change(run_id, action, f"{doc.get('status')} → {state}")
        metrics = dict(run.data.metrics)
        if not _same_metrics(doc.get("metrics"), metrics):
            fields["metrics"] = metrics
            if not doc.get("timings"):
                fields["timings"] = _timings(metrics)
            self._change(run_id, "metrics", _metrics_diff(doc.get("metrics") or {}, metrics))
        if fields and not self.dry_run:
            self.store.update_run(run_id, fields, events)

    def _create(self, run: Any) -> None:
        run_id = run.info.run_id
        fields = doc_from_mlflow(self.client, run, self._experiment_name(run.info.experiment_id))
        state = fields["status"]
        events = [
            _event(
                run_id,
                "received",
                "RECEIVED",
                fields["created_at"],
                f"recreated from MLflow {REPAIR_NOTE}",
            )
        ]
        if state in TERMINAL_STATES:
            events.append(
                _event(
                    run_id,
                    state.lower(),
                    state,
                    fields.get("finished_at"),
                    f"{state} in MLflow ({run.info.status})",
                )
            )
        self._change(run_id, "created", f"document rebuilt from MLflow ({state})")
        if not self.dry_run:
            self.store.create_run(run_id, fields, events)

    def _end_in_mlflow(self, run: Any, state: str) -> None:
        """The document ended but its MLflow run was left RUNNING (MLflow went away at the end)."""
        run_id = run.info.run_id
        status = vocab.RunState(state).mlflow_status
        self._change(
            run_id, "mlflow-ended", f"MLflow run {run.info.status} → {status}, as recorded"
        )
        if not self.dry_run:
            self.client.set_tag(run_id, vocab.TAG_STATE, state)
            self.client.set_terminated(run_id, status=status)

    def _orphaned(self, doc: dict[str, Any]) -> None:
        run_id = str(doc["_id"])
        self.report.checked += 1
        if run_id in self.skip_run_ids:
            return
        message = f"marked FAILED {REPAIR_NOTE}: its MLflow run no longer exists"
        self._change(run_id, "orphaned", f"{doc.get('status')} → FAILED (no MLflow run)")
        if not self.dry_run:
            self.store.update_run(
                run_id,
                {
                    "status": "FAILED",
                    "finished_at": utcnow(),
                    "error": {"type": "Recovered", "message": message, "stage": doc.get("status")},
                },
                [_event(run_id, "orphaned", "FAILED", None, message)],
            )

    def _stale(self, run: Any, doc: dict[str, Any]) -> bool:
        if owner_state(doc.get("owner")) == "gone":
            return True  # its mlpilot process has ended: nothing will finish it
        if self.stale_after_s is None:
            return False
        updated = doc.get("updated_at") or doc.get("created_at")
        if not isinstance(updated, datetime):
            return False
        return (utcnow() - updated).total_seconds() > self.stale_after_s

    def _abandon(self, run: Any, doc: dict[str, Any]) -> None:
        run_id = run.info.run_id
        idle_h = (utcnow() - (doc.get("updated_at") or utcnow())).total_seconds() / 3600
        owner = doc.get("owner") or {}
        if owner_state(owner) == "gone":
            why = f"its mlpilot process (pid {owner.get('pid')}) has ended"
        else:
            why = f"no progress for {idle_h:.1f} h (its process is gone)"
        result = self._pipeline_result(doc)
        if result is not None and result.get("status") == PIPELINE_SUCCEEDED:
            self._finish_succeeded(run, doc, result, why)
            return
        message = f"marked FAILED {REPAIR_NOTE}: {why}"
        if result is not None and isinstance(result.get("error"), dict):
            message += f"; the pipeline had failed: {result['error'].get('message')}"[:1000]
        self._change(run_id, "abandoned", f"{doc.get('status')} → FAILED in both stores")
        if self.dry_run:
            return
        error = {"type": "Abandoned", "message": message, "stage": doc.get("status")}
        self.client.set_tag(run_id, vocab.TAG_STATE, "FAILED")
        self.client.set_tag(run_id, vocab.TAG_ERROR, message[:500])
        self.client.set_terminated(run_id, status="FAILED")
        self.store.update_run(
            run_id,
            {"status": "FAILED", "finished_at": utcnow(), "error": error},
            [_event(run_id, "abandoned", "FAILED", None, message)],
        )

    def _pipeline_result(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """The pipeline's own result, read without following links, or None."""
        if self.result_file is None or doc.get("status") not in RESULT_STATES:
            return None
        folder = _run_folder(doc.get("run_dir"))
        if folder is None:
            return None
        try:
            with RunFolder(folder) as run_folder:
                raw = run_folder.read_bytes(self.result_file, RESULT_LIMIT)
            result = json.loads(raw) if raw is not None else None
        except (UnsafeFile, ValueError, OSError) as exc:
            logger.debug("no usable result in %s: %s", folder, exc)
            return None
        return result if isinstance(result, dict) else None

    def _finish_succeeded(
        self, run: Any, doc: dict[str, Any], result: dict[str, Any], why: str
    ) -> None:
        """The owner died recording a pipeline that succeeded: the run succeeded.

        Only the verdict comes from the run folder; metrics and the model are MLflow's,
        which the pipeline logged itself, and a registered version counts once MLflow
        has it (from this run).
        """
        run_id = run.info.run_id
        message = (
            f"marked SUCCEEDED {REPAIR_NOTE}: {why} before recording its pipeline, which succeeded"
        )
        self._change(run_id, "recovered", f"{doc.get('status')} → SUCCEEDED in both stores")
        if self.dry_run:
            return
        metrics = dict(run.data.metrics) or _numbers(result.get("metrics"))
        fields: dict[str, Any] = {
            "status": "SUCCEEDED",
            "finished_at": utcnow(),
            "metrics": metrics,
            "timings": _timings(metrics),
            "model": {
                "uri": _safe_model_uri(self.client, run_id),
                **self._registered(run_id),
            },
        }
        for key in ("main_metric", "task", "target"):
            if isinstance(result.get(key), str):
                fields[key] = result[key]
        self.client.set_tag(run_id, vocab.TAG_STATE, "SUCCEEDED")
        self.client.set_terminated(run_id, status=vocab.RunState.SUCCEEDED.mlflow_status)
        self.store.update_run(
            run_id, fields, [_event(run_id, "recovered", "SUCCEEDED", None, message)]
        )

    def _registered(self, run_id: str) -> dict[str, Any]:
        """The version registered from this run, as MLflow's registry has it (mlpilot
        registers for the pipeline, so the registry is read, not the pipeline's result)."""
        none: dict[str, Any] = {"registered_name": None, "version": None}
        try:
            found = self.client.search_model_versions(f"run_id = '{run_id}'")
        except Exception as exc:
            logger.debug("the registry is not readable: %s", exc)
            return none
        if not found:
            return none
        newest = max(found, key=lambda v: int(v.creation_timestamp or 0))
        return {"registered_name": str(newest.name), "version": str(newest.version)}

    # -- helpers --------------------------------------------------------------------------------
    def _change(self, run_id: str, action: str, detail: str) -> None:
        self.report.changes.append(Change(run_id, action, detail))

    def _mlflow_run(self, run_id: str) -> Any:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_run(run_id)
        except MlflowException as exc:
            if (
                getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST"
                or "not found" in str(exc).lower()
            ):
                return None
            raise

    def _experiment_name(self, experiment_id: str) -> str | None:
        if experiment_id not in self._experiments:
            try:
                self._experiments[experiment_id] = self.client.get_experiment(experiment_id).name
            except Exception as exc:
                logger.debug("experiment name not found: %s", exc)
                self._experiments[experiment_id] = None
        return self._experiments[experiment_id]


def _run_folder(run_dir: Any) -> Path | None:
    """The run folder a document names. ``runs/<run id>`` may be the parent's own link to
    a folder made before the run existed (a plain name beside it): that one is followed,
    since only the parent writes ``runs/``; anything else is opened without following."""
    if not isinstance(run_dir, str) or not run_dir:
        return None
    path = Path(run_dir)
    if path.is_symlink():
        target = os.readlink(path)
        if "/" in target or target in (".", ".."):
            return None
        path = path.parent / target
    return path


def _numbers(values: Any) -> dict[str, float]:
    if not isinstance(values, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in values.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def _metrics_diff(ours: dict[str, Any], theirs: dict[str, float]) -> str:
    missing = sorted(set(theirs) - set(ours))
    extra = sorted(set(ours) - set(theirs))
    changed = sorted(
        k for k in set(ours) & set(theirs) if not _same_metrics({k: ours[k]}, {k: theirs[k]})
    )
    parts = []
    if missing:
        parts.append(
            f"{len(missing)} missing ({', '.join(missing[:3])}{'…' if len(missing) > 3 else ''})"
        )
    if changed:
        parts.append(
            f"{len(changed)} changed ({', '.join(changed[:3])}{'…' if len(changed) > 3 else ''})"
        )
    if extra:
        parts.append(f"{len(extra)} not in MLflow")
    return "metrics set from MLflow: " + "; ".join(parts)


def reconcile(
    client: MlflowClient,
    store: MetadataStore,
    *,
    dry_run: bool = False,
    skip_run_ids: set[str] | frozenset[str] = frozenset(),
    stale_after_s: float | None = None,
    result_file: str | None = None,
) -> ReconcileReport:
    """Compare MLflow's agent runs with the store's documents and repair the store.

    ``result_file``: the name of a pipeline's result in its run folder; a run whose owner
    died while recording it then ends SUCCEEDED when that result says it succeeded.
    """
    started = time.perf_counter()
    report = Reconciler(
        client,
        store,
        dry_run=dry_run,
        skip_run_ids=skip_run_ids,
        stale_after_s=stale_after_s,
        result_file=result_file,
    ).run()
    report.seconds = round(time.perf_counter() - started, 3)
    return report
