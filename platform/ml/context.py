"""``PipelineRun``: the state a generated pipeline carries from step to step.

It parses the script's command line, opens the MLflow run to log to (the one the parent
passes in ``MLFLOW_RUN_ID``, a new one when the script runs on its own, or none with
``--no-track``), times every stage, appends progress to ``events.jsonl`` and writes
``result.json`` at the end, whether the pipeline succeeded or failed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

from mlpilot.platform.errors import MlpilotError, TrackingError, describe_error
from mlpilot.platform.ml.deferred_logger import DeferredRunLogger
from mlpilot.tracking import vocab
from mlpilot.tracking.vocab import RunState

EVENTS_FILE = "events.jsonl"
RESULT_FILE = "result.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def peak_memory_mb() -> float:
    # ru_maxrss is in kilobytes on Linux and bytes on macOS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def free_gpu_memory() -> None:
    """Return cached device memory between stages (cuDF/cuML allocate through CuPy/RMM pools)."""
    import gc

    gc.collect()
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    except Exception:  # no CuPy, or no device: nothing cached to free
        pass


def exit_process(code: int) -> NoReturn:
    """End the process with ``code`` after the exit handlers, skipping interpreter teardown.

    Tearing down pandas, scikit-learn and MLflow module by module takes about a third of
    a second and saves nothing. The ``atexit`` handlers still run: MLflow flushes its
    asynchronous trace export there.
    """
    import atexit
    import logging

    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def parse_args(argv: list[str] | None, default_data: str | None) -> argparse.Namespace:
    # mlpilot's executor passes its options in MLPILOT_* variables: argv is not safe to use
    # under `python -m cudf.pandas -m cuml.accel`. A person running the script uses flags.
    parser = argparse.ArgumentParser(description="Run this mlpilot pipeline.")
    parser.add_argument(
        "--data",
        default=os.environ.get("MLPILOT_DATA") or default_data,
        help="data file (default: the file planned on)",
    )
    parser.add_argument("--no-track", action="store_true", help="log nothing to MLflow")
    parser.add_argument("--experiment", default=None, help="MLflow experiment for a standalone run")
    parser.add_argument(
        "--run-dir",
        default=os.environ.get("MLPILOT_RUN_DIR"),
        help="folder for events.jsonl, result.json and outputs (default: the working directory)",
    )
    parser.add_argument(
        "--engine",
        choices=("cpu", "gpu"),
        default=None,
        help="engine this process runs on (default: MLPILOT_ENGINE_USED, else cpu)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="random seed (default: the planned one)"
    )
    return parser.parse_args(argv)


class PipelineRun:
    """Carries data, decisions, the model and the logger between pipeline steps."""

    def __init__(
        self,
        *,
        plan: dict[str, Any],
        seed: int,
        data_path: str | None,
        run_dir: Path,
        logger: Any = None,
        engine: str = "cpu",
        owns_run: bool = False,
        pending_logger: DeferredRunLogger | None = None,
    ) -> None:
        self.plan = plan
        self.seed = seed
        self.data_path = data_path
        self.run_dir = run_dir
        self._logger = logger
        self._pending_logger = pending_logger
        self.engine = engine
        self._owns_run = owns_run
        self.exit_code = 0
        self.timings: dict[str, float] = {}
        self.stage_memory_mb: dict[str, float] = {}
        self.metrics: dict[str, float] = {}
        self.notes: list[str] = []
        self.result: dict[str, Any] = {}
        self.current_stage: str | None = None
        self.failed_stage: str | None = None
        self._started = time.perf_counter()
        # data and decisions, filled by the steps
        self.X: Any = None
        self.y: Any = None
        self.specs: list[Any] = []
        self.target: str | None = None
        self.task: str | None = None
        self.classes: Any = None
        self.positive_class: Any = None
        self.n_jobs = -1  # threads for estimators; settled by the data's size (limit_threads)
        self.train_index: Any = None
        self.test_index: Any = None
        self.split_cache: dict[str, Any] = {}
        self.raw_example: Any = None
        self.cleaning: Any = None
        self.features: Any = None
        self.model: Any = None
        self.model_family: str | None = None
        self.model_params: dict[str, Any] = {}
        self.main_metric: str | None = None
        self.model_uri: str | None = None
        self.model_logged = False

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_argv(
        cls,
        argv: list[str] | None,
        *,
        plan: dict[str, Any],
        seed: int,
        default_data: str | None,
    ) -> PipelineRun:
        args = parse_args(argv, default_data)
        run_dir = Path(args.run_dir or os.getcwd()).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        engine = args.engine or os.environ.get("MLPILOT_ENGINE_USED", "cpu")
        # MLflow opens when training starts (see DeferredRunLogger), or when first needed;
        # with --no-track there is nothing to open (the logger logs nothing)
        pending = (
            None
            if args.no_track
            else DeferredRunLogger(functools.partial(_open_logger, args, plan))
        )
        return cls(
            plan=plan,
            seed=args.seed if args.seed is not None else seed,
            data_path=args.data,
            run_dir=run_dir,
            engine=engine,
            pending_logger=pending,
        )

    @property
    def logger(self) -> Any:
        """The run's logger (calls that need MLflow open wait for it)."""
        if self._logger is None:
            if self._pending_logger is None:
                from mlpilot.tracking.run_logger import NullRunLogger

                self._logger = NullRunLogger()
            else:
                self._logger = self._pending_logger
        return self._logger

    def opened_logger(self) -> Any:
        """The logger once MLflow is open (waits for the opening thread).

        Code that imports MLflow itself calls this first: importing MLflow on two threads
        at once can fail inside MLflow's circular imports ("cannot import name …").
        """
        logger = self.logger
        return logger.resolve() if isinstance(logger, DeferredRunLogger) else logger

    @property
    def owns_run(self) -> bool:
        """Whether this process created its MLflow run (and so ends it)."""
        pending = self._pending_logger
        return self._owns_run or bool(pending is not None and pending.owns_run)

    def open_tracking(self) -> None:
        """Start opening MLflow in the background: a model is about to fit."""
        if self._pending_logger is not None:
            self._pending_logger.start()

    @logger.setter
    def logger(self, value: Any) -> None:
        self._logger, self._pending_logger = value, None
        self._owns_run = False

    # -- progress ------------------------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> None:
        record = {"at": _now(), "type": kind, **fields}
        with (self.run_dir / EVENTS_FILE).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")

    def note(self, message: str) -> None:
        self.notes.append(message)
        self.event("note", stage=self.current_stage, message=message)

    def log_metrics(self, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items() if v is not None}
        self.metrics.update(clean)
        self.logger.log_metrics(clean)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.current_stage = name
        self.event("stage_start", stage=name)
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self.failed_stage = self.failed_stage or name  # the innermost stage that raised
            raise
        finally:
            elapsed = time.perf_counter() - start
            self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 4)
            self.stage_memory_mb[name] = peak_memory_mb()
            if self.engine == "gpu":
                free_gpu_memory()
            self.event("stage_end", stage=name, seconds=round(elapsed, 4))
            self.current_stage = None

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> PipelineRun:
        self.event(
            "pipeline_start",
            engine=self.engine,
            seed=self.seed,
            run_id=os.environ.get("MLFLOW_RUN_ID"),
        )
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None:
            try:
                self._finish()
            except BaseException as finish_exc:
                exc = finish_exc
                tb = finish_exc.__traceback__
        if exc is not None:
            self._fail(exc, tb)
        self._write_result("succeeded" if exc is None else "failed")
        if self.owns_run:
            self.logger.end((RunState.SUCCEEDED if exc is None else RunState.FAILED).mlflow_status)
        return exc is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit))

    def _finish(self) -> None:
        from mlpilot.platform.ml import steps

        if self.model is not None and not self.model_logged:
            with self.stage("log_model"):
                steps.log_model(self)
        self.timings["total"] = round(time.perf_counter() - self._started, 4)
        self.result["peak_memory_mb"] = peak_memory_mb()
        final = {f"time_{k}_s": v for k, v in self.timings.items()}
        final["peak_memory_mb"] = self.result["peak_memory_mb"]
        self.log_metrics(final)
        if self._pending_logger is not None and self._logger is self._pending_logger:
            self._pending_logger.resolve()  # an MLflow that cannot be opened fails the run
        self.event("pipeline_end", seconds=self.timings["total"])

    def _fail(self, exc: BaseException, tb: Any) -> None:
        self.exit_code = 1
        if isinstance(exc, MlpilotError):
            message = exc.one_line()
        else:
            message = " ".join(str(exc).split()) or type(exc).__name__
            traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
        stage = self.failed_stage or self.current_stage
        error = {"type": type(exc).__name__, "message": message, "stage": stage}
        self.result["error"] = error
        self.timings.setdefault("total", round(time.perf_counter() - self._started, 4))
        self.event("pipeline_failed", stage=stage, message=describe_error(error))
        print(f"error: {describe_error(error)}", file=sys.stderr)

    def _write_result(self, status: str) -> None:
        try:
            run_id = self.logger.run_id
        except Exception as exc:  # MLflow could not be opened: the result still gets written
            run_id = None
            self.notes.append(f"MLflow could not be opened: {exc}")
        pending = self._pending_logger
        for skipped in pending.skipped if pending is not None else []:
            self.notes.append(f"not recorded in MLflow: {skipped}")
        payload = {
            "status": status,
            "run_id": run_id,
            "engine": self.engine,
            "seed": self.seed,
            "task": self.task,
            "target": self.target,
            "model_family": self.model_family,
            "main_metric": self.main_metric,
            "metrics": self.metrics,
            "timings": self.timings,
            "stage_memory_mb": self.stage_memory_mb,
            "model_uri": self.model_uri,
            "notes": self.notes,
            **self.result,
        }
        path = self.run_dir / RESULT_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(payload, indent=2, default=str, ensure_ascii=False), encoding="utf-8"
        )
        tmp.replace(path)


