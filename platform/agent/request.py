"""What goes into the orchestrator (``RunRequest``) and what comes back (``RunOutcome``)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.tracking.vocab import RunState

#: a query's outcome: it answers at once and creates no run, so it has no ``RunState``
ANSWERED = "ANSWERED"


@dataclass
class RunRequest:
    prompt: str
    data_path: str | None = None
    target: str | None = None
    engine: str | None = None
    experiment: str | None = None
    template: str | None = None
    template_params: dict[str, Any] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    session_id: str | None = None
    plan_file: str | None = None
    #: folders the plan may read from besides the data file (``--allow-read DIR``)
    allow_read: tuple[str, ...] = ()
    adapter: str | None = None  # --adapter NAME or "none"
    #: a request the planner cannot place is asked back (chat), not recorded as a failed run
    ask_back: bool = False
    tags: dict[str, str] = field(default_factory=dict)  # extra parent-run tags
    #: wall-clock time the request began (``mlpilot run``: when the command started); a
    #: time budget counts from here (``protocol.ENV_RUN_STARTED_AT``)
    received_at: float = field(default_factory=time.time)


@dataclass
class RunOutcome:
    status: str  # a terminal RunState, or ANSWERED for a query
    session_id: str
    run_id: str | None = None
    experiment: str | None = None
    experiment_id: str | None = None
    tracking_uri: str | None = None
    plan: dict[str, Any] | None = None
    planner: str | None = None
    engine: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    run_dir: str | None = None
    pipeline_path: str | None = None
    model_uri: str | None = None
    importance: list[dict[str, Any]] | None = None
    registered: dict[str, Any] | None = None
    predictions: dict[str, Any] | None = None
    study: dict[str, Any] | None = None
    answer: Any = None
    notes: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    main_metric: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RunFailed(MlpilotError):
    """Raised inside the orchestrator to end a run FAILED with an error already described."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", "the run failed"))
        self.error = error


def failure_of(exc: BaseException, stage: RunState | str) -> dict[str, Any]:
    """The ``{type, message, stage}`` a run records for ``exc`` raised at ``stage``."""
    stage = str(stage)
    if isinstance(exc, RunFailed):
        return exc.error
    if isinstance(exc, KeyboardInterrupt):
        return {"type": "Cancelled", "message": "cancelled by the user", "stage": stage}
    if isinstance(exc, MlpilotError):
        return exc.to_dict(stage=stage)
    # a bug: recorded as one, so that the run still ends instead of staying RUNNING
    return {"type": type(exc).__name__, "message": f"internal error: {exc}", "stage": stage}
