"""Health checks of the tracking stores, and the repair that ``mlpilot doctor --repair`` runs."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import MlpilotError

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
#: a run RUNNING in both stores with no update for this long past its time limit is abandoned
ABANDONED_AFTER_TIMEOUT_S = 3600.0


@dataclass
class Check:
    name: str
    status: str  # ok, warn, fail, info
    detail: str
    hint: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def timed(name: str, probe: Any) -> Check:
    """Run ``probe() -> Check`` and time it; an ``MlpilotError`` becomes a failed check."""
    started = time.perf_counter()
    try:
        check = probe()
    except MlpilotError as exc:
        check = Check(name, FAIL, " ".join(exc.message.split()), exc.hint)
    check.seconds = round(time.perf_counter() - started, 3)
    return check


def check_mlflow(settings: Settings) -> Check:
    def probe() -> Check:
        from mlpilot.tracking.mlflow_store import all_experiment_ids, make_client, redact_uri
        from mlpilot.tracking.registry import mlflow_errors

        uri = redact_uri(settings.tracking_uri)
        client = make_client(settings)
        with mlflow_errors(f"MLflow at {uri} refused a query"):
            experiments = len(all_experiment_ids(client))
        kind = "server" if uri.startswith(("http://", "https://")) else "local store"
        return Check("MLflow", OK, f"{kind} {uri} answers ({experiments} experiments)")

    return timed("MLflow", probe)


def check_metadata(settings: Settings) -> Check:
    def probe() -> Check:
        from mlpilot.tracking.metadata import connect

        store = connect(settings)
        try:
            store.ping()
            runs = store.count_runs()
            detail = f"{store.describe()} answers ({runs} runs)"
        finally:
            store.close()
        return Check("MongoDB", OK, detail)

    check = timed("MongoDB", probe)
    if check.status == FAIL and not check.hint:
        check.hint = (
            "start it, or unset MLPILOT_MONGO_URI for the embedded store; runs still complete "
            "and their writes wait in the outbox"
        )
    return check


def check_outbox(settings: Settings) -> Check:
    from mlpilot.tracking.metadata import Outbox

    outbox = Outbox(settings.outbox_path)
    pending = outbox.pending()
    if not pending:
        return Check("outbox", OK, "empty")
    runs = {op.get("run_id") for op in pending if op.get("run_id")}
    return Check(
        "outbox",
        WARN,
        f"{len(pending)} metadata writes ({len(runs)} runs) waiting in {outbox.path}",
        "replay them with: mlpilot doctor --repair",
    )


def repair(
    settings: Settings, *, dry_run: bool = False, result_file: str | None = None
) -> dict[str, Any]:
    """Replay the outbox, then make the metadata store agree with MLflow (``result_file``:
    see ``reconcile``).

    Raises ``StoreUnavailable`` / ``TrackingError`` when either store cannot be reached:
    repairing needs both.
    """
    from mlpilot.tracking.metadata import Outbox, connect
    from mlpilot.tracking.mlflow_store import make_client
    from mlpilot.tracking.reconcile import reconcile

    store = connect(settings)
    try:
        outbox = Outbox(settings.outbox_path)
        replayed = 0 if dry_run else outbox.replay(store)
        waiting = outbox.pending()
        client = make_client(settings)
        report = reconcile(
            client,
            store,
            dry_run=dry_run,
            skip_run_ids={op["run_id"] for op in waiting if op.get("run_id")},
            stale_after_s=settings.run_timeout_s + ABANDONED_AFTER_TIMEOUT_S,
            result_file=result_file,
        )
    finally:
        store.close()
    return {
        "replayed": replayed,
        "still_queued": len(waiting),
        "rejected_file": str(outbox.rejected_path) if outbox.rejected_path.exists() else None,
        "dry_run": dry_run,
        **report.to_dict(),
    }