def await_run_id(path: Path, timeout_s: float = 600.0) -> str:
    """The MLflow run id mlpilot writes to ``path`` once it has created the run.

    mlpilot starts the pipeline first, so that reading the data overlaps with creating
    the run; the pipeline needs the id only when it first logs.
    """
    # the pid mlpilot gave, not os.getppid() now: the parent may already be gone
    parent = int(os.environ.get("MLPILOT_PARENT_PID") or os.getppid())
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if os.getppid() != parent:
            raise TrackingError(
                "mlpilot ended before it created this pipeline's MLflow run",
                hint="see the mlpilot command's output for the reason",
            )
        if time.monotonic() > deadline:
            raise TrackingError(
                f"no MLflow run was handed over within {timeout_s:.0f} s",
                hint="check that the tracking server answers (mlpilot doctor)",
            )
        time.sleep(0.02)
    return path.read_text(encoding="utf-8").strip()


def _open_logger(args: argparse.Namespace, plan: dict[str, Any]) -> tuple[Any, bool]:
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.mlflow_store import ensure_experiment, make_client, mlpilot_version
    from mlpilot.tracking.run_logger import MlflowRunLogger

    settings = get_settings()
    run_id = os.environ.get("MLFLOW_RUN_ID")
    handed_over = os.environ.get("MLPILOT_RUN_ID_FILE")
    if handed_over:
        # before opening the store: on a new home the parent is still creating its tables
        run_id = await_run_id(Path(handed_over))
        os.environ["MLFLOW_RUN_ID"] = run_id  # for plugin code on MLflow's fluent API
    client = make_client(settings)
    if run_id:
        return MlflowRunLogger(client, run_id), False
    experiment_id = ensure_experiment(
        client, args.experiment or settings.experiment, settings.artifact_root
    )
    run = client.create_run(
        experiment_id,
        tags={
            vocab.TAG_KIND: vocab.KIND_PIPELINE,
            vocab.TAG_SOURCE: "pipeline.py",
            vocab.TAG_VERSION: mlpilot_version(),
        },
    )
    logger = MlflowRunLogger(client, run.info.run_id, experiment_id)
    logger.log_dict(plan, "plan.json")
    return logger, True
