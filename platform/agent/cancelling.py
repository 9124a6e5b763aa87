"""Cancel a run started elsewhere: another terminal, the dashboard, another host.

The request is a file in the run's folder (``protocol.CANCEL_FILE``) that the run's owner
looks for while its pipeline runs; the owner then stops the pipeline's process group and
records the run CANCELLED in MongoDB and KILLED in MLflow, as for Ctrl-C. A run whose
owner process has ended is ended here, in both stores, at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.protocol import CANCEL_FILE
from mlpilot.tracking import vocab
from mlpilot.tracking.metadata import new_event, open_store, utcnow
from mlpilot.tracking.owner import owner_state
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile
from mlpilot.tracking.vocab import RunState

logger = logging.getLogger(__name__)
POLL_S = 0.5


@dataclass
class CancelReport:
    run_id: str
    status: str  # the run's state when the command returns
    message: str


def cancel_run(settings: Settings, ref: str, *, wait_s: float = 30.0) -> CancelReport:
    """Ask the owner of run ``ref`` (an id or unique prefix) to stop it; wait up to ``wait_s``."""
    from mlpilot.tracking import runs

    store = open_store(settings)
    run_id = runs.resolve(None, store, ref)
    doc = store.get_run(run_id)
    if doc is None:
        raise MlpilotError(
            f"no run {ref!r} in the metadata store", hint="list runs: mlpilot runs list"
        )
    if doc.get("status") in vocab.TERMINAL_STATES:
        return CancelReport(run_id, doc["status"], f"run {run_id} already ended {doc['status']}")
    owner = doc.get("owner")
    if owner_state(owner) == "gone":
        _end_orphan(settings, store, run_id, doc)
        pid = (owner or {}).get("pid")
        return CancelReport(
            run_id,
            RunState.CANCELLED.value,
            f"run {run_id} CANCELLED (its process {pid} had ended)",
        )
    request_cancel(Path(doc.get("run_dir") or settings.runs_dir / run_id))
    status = _wait_for_end(store, run_id, wait_s)
    if status in vocab.TERMINAL_STATES:
        return CancelReport(run_id, status, f"run {run_id} {status}")
    where = (owner or {}).get("host", "its host")
    return CancelReport(
        run_id,
        status,
        f"cancel requested for run {run_id}: its process on {where} stops it at its next check",
    )


def request_cancel(run_dir: Path) -> None:
    """Write the cancel file through the folder's handle: created under a fresh name and
    renamed in, so a link the pipeline planted at that name is replaced, never followed
    (no file of the parent's appears wherever it pointed)."""
    try:
        with RunFolder(run_dir) as folder:
            folder.write_new(CANCEL_FILE, utcnow().isoformat())
    except UnsafeFile as exc:
        raise MlpilotError(
            f"the cancel request could not be written: {exc.message}",
            hint="mlpilot doctor --repair ends runs whose process is gone",
        ) from None


def _wait_for_end(store: Any, run_id: str, wait_s: float) -> str:
    deadline = time.monotonic() + wait_s
    status = ""
    while time.monotonic() < deadline:
        doc = store.get_run(run_id) or {}
        status = str(doc.get("status", ""))
        if status in vocab.TERMINAL_STATES:
            break
        time.sleep(POLL_S)
    return status


def _end_orphan(settings: Settings, store: Any, run_id: str, doc: dict[str, Any]) -> None:
    """Both stores CANCELLED for a run whose owner cannot do it any more."""
    from mlpilot.tracking.mlflow_store import make_client

    message = "cancelled by the user: its mlpilot process had ended"
    error = {"type": "Cancelled", "message": message, "stage": doc.get("status")}
    try:
        client = make_client(settings)
        client.set_tag(run_id, vocab.TAG_STATE, RunState.CANCELLED.value)
        client.set_tag(run_id, vocab.TAG_ERROR, message)
        client.set_terminated(run_id, status=RunState.CANCELLED.mlflow_status)
    except Exception as exc:  # MongoDB still says CANCELLED; doctor --repair aligns MLflow
        logger.warning("could not end MLflow run %s: %s", run_id, exc)
    store.update_run(
        run_id,
        {"status": RunState.CANCELLED.value, "finished_at": utcnow(), "error": error},
        [new_event(RunState.CANCELLED.value, message)],
    )
    store.flush()
