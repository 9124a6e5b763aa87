"""Background runs launched from the chat page, with their live progress."""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from mlpilot.dashboards import queries
from mlpilot.platform.ml.protocol import PipelineEvent

logger = logging.getLogger(__name__)

MAX_EVENTS = 400


@dataclass
class Job:
    id: str
    prompt: str
    session_id: str
    lines: list[str] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False


class JobProgress:
    """Receives orchestrator states and pipeline events for one job."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def _add(self, line: str) -> None:
        if len(self.job.lines) < MAX_EVENTS:
            self.job.lines.append(line)

    def state(self, state: str, message: str = "") -> None:
        self._add(f"● {state} {message}".strip())

    def event(self, event: PipelineEvent) -> None:
        kind = event.type
        if kind == "stage_end":
            self._add(f"  ✓ {event.stage} ({event.seconds or 0:.2f} s)")
        elif kind == "stage_start":
            self._add(f"  … {event.stage}")
        elif kind == "trial":
            self._add(f"  trial {event.number}: best {event.best}")
        elif kind in ("note", "progress", "pipeline_failed"):
            self._add(f"    {event.message or ''}")


_JOBS: dict[str, Job] = {}
_LOCK = threading.Lock()


def start(prompt: str, session_id: str, engine: str | None = None) -> Job:
    job = Job(id=uuid.uuid4().hex[:12], prompt=prompt, session_id=session_id)
    with _LOCK:
        _JOBS[job.id] = job
    threading.Thread(target=_work, args=(job, engine), daemon=True, name=f"chat-{job.id}").start()
    return job


def get(job_id: str | None) -> Job | None:
    with _LOCK:
        return _JOBS.get(job_id or "")


def _work(job: Job, engine: str | None) -> None:
    from mlpilot.platform.agent.orchestrator import run_request
    from mlpilot.platform.agent.request import RunRequest
    from mlpilot.platform.errors import MlpilotError

    try:
        outcome = run_request(
            RunRequest(prompt=job.prompt, session_id=job.session_id, engine=engine),
            progress=JobProgress(job),
            settings=queries.settings(),
        )
        job.outcome = outcome.to_dict()
    except MlpilotError as exc:
        job.error = exc.one_line()
    except Exception as exc:  # shown in the chat, never a silent dead thread
        logger.debug("shown in the chat, never a silent dead thread: %s", exc)
        job.error = f"internal error: {type(exc).__name__}: {exc}"
    finally:
        job.done = True
