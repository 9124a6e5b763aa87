"""A run that exists in both stores: its state transitions, its pipeline's events, its end.

Every transition is an event in the MongoDB run document and the ``mlpilot.state`` tag in
MLflow; ``finish`` writes the terminal state to both, so a run is never left RUNNING.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from mlpilot.platform.agent.request import RunOutcome
from mlpilot.platform.agent.services import Progress, RunLogger, RunStore
from mlpilot.platform.errors import describe_error
from mlpilot.platform.ml.protocol import PipelineEvent
from mlpilot.tracking import vocab
from mlpilot.tracking.metadata import new_event, utcnow
from mlpilot.tracking.vocab import RunState

logger = logging.getLogger(__name__)

ERROR_TAG_CHARS = 500
#: pipeline events worth an entry in the run document (every tenth trial, not each one)
_RECORDED_EVENTS = ("stage_end", "pipeline_failed")
_TRIAL_EVERY = 10
#: what ``default_study_name`` and ``--study`` give: target, model, run id or stamp
_STUDY_NAME = re.compile(r"[\w.:-]{1,200}")


class TrackedRun:
    def __init__(
        self,
        *,
        tracker: RunLogger,
        store: RunStore,
        progress: Progress,
        outcome: RunOutcome,
        run_dir: Path,
        state: RunState,
    ) -> None:
        self.tracker, self.store, self.progress = tracker, store, progress
        self.outcome, self.run_dir, self.state = outcome, run_dir, state

    @property
    def run_id(self) -> str:
        return self.tracker.run_id

    def transition(self, state: RunState, message: str = "", **fields: Any) -> None:
        self.state = state
        self.store.update_run(
            self.run_id, {"status": state.value, **fields}, [new_event(state.value, message)]
        )
        self.tracker.set_tags({vocab.TAG_STATE: state.value})
        self.progress.state(state.value, message)

    def on_event(self, event: PipelineEvent) -> None:
        """A pipeline event: shown as progress, and kept on the run when it marks a step."""
        if event.type == "study":
            self._study_started(event)
            return
        self.progress.event(event)
        if event.type in _RECORDED_EVENTS or (
            event.type == "trial" and int(event.number or 0) % _TRIAL_EVERY == _TRIAL_EVERY - 1
        ):
            detail = {k: v for k, v in event.to_dict().items() if k != "at"}
            message = event.message or _describe_event(event)
            self.store.update_run(
                self.run_id, {}, [new_event(RunState.RUNNING.value, message, detail=detail)]
            )

    def _study_started(self, event: PipelineEvent) -> None:
        """The search's study, on the run from its start (``runs show``, ``worker --study``).

        The name is the pipeline's word, so it is shown only when it reads as a study name;
        the recipe a worker later runs is checked by the worker itself."""
        name = event.message or ""
        if not _STUDY_NAME.fullmatch(name):
            logger.warning("ignored a study event with an unexpected name: %r", name[:80])
            return
        self.progress.event(event)
        self.store.update_run(
            self.run_id,
            {"study": {"name": name}},
            [new_event(RunState.RUNNING.value, f"study {name}")],
        )
        self.tracker.set_tags({vocab.TAG_OPTUNA_STUDY: name})

    def finish(self, final: RunState) -> None:
        """The terminal state, with the outcome's error if any, in both stores."""
        self.outcome.status = final.value
        fields: dict[str, Any] = {"finished_at": utcnow()}
        error = self.outcome.error
        if error:
            fields["error"] = error
            self.tracker.set_tags(
                {
                    vocab.TAG_ERROR: describe_error(error)[:ERROR_TAG_CHARS],
                    vocab.TAG_ERROR_STAGE: str(error.get("stage") or ""),
                }
            )
        self.transition(final, describe_error(error) if error else "done", **fields)
        self.tracker.end(final.mlflow_status)


def end_unrecorded(tracker: RunLogger, exc: BaseException) -> None:
    """End an MLflow run whose MongoDB document could not be written (``exc`` is re-raised
    by the caller: this only keeps the MLflow run from staying RUNNING)."""
    final = RunState.CANCELLED if isinstance(exc, KeyboardInterrupt) else RunState.FAILED
    try:
        tracker.set_tags(
            {vocab.TAG_STATE: final.value, vocab.TAG_ERROR: str(exc)[:ERROR_TAG_CHARS]}
        )
        tracker.end(final.mlflow_status)
    except Exception as problem:  # the original error is the one to report
        logger.warning("could not end MLflow run %s: %s", tracker.run_id, problem)


def _describe_event(event: PipelineEvent) -> str:
    if event.type == "stage_end":
        return f"{event.stage} done in {event.seconds or 0:.2f} s"
    if event.type == "trial":
        return f"trial {event.number}: value {event.value}, best {event.best}"
    return event.type
