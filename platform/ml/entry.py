"""How a generated ``pipeline.py`` starts and ends: its command line, its MLflow run, exit.

mlpilot's executor passes its options in the environment (``protocol.ENV_*``); a person
running the script uses flags. Under mlpilot the pipeline logs through its run folder
(``RelayedRunLogger``: the parent logs to MLflow for it); run standalone it opens MLflow
itself (``MlflowRunLogger``), and ``--no-track`` logs nothing. The script opens its run with ``open_pipeline`` and ends
with ``exit_process``; everything in between is steps of the runtime library.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from mlpilot.platform.errors import TrackingError
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.deferred_logger import DeferredRunLogger
from mlpilot.platform.ml.relayed_logger import RelayedRunLogger
from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)


def parse_args(argv: list[str] | None, default_data: str | None) -> argparse.Namespace:
    # argv is not safe to use under `python -m cudf.pandas -m cuml.accel` (some releases
    # parse the arguments after the script): the executor uses the environment instead
    parser = argparse.ArgumentParser(description="Run this mlpilot pipeline.")
    parser.add_argument(
        "--data",
        default=os.environ.get(protocol.ENV_DATA) or default_data,
        help="data file (default: the file planned on)",
    )
    parser.add_argument(
        "--no-track",
        action="store_true",
        default=os.environ.get(protocol.ENV_NO_TRACK) == "1",
        help="log nothing to MLflow",
    )
    parser.add_argument(
        "--experiment", default=None, help="MLflow experiment (default: the request's)"
    )
    parser.add_argument(
        "--run-dir",
        default=os.environ.get(protocol.ENV_RUN_DIR),
        help=f"folder for {protocol.EVENTS_FILE}, {protocol.RESULT_FILE} and outputs "
        "(default: the working directory)",
    )
    parser.add_argument(
        "--engine",
        choices=("cpu", "gpu"),
        default=None,
        help=f"engine this process runs on (default: {protocol.ENV_ENGINE_USED}, else cpu)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="random seed (default: the planned one)"
    )
    return parser.parse_args(argv)


def open_pipeline(
    argv: list[str] | None,
    *,
    plan: dict[str, Any],
    seed: int,
    default_data: str | None,
    runtime: dict[str, dict[str, str]] | None = None,
    experiment: str | None = None,
) -> PipelineRun:
    """The run of a generated script, from its command line and environment.

    ``experiment`` is where the request ran: a hand re-run logs beside it (``--experiment``
    overrides it), and shows its progress on stderr, as mlpilot would have."""
    from mlpilot.platform.config.logs import configure_logging

    configure_logging()
    args = parse_args(argv, default_data)
    check_own_script()
    run_dir = Path(args.run_dir or os.getcwd()).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    engine = args.engine or os.environ.get(protocol.ENV_ENGINE_USED, "cpu")
    relayed, pending = None, None
    if args.no_track:
        pass  # nothing to open: the logger logs nothing
    elif os.environ.get(protocol.ENV_RELAY) == "1":
        # under mlpilot: records in the run folder, logged to MLflow by the parent (§8)
        relayed = RelayedRunLogger(run_dir)
    else:
        # standalone: MLflow opens when training starts (see DeferredRunLogger), or when
        # first needed
        pending = DeferredRunLogger(
            functools.partial(_open_logger, args.experiment or experiment, plan)
        )
    run = PipelineRun(
        plan=plan,
        seed=args.seed if args.seed is not None else seed,
        data_path=args.data,
        run_dir=run_dir,
        engine=engine,
        logger=relayed,
        pending_logger=pending,
        runtime=runtime,
        handed_run_id=None if args.no_track else os.environ.get(protocol.ENV_MLFLOW_RUN_ID),
        launched_at=_env_time(protocol.ENV_LAUNCHED_AT),
        started_at=_env_time(protocol.ENV_RUN_STARTED_AT),
        prefer=os.environ.get(protocol.ENV_PREFER) or engine,
    )
    if not os.environ.get(protocol.ENV_LAUNCHED_AT):  # by hand: no parent shows the events
        run.echo = functools.partial(_echo, run)
    return run


def _echo(run: PipelineRun, event: Any) -> None:
    line = _describe(run, event)
    if line:
        with contextlib.suppress(OSError, ValueError):  # a closed pipe must not fail the run
            print(line, file=sys.stderr, flush=True)


def _describe(run: PipelineRun, event: Any) -> str | None:
    """One line of progress for a pipeline run by hand (None: nothing worth a line)."""
    kind = event.type
    if kind == "stage_start":
        return f"… {event.stage}"
    if kind == "stage_end":
        return f"✓ {event.stage} ({event.seconds or 0:.2f} s)"
    if kind in ("note", "progress") and event.message:
        return f"    {event.message}"
    if kind == "study":
        return f"    study {event.message}"
    if kind == "trial" and event.n and (event.n == event.total or event.n % 10 == 0):
        best = f", best {event.metric or ''} {event.best:.5g}" if event.best is not None else ""
        return f"    trial {event.n}/{event.total or '?'}{best}"
    if kind == "pipeline_end":
        return _summary(run, event.seconds)
    return None


def _summary(run: PipelineRun, seconds: float | None) -> str:
    scores = [
        f"{k} {v:.5g}"
        for k, v in sorted(run.metrics.items())
        if k.startswith(("test_", "cv_")) and not k.endswith("_std")
    ][:6]
    lines = [f"done in {seconds or 0:.1f} s" + (": " + ", ".join(scores) if scores else "")]
    try:
        run_id = run.logger.run_id
    except Exception as exc:  # MLflow was never opened (--no-track): nothing to point at
        logger.debug("no MLflow run to name: %s", exc)
        run_id = None
    if run_id:
        lines.append(f"MLflow run {run_id}")
    return "\n".join(lines)


def check_own_script() -> None:
    """A ``pipeline.py`` run by hand from a run folder must be the one mlpilot wrote there:
    a pipeline could have rewritten an earlier run's script for its owner to re-run. Run
    by mlpilot, it was recorded a moment ago; elsewhere (a copy) it only warns."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if os.environ.get(protocol.ENV_LAUNCHED_AT) or not script:
        return
    from mlpilot.tracking.anchors import check_script

    try:
        warning = check_script(Path(os.path.abspath(script)))
    except TrackingError as exc:
        raise SystemExit(f"error: {exc.one_line()}") from None
    if warning:
        print(f"warning: {warning}", file=sys.stderr)


