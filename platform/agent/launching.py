"""RUNNING: ``launch`` writes a prepared ``pipeline.py`` into its run folder and starts it.

Early start. Opening MLflow and creating the run takes the parent a second or two; a
pipeline launched before its run exists (``run=None``) spends that time reading its data
instead of waiting. Its folder is created under a name of its own and linked as
``runs/<run id>`` once the run exists; the run id reaches the pipeline through that folder
(``StartedLeg.hand_over_run``: the parent relays the pipeline's tracking records to it). Whether to launch early is the orchestrator's only
decision about it: the same ``launch`` runs either way.

An engine comparison launches once its run exists: its GPU leg logs into a nested run.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import stat
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.agent.preparing import PreparedRun
from mlpilot.platform.agent.services import EventHandler, Leg, PipelineExecutor
from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.protocol import (
    ENV_RUN_STARTED_AT,
    ENV_STORE_MODELS,
    SCRIPT_FILE,
    STORE_MODELS_DIR,
)
from mlpilot.tracking.runfolder import RunFolder

if TYPE_CHECKING:
    from mlpilot.platform.agent.tracked_run import TrackedRun
    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution import EngineChoice, LegResult

logger = logging.getLogger(__name__)

#: the generated script: read-only to everyone, the parent's own
SCRIPT_MODE = 0o444


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
    """``pipeline.py``, the parent's own and read-only: in a sticky run folder the pipeline
    can neither change it nor put another in its place (rerunning it reruns this code)."""
    from mlpilot.tracking import anchors

    with RunFolder(run_dir) as folder:
        folder.write_new(SCRIPT_FILE, source, mode=SCRIPT_MODE)
    script = run_dir / SCRIPT_FILE
    anchors.record_script(script, source)  # what a re-run by hand is checked against
    return script


def _start_leg(
    executor: PipelineExecutor,
    engine: EngineChoice,
    prepared: PreparedRun,
    script: Path,
    run_id: str | None,
) -> Leg:
    from mlpilot.platform.execution.relay import plan_registrations

    plan = prepared.plan.to_dict()
    env = {ENV_RUN_STARTED_AT: f"{prepared.request.received_at:.6f}"}
    provided = fetch_store_models(executor.settings, plan, prepared.experiment, script.parent)
    if provided:
        env[ENV_STORE_MODELS] = json.dumps(provided)
    # the whole choice, so that an auto GPU leg that dies before its first stage, or of a
    # device error, reruns on the CPU (the executor's fallback)
    leg = executor.start_leg(
        script=script,
        run_dir=script.parent,
        engine=engine,
        data_path=prepared.data_path,
        mlflow_run_id=run_id,
        # a time budget is the whole run's: the pipeline counts it from the request's start
        extra_env=env,
        registrations=plan_registrations(plan),
        # files the plan's other steps read (predict's data_path): handed over like --data,
        # since the pipeline's own mounts show it nothing else
        extra_reads=_step_reads(plan),
    )
    for folder in provided.values():  # the share of the run folder made them writable
        read_only(script.parent / folder)
    return leg


def _step_reads(plan: dict[str, Any]) -> tuple[str, ...]:
    """The data files a plan's steps other than ``load_data`` read (checked by the path
    policy at VALIDATING, absolute by then)."""
    reads = []
    for step in plan.get("steps") or []:
        path = (step.get("args") or {}).get("data_path") if isinstance(step, dict) else None
        if isinstance(path, str) and path:
            reads.append(path)
    return tuple(reads)


_TRAINS = ("train_model", "optimize_model")


def fetch_store_models(
    settings: Settings, plan: dict[str, Any], experiment: str, run_dir: Path
) -> dict[str, str]:
    """The store models the plan's ``predict`` steps load, fetched and verified into the run
    folder before the pipeline starts (it has no access to the store): {as planned: folder}."""
    steps = plan.get("steps") or []
    trains = any(step.get("tool") in _TRAINS for step in steps)
    wanted = [
        (step.get("args") or {}).get("model_uri") for step in steps if step.get("tool") == "predict"
    ]
    wanted = [uri for uri in wanted if uri is not None or not trains]
    if not wanted:
        return {}
    from mlpilot.tracking import registry
    from mlpilot.tracking.mlflow_store import make_client
    from mlpilot.tracking.trust import fetch_verified

    client = make_client(settings)
    provided = {}
    for number, uri in enumerate(dict.fromkeys(wanted)):
        source = uri
        if source is None:  # no model of its own: the experiment's best
            found = client.get_experiment_by_name(experiment)
            _, source = registry.resolve_source(client, found and found.experiment_id, None, None)
        dest = run_dir / STORE_MODELS_DIR / str(number)
        local = fetch_verified(client, source, dest)
        provided[uri or ""] = local.relative_to(run_dir).as_posix()
    return provided


def read_only(folder: Path) -> None:
    """Files 0444 and folders 0555 (their ACL mask follows: no group may write either)."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)


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
    return make_run_dir(path, exist_ok=False)


def make_run_dir(path: Path, *, exist_ok: bool = True) -> Path:
    """A run folder whose top level the pipeline cannot rearrange: sticky, so the files
    the parent puts there (``pipeline.py``, the captured output, the run id, the cancel
    request) can be neither removed nor renamed by the pipeline, which may still create
    and replace its own (DESIGN §8)."""
    path.mkdir(parents=True, exist_ok=exist_ok)
    info = os.stat(path, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode) and not info.st_mode & stat.S_ISVTX:
        os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_ISVTX, follow_symlinks=False)
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
