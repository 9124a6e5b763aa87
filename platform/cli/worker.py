"""``mlpilot worker --study NAME``: run trials of a study in shared Optuna storage.

Start as many as there are machines (or GPUs: one worker per GPU, each with its own
``CUDA_VISIBLE_DEVICES``); they share the study's trial numbers and budget through the
storage. ``--dask ADDRESS`` (or ``local:N``) runs the trials on a Dask cluster instead.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mlpilot.platform.cli._output import console, fail, handle_errors, print_json


@handle_errors
def worker(
    study: Annotated[str, typer.Option("--study", "-s", help="Name of the study to join.")],
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Journal file or RDB URL (default: MLPILOT_OPTUNA_STORAGE, else the journal under MLPILOT_HOME).",
        ),
    ] = None,
    trials: Annotated[
        int | None,
        typer.Option(
            "--trials",
            "-n",
            min=1,
            help="Run this many trials here (default: until the study's budget is used).",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=1, help="Stop after this many seconds.")
    ] = None,
    data: Annotated[
        str | None,
        typer.Option("--data", "-d", help="The study's data file, where it lives on this machine."),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="cpu or gpu; default and only choice: the study's (gpu runs this worker "
            "under python -m cudf.pandas -m cuml.accel, Dask workers through dask-cuda).",
        ),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            help="Run the trials on a Dask cluster: a scheduler address, or local:N for N local workers.",
        ),
    ] = None,
    no_track: Annotated[
        bool, typer.Option("--no-track", help="Log trials only to Optuna, not to MLflow.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    plugins: Annotated[
        list[str] | None,
        typer.Option(
            "--plugins",
            help="Module with @tool definitions whose steps the study's recipe may call "
            "(repeatable; without it only built-in steps run).",
        ),
    ] = None,
) -> None:
    """Join an Optuna study in shared storage and run its trials (in a contained child)."""
    from mlpilot.platform.cli.progress import ConsoleProgress
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.execution.worker_leg import contained_launcher
    from mlpilot.platform.ml.hpo.worker import run_worker

    if engine not in (None, "cpu", "gpu"):
        fail(f"--engine {engine!r} is not valid: use cpu or gpu")
    # Dask trials run in this process's cluster: it must run on the study's engine itself;
    # a contained trial loop is started with the study's engine command instead
    if dask and _needs_gpu_command(study, storage, engine):
        raise typer.Exit(_relaunch_on_gpu())
    settings = get_settings()
    progress = ConsoleProgress(quiet=json_out)  # the trial bar starts with the first trial
    report = run_worker(
        study,
        storage=storage,
        trials=trials,
        timeout_s=timeout,
        data_path=data,
        engine=engine,
        dask=dask,
        track=not no_track,
        on_event=progress.event if not dask else None,
        allowed=_step_functions(plugins or ()),
        launch=contained_launcher(settings, storage or settings.optuna_storage),
    )
    progress.event(_stage_end(report))
    if json_out:
        print_json(report.to_dict())
        return
    _print(report)


def _stage_end(report: Any) -> Any:
    from datetime import datetime, timezone

    from mlpilot.platform.ml.protocol import PipelineEvent

    at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    return PipelineEvent(type="stage_end", at=at, stage="tune", seconds=_elapsed(report))


def _step_functions(plugins: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The runtime functions a study's recipe may call: registered pipeline tools'."""
    from mlpilot.platform.tools import default_registry

    registry = default_registry(tuple(plugins))
    return frozenset(t.runtime for t in registry if t.kind == "pipeline" and t.runtime)


def _needs_gpu_command(study: str, storage: str | None, engine: str | None) -> bool:
    """A GPU study (or --engine gpu) in a process not yet under cudf.pandas + cuml.accel."""
    from mlpilot.platform.ml.devices import process_engine
    from mlpilot.platform.ml.hpo.worker import study_engine

    if process_engine() == "gpu":
        return False
    return (engine or study_engine(study, storage)) == "gpu"


def _relaunch_on_gpu() -> int:
    """Run this same command through the GPU engine's command line; its exit code."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from mlpilot.platform.execution import cuda_device_status, engine_command
    from mlpilot.platform.ml import protocol

    device = cuda_device_status()
    if not device.usable:
        fail(f"the study runs on the GPU, but {device.reason}")
    script = str(Path(__file__).resolve().with_name("_accelerated.py"))
    env = dict(os.environ)
    env[protocol.ENV_WORKER_ARGV] = json.dumps(sys.argv[1:])
    env[protocol.ENV_ENGINE_USED] = "gpu"
    # the user's own process: their environment (storage and tracking credentials) is theirs
    return subprocess.call(engine_command("gpu", script, []), env=env)


def _elapsed(report: Any) -> float:
    return float(report.seconds)


def _print(report: Any) -> None:
    out = console()
    summary = report.summary
    out.print(f"[green]Worker done[/green]: {report.ran} trial(s) of study {report.study}")
    if report.reaped:
        out.print(f"  marked FAIL (their worker died): trials {report.reaped}")
    if summary.get("best_value") is not None:
        out.print(
            f"  best {summary['metric']} {summary['best_value']:.5g} (trial {summary['best_trial']}), "
            f"{summary['n_trials']} trials in the study",
            markup=False,
        )
    if report.stop_reason:
        out.print(f"  stopped by: {report.stop_reason}", markup=False)
    for note in report.notes:
        out.print(f"  note: {note}", markup=False)
    out.print(f"  storage: {report.storage}", markup=False)
    if report.mlflow_run_id:
        out.print(f"  trials logged under MLflow run {report.mlflow_run_id}", markup=False)
