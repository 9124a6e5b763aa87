"""RUNNING: ``launch`` writes a prepared ``pipeline.py`` into its run folder and starts it.

Early start. Opening MLflow and creating the run takes the parent a second or two; a
pipeline launched before its run exists (``run=None``) spends that time reading its data
instead of waiting. Its folder is created under a name of its own and linked as
``runs/<run id>`` once the run exists; the run id reaches the pipeline through that folder
(``StartedLeg.hand_over_run``). Whether to launch early is the orchestrator's only
decision about it: the same ``launch`` runs either way.

An engine comparison launches once its run exists: its GPU leg logs into a nested run.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.platform.agent.preparing import PreparedRun
from mlpilot.platform.agent.services import EventHandler, Leg, PipelineExecutor
from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.protocol import ENV_RUN_STARTED_AT, SCRIPT_FILE

if TYPE_CHECKING:
    from mlpilot.platform.agent.tracked_run import TrackedRun
    from mlpilot.platform.execution import EngineChoice, LegResult

logger = logging.getLogger(__name__)


def launch(
    prepared: PreparedRun,
    run: TrackedRun | None,
    *,
    executor: PipelineExecutor,
    runs_dir: Path,
) -> Leg:
    """Start ``prepared``'s pipeline: in ``run``'s folder, or before its run exists."""
    engine, source = prepared.engine, prepared.source
    if engine is None or source is None:
        raise MlpilotError(f"nothing to launch: the run failed at {prepared.state.value}")
    if run is not None:
        script = _write_script(run.run_dir, source)
        if engine.used == "compare":
            return Comparison(executor, script, prepared, run)
        return _start_leg(executor, engine, prepared, script, run.run_id)
    if engine.used == "compare":
        raise MlpilotError("an engine comparison starts once its run exists")
    run_dir = new_run_dir(runs_dir)
    try:
        return _start_leg(executor, engine, prepared, _write_script(run_dir, source), None)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # no run refers to it
        raise


def _write_script(run_dir: Path, source: str) -> Path:
    from mlpilot.tracking import anchors

    script = run_dir / SCRIPT_FILE
    script.write_text(source, encoding="utf-8")
    anchors.record_script(script, source)  # what a re-run by hand is checked against
    return script


def _start_leg(
    executor: PipelineExecutor,
    engine: EngineChoice,
    prepared: PreparedRun,
    script: Path,
    run_id: str | None,
) -> Leg:
    # the whole choice, so that an auto GPU leg that dies before its first stage reruns on
    # the CPU (the executor's fallback)
    return executor.start_leg(
        script=script,
        run_dir=script.parent,
        engine=engine,
        data_path=prepared.data_path,
        mlflow_run_id=run_id,
        # a time budget is the whole run's: the pipeline counts it from the request's start
        extra_env={ENV_RUN_STARTED_AT: f"{prepared.request.received_at:.6f}"},
    )


class Comparison:
    """Both engine legs, run one after the other inside ``finish`` (nothing runs before)."""

    def __init__(
        self, executor: PipelineExecutor, script: Path, prepared: PreparedRun, run: TrackedRun
    ) -> None:
        self.executor, self.script, self.prepared, self.run = executor, script, prepared, run
        self.run_dir = run.run_dir

    def hand_over_run(self, run_id: str) -> None:
        pass  # launched with its run

    def stop(self) -> None:
        pass  # a leg runs only inside finish, which stops its child when interrupted

    def abandon(self) -> None:
        pass

    def finish(
        self, *, on_event: EventHandler | None = None, cancel: threading.Event | None = None
    ) -> LegResult:
        from mlpilot.platform.agent.compare import run_comparison

        run = self.run
        return run_comparison(
            self.executor,
            script=self.script,
            run_dir=self.run_dir,
            data_path=self.prepared.data_path,
            logger=run.tracker,
            store=run.store,
            on_event=on_event,
            outcome=run.outcome,
            profile=self.prepared.profile,
        )


def new_run_dir(runs_dir: Path) -> Path:
    """A run folder for a pipeline whose MLflow run does not exist yet."""
    path = runs_dir / f"{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    path.mkdir(parents=True)
    return path


def link_run_dir(real: Path, run_id: str) -> Path:
    """``runs/<run id>`` for a folder created before the run: a link to it where links work."""
    link = real.parent / run_id
    try:
        link.symlink_to(real.name, target_is_directory=True)
    except OSError as exc:
        logger.debug("no link %s → %s (%s): the run keeps its own folder name", link, real, exc)
        return real
    return link