def _env_time(name: str) -> float | None:
    """A wall-clock time the parent handed over: when it started this process
    (``ENV_LAUNCHED_AT``, for the start-up time) or the request (``ENV_RUN_STARTED_AT``,
    where a time budget counts from)."""
    value = os.environ.get(name)
    try:
        return float(value) if value else None
    except ValueError:
        logger.debug("ignored an unreadable %s: %r", name, value)
        return None


def exit_process(code: int) -> NoReturn:
    """End the process with ``code`` after the exit handlers, skipping interpreter teardown.

    Tearing down pandas, scikit-learn and MLflow module by module takes about a third of
    a second and saves nothing. The ``atexit`` handlers still run: MLflow flushes its
    asynchronous trace export there.
    """
    import atexit

    try:
        atexit._run_exitfuncs()
    except Exception as exc:  # an exit handler's failure must not change the exit code
        logger.warning("an exit handler failed: %s", exc)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to flush into
            stream.flush()
    logging.shutdown()
    os._exit(code)


def _open_logger(experiment: str | None, plan: dict[str, Any]) -> tuple[Any, bool]:
    """The MLflow logger of this pipeline, and whether this process created its run."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.mlflow_store import ensure_experiment, make_client, mlpilot_version
    from mlpilot.tracking.run_logger import MlflowRunLogger

    settings = get_settings()
    run_id = os.environ.get(protocol.ENV_MLFLOW_RUN_ID)  # a standalone script given a run
    client = make_client(settings)
    if run_id:
        return MlflowRunLogger(client, run_id), False
    experiment_id = ensure_experiment(
        client, experiment or settings.experiment, settings.artifact_root
    )
    run = client.create_run(
        experiment_id,
        tags={
            vocab.TAG_KIND: vocab.KIND_PIPELINE,
            vocab.TAG_SOURCE: protocol.SCRIPT_FILE,
            vocab.TAG_VERSION: mlpilot_version(),
        },
    )
    new_logger = MlflowRunLogger(client, run.info.run_id, experiment_id)
    new_logger.log_dict(plan, "plan.json")
    return new_logger, True
