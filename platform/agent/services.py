"""What the orchestrator is given rather than builds: the metadata store, MLflow, the
executor and a progress display — as the protocols it relies on, and the real MLflow one.

Passing them in keeps the orchestrator testable in-process with fakes; the real ones are
``tracking.metadata.open_store``, ``MlflowTracking`` below and ``execution.Executor``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mlpilot.platform.ml.protocol import PipelineEvent

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution import EngineChoice, LegResult

logger = logging.getLogger(__name__)

EventHandler = Callable[[PipelineEvent], None]


class Progress(Protocol):
    def state(self, state: str, message: str = "") -> None: ...
    def event(self, event: PipelineEvent) -> None: ...


class SilentProgress:
    def state(self, state: str, message: str = "") -> None:
        pass

    def event(self, event: PipelineEvent) -> None:
        pass


class RunStore(Protocol):
    """The writes of ``tracking.metadata.RecordingStore`` the orchestrator makes (plus the
    session reads); query tools read through the same object."""

    def create_run(
        self, run_id: str, fields: dict[str, Any], events: list[dict[str, Any]] = ...
    ) -> None: ...
    def update_run(
        self, run_id: str, fields: dict[str, Any], events: list[dict[str, Any]] = ...
    ) -> None: ...
    def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    def save_session(
        self, session_id: str, messages: list[dict[str, Any]], context: dict[str, Any]
    ) -> None: ...
    def save_benchmark(self, benchmark_id: str, doc: dict[str, Any]) -> None: ...
    def flush(self) -> int: ...


class RunLogger(Protocol):
    """One MLflow run, written through an explicit client (``tracking.run_logger``)."""

    run_id: str
    experiment_id: str

    def set_tags(self, tags: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None: ...
    def log_text(self, text: str, artifact_file: str) -> None: ...
    def log_dict(self, data: Any, artifact_file: str) -> None: ...
    def log_file(self, local_path: str | Path, artifact_dir: str | None = None) -> None: ...
    def child(self, name: str, tags: dict[str, str] | None = None) -> RunLogger: ...
    def end(self, status: str = "FINISHED") -> None: ...


class Tracking(Protocol):
    """Where parent runs are created (MLflow)."""

    @property
    def tracking_uri(self) -> str: ...
    def create_run(self, experiment: str, run_name: str, tags: dict[str, str]) -> RunLogger:
        """A new run in ``experiment`` (created if needed); raises ``MlpilotError`` when
        the tracking store cannot be reached."""
        ...


class Leg(Protocol):
    """A pipeline started by the executor (``execution.StartedLeg``)."""

    run_dir: Path

    def hand_over_run(self, run_id: str) -> None: ...
    def stop(self) -> None: ...
    def abandon(self) -> None: ...
    def finish(
        self, *, on_event: EventHandler | None = None, cancel: threading.Event | None = None
    ) -> LegResult: ...


class PipelineExecutor(Protocol):
    """Starts pipelines in contained children (``execution.Executor``)."""

    settings: Settings

    def start_leg(
        self,
        *,
        script: Path,
        run_dir: Path,
        engine: str | EngineChoice,
        data_path: str | None,
        mlflow_run_id: str | None,
        extra_env: dict[str, str] | None = None,
        registrations: tuple[Any, ...] = (),
        extra_reads: tuple[str, ...] = (),
    ) -> Leg: ...
    def run_leg(
        self,
        *,
        script: Path,
        run_dir: Path,
        engine: str,
        data_path: str | None,
        mlflow_run_id: str | None,
        on_event: EventHandler | None = None,
        cancel: threading.Event | None = None,
    ) -> LegResult: ...


class MlflowTracking:
    """MLflow through one ``MlflowClient``, made on first use.

    Made late on purpose: importing MLflow and opening its store is what an early-started
    pipeline overlaps with, so nothing here may run before the pipeline starts.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: Any = None

    @property
    def tracking_uri(self) -> str:
        return self.settings.tracking_uri

    def create_run(self, experiment: str, run_name: str, tags: dict[str, str]) -> RunLogger:
        from mlpilot.tracking.mlflow_store import ensure_experiment, make_client
        from mlpilot.tracking.run_logger import MlflowRunLogger

        if self._client is None:
            self._client = make_client(self.settings)
        experiment_id = ensure_experiment(self._client, experiment, self.settings.artifact_root)
        run = self._client.create_run(experiment_id, run_name=run_name, tags=tags)
        logger.debug("created MLflow run %s in experiment %s", run.info.run_id, experiment)
        return MlflowRunLogger(self._client, run.info.run_id, experiment_id)
