"""Trials as nested MLflow runs (``mlpilot.kind=trial``), written in batches off the trial path.

A background thread takes finished trials from a queue and writes them a batch at a time
(every ``BATCH`` trials, or every ``INTERVAL_S`` seconds so the UI stays current). Each trial
is three calls: create the run (with the trial's start time), one ``log_batch`` with params,
metrics and tags, and terminate it (with the trial's end time). The optimisation loop only
appends to the queue, so a slow tracking server never slows the study, and a failing one
costs trial runs, never the study.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import optuna

BATCH = 10
INTERVAL_S = 5.0
#: after this many failed writes in a row the tracking server is taken as gone: stop trying
GIVE_UP_AFTER = 3


def _ms(moment: Any) -> int | None:
    return int(moment.timestamp() * 1000) if moment is not None else None


class TrialLogger:
    """Logs finished trials as children of ``parent`` (an ``MlflowRunLogger``)."""

    def __init__(
        self,
        parent: Any,
        study_name: str,
        *,
        batch: int = BATCH,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.parent = parent
        self.client = getattr(parent, "client", None)
        self.parent_run_id = parent.run_id
        self.experiment_id = parent.experiment_id
        self.study_name = study_name
        self.batch = batch
        self.interval_s = interval_s
        self.logged = 0
        self.failed = 0
        self.failed_in_a_row = 0
        self.busy_s = 0.0  # time spent writing, for the overhead benchmark
        self._queue: list[optuna.trial.FrozenTrial] = []
        self._closing = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="mlpilot-trial-log", daemon=True)
        self._thread.start()

    @classmethod
    def for_parent(cls, parent: Any, study_name: str, **options: Any) -> TrialLogger | None:
        """A logger under ``parent``, or None when the run is not tracked (NullRunLogger)."""
        relayed = getattr(parent, "relayed", False)  # records in the run folder (no MLflow id)
        if not relayed and (getattr(parent, "client", None) is None or not parent.run_id):
            return None
        return cls(parent, study_name, **options)

    def add(self, trial: optuna.trial.FrozenTrial) -> None:
        with self._wake:
            self._queue.append(trial)
            if len(self._queue) >= self.batch:
                self._wake.notify()

    def close(self) -> None:
        """Write what is queued and stop the thread."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
        if self.failed:
            print(
                f"warning: {self.failed} trial(s) could not be logged to MLflow",
                file=sys.stderr,
            )

    # -- the writer thread --------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(
                    lambda: self._closing or len(self._queue) >= self.batch,
                    timeout=self.interval_s,
                )
                pending, self._queue = self._queue, []
                closing = self._closing
            if pending:
                start = time.perf_counter()
                for trial in pending:
                    if self.failed_in_a_row >= GIVE_UP_AFTER:
                        self.failed += 1  # a dead server must not hold the study up for minutes
                    else:
                        self._write(trial)
                self.busy_s += time.perf_counter() - start
            if closing and not pending:
                return

    def _write(self, trial: optuna.trial.FrozenTrial) -> None:
        from mlpilot.platform.ml.devices import absorb_evidence
        from mlpilot.platform.ml.hpo.storage import describe_failure

        # a worker's trial: where it trained joins the open tune stage
        absorb_evidence(trial.user_attrs.get(vocab.ATTR_DEVICE))
        try:
            tags, metrics = self._trial_tags(trial), self._trial_metrics(trial)
            status = vocab.TRIAL_STATE_TO_MLFLOW.get(trial.state.name, "FAILED")
            if getattr(self.parent, "relayed", False):
                # the parent process creates the nested run (the pipeline has no MLflow)
                child = self.parent.child(
                    f"trial-{trial.number}", tags, start_ms=_ms(trial.datetime_start)
                )
            else:
                child = self._mlflow_child(trial, tags)
            child.log_params(dict(trial.params))
            child.log_metrics(metrics)
            for step, value in sorted(trial.intermediate_values.items()):
                child.log_metrics({"intermediate_value": value}, step=step)
            reason = describe_failure(trial)
            if reason:
                child.set_tags({vocab.ATTR_FAIL_REASON: reason})
            child.flush()
            child.end(status, end_ms=_ms(trial.datetime_complete))
            self.logged += 1
            self.failed_in_a_row = 0
        except Exception as exc:  # tracking trouble costs the trial's run, never the study
            logger.debug("tracking trouble costs the trial's run, never the study: %s", exc)
            self.failed += 1
            self.failed_in_a_row += 1
            if self.failed == 1:
                print(f"warning: logging trial {trial.number} failed: {exc}", file=sys.stderr)

    def _trial_tags(self, trial: optuna.trial.FrozenTrial) -> dict[str, str]:
        from mlpilot.platform.ml.hpo.storage import OWNER_ATTR

        owner = trial.user_attrs.get(OWNER_ATTR) or {}
        tags = {
            vocab.TAG_KIND: vocab.KIND_TRIAL,
            vocab.TAG_TRIAL_STATE: trial.state.name,
            vocab.TAG_TRIAL_NUMBER: str(trial.number),
            vocab.TAG_STUDY: self.study_name,
        }
        if owner:
            tags[vocab.TAG_WORKER] = f"{owner.get('host')}:{owner.get('pid')}"
        if trial.user_attrs.get(vocab.ATTR_ENGINE):
            tags[vocab.TAG_TRIAL_ENGINE] = str(trial.user_attrs[vocab.ATTR_ENGINE])
        if trial.user_attrs.get(vocab.ATTR_WARM_START):
            tags[vocab.TAG_TRIAL_WARM_START] = str(trial.user_attrs[vocab.ATTR_WARM_START])
        record = trial.user_attrs.get(vocab.ATTR_DEVICE)
        if isinstance(record, dict):  # a worker's trial: where it trained
            from mlpilot.platform.ml.devices import describe_device

            tags[vocab.device_tag("trial")] = describe_device(record)[:500]
        return tags

    @staticmethod
    def _trial_metrics(trial: optuna.trial.FrozenTrial) -> dict[str, float]:
        metrics: dict[str, float] = {"trial_number": trial.number}
        if trial.state.name == "COMPLETE" and trial.value is not None:
            metrics["value"] = float(trial.value)
        if trial.duration is not None:
            metrics["duration_s"] = trial.duration.total_seconds()
        return metrics

    def _mlflow_child(self, trial: optuna.trial.FrozenTrial, tags: dict[str, str]) -> Any:
        """The trial's nested run in MLflow (a standalone script, ``mlpilot worker``)."""
        from mlpilot.tracking.run_logger import MlflowRunLogger

        run = self.client.create_run(
            self.experiment_id,
            start_time=_ms(trial.datetime_start),
            tags={"mlflow.parentRunId": self.parent_run_id, **tags},
            run_name=f"trial-{trial.number}",
        )
        return MlflowRunLogger(self.client, run.info.run_id, self.experiment_id, deferred=True)
