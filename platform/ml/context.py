"""``PipelineRun``: one pipeline's data, model, logger and progress, from start to result.

The run owns two typed parts that steps read and write — ``data`` (``state.DataState``)
and ``model`` (``state.ModelState``) — and what the parent sees through the protocol
(``protocol``): an event per stage in ``events.jsonl`` and a ``PipelineResult`` in
``result.json`` at the end, whether the pipeline succeeded or failed. How a script gets
its run (command line, environment, MLflow) is ``entry``'s business.
"""

from __future__ import annotations

import logging
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import ExecutionError, MlpilotError, describe_error
from mlpilot.platform.ml import modeling, protocol
from mlpilot.platform.ml.deferred_logger import DeferredRunLogger
from mlpilot.platform.ml.device_errors import is_device_error
from mlpilot.platform.ml.devices import (
    StageDevices,
    accelerator_status,
    observe_model,
    process_engine,
)
from mlpilot.platform.ml.protocol import DEVICE_GPU, PipelineEvent, PipelineResult
from mlpilot.platform.ml.state import DataState, ModelState
from mlpilot.tracking.vocab import RunState

logger = logging.getLogger(__name__)
Finisher = Callable[["PipelineRun"], None]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def peak_memory_mb() -> float:
    # ru_maxrss is in kilobytes on Linux and bytes on macOS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def release_stage_memory(engine: str) -> None:
    """The clean-up between stages, the same on both engines (a comparison stays fair).

    Dropped frames and models go back to their allocators: pandas/numpy to malloc; on the
    GPU, cuDF and cuML allocate through RMM's pool, which keeps its reservation by design
    (the blocks are reused by the next stage, not returned to the device), and CuPy's own
    pools are emptied in case CuPy was not routed through RMM.
    """
    import gc

    gc.collect()
    if engine != DEVICE_GPU:
        return
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    except Exception as exc:  # no CuPy, or no device: nothing cached to free
        logger.debug("no CuPy pool emptied: %s", exc)


def check_engine(engine: str) -> dict[str, Any]:
    """The accelerators active in this process, checked against the engine it claims.

    The GPU engine must run with both cudf.pandas and cuml.accel active; the CPU engine with
    neither (cuml.accel ≥ 25.10 turns itself on in any Python that inherits
    ``CUML_ACCEL_ENABLED``, which would make a CPU leg silently accelerated).
    """
    if engine == DEVICE_GPU:
        status = accelerator_status()
        missing = [name for name in ("cudf.pandas", "cuml.accel") if not status.get(name)]
        if missing:
            raise ExecutionError(
                f"the GPU engine runs without {' and '.join(missing)} active",
                hint="run it as python -m cudf.pandas -m cuml.accel pipeline.py, "
                "with the gpu extra installed (mlpilot doctor)",
            )
        return status
    active = {
        "cudf.pandas": bool(getattr(sys.modules.get("cudf.pandas"), "LOADED", False)),
        "cuml.accel": process_engine() == DEVICE_GPU,
    }
    if any(active.values()):
        on = ", ".join(name for name, value in active.items() if value)
        raise ExecutionError(
            f"the CPU engine runs with {on} active",
            hint="unset CUML_ACCEL_ENABLED for CPU runs, or use --engine gpu",
        )
    return active


def _resource_message(exc: BaseException) -> str:
    """One line for running into a limit of the contained process (DESIGN §8)."""
    import errno

    if is_device_error(type(exc).__name__, str(exc)):
        return ""  # RMM's MemoryError is the device's memory: its own text says which
    if isinstance(exc, MemoryError):
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        limit = f" of {soft // 2**20} MiB" if soft != resource.RLIM_INFINITY else ""
        return (
            f"the pipeline ran out of memory: it may use an address space{limit} "
            "(MLPILOT_MEMORY_BUDGET_MB plus headroom for libraries)"
        )
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        limit = f"{soft // 2**20} MiB" if soft != resource.RLIM_INFINITY else "its"
        return f"a file the pipeline wrote passed the {limit} limit (MLPILOT_MAX_FILE_MB)"
    # EAGAIN is a refused fork or thread when a process limit is set
    nproc, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN and nproc != resource.RLIM_INFINITY:
        return (
            "the pipeline could not start another process or thread: its account may run "
            f"{nproc} at once (MLPILOT_MAX_PROCESSES)"
        )
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"the disk is full: {exc.filename or 'a file'} could not be written"
    return ""


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
        pending_logger: DeferredRunLogger | None = None,
        runtime: dict[str, dict[str, str]] | None = None,
        handed_run_id: str | None = None,
        launched_at: float | None = None,
        started_at: float | None = None,
        prefer: str | None = None,
    ) -> None:
        self.plan = plan
        self.seed = seed
        self.data_path = data_path
        self.run_dir = run_dir
        self.engine = engine
        #: whose defaults models take: "gpu" prefers what cuML accelerates (``modeling``)
        self.prefer = prefer or engine
        #: tool → {"function": "module:function", "stage": …}, as codegen rendered them
        self.runtime = dict(runtime or {})
        self._logger = logger
        self._pending_logger = pending_logger
        self._handed_run_id = handed_run_id
        self.data = DataState()
        self.model = ModelState()
        self.result = PipelineResult(status="", engine=engine, seed=seed)
        self.n_jobs = -1  # threads for estimators: settled by the data's size (steps)
        self.exit_code = 0
        #: shown each event as it is written: a script run by hand, with no parent to show them
        self.echo: Callable[[PipelineEvent], None] | None = None
        self.current_stage: str | None = None
        self.failed_stage: str | None = None
        self._finishers: list[Finisher] = []
        self._started = time.perf_counter()
        if launched_at is not None:  # interpreter, imports, CUDA context and pool start-up
            self.result.startup_s = round(max(time.time() - launched_at, 0.0), 4)
        #: wall clock when the request began (a standalone script: when it was launched)
        self.started_at = started_at or launched_at or time.time()
        #: wall-clock time by which the whole run must have ended: set by a step given a
        #: time budget (``optimize_model(timeout_s=…)``); the steps after it fit within it
        self.deadline: float | None = None
        #: what a time-budgeted search leaves for the ensemble (``ensemble.SearchOutput``)
        self.search: Any = None
        #: where each stage really ran (measured under the GPU engine)
        self.devices = StageDevices(engine)
        self._startup_error: MlpilotError | None = None

    # the result's own dicts: one place for what is reported
    @property
    def metrics(self) -> dict[str, float]:
        return self.result.metrics

    @property
    def timings(self) -> dict[str, float]:
        return self.result.timings

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    # -- tracking ------------------------------------------------------------------------
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

    @logger.setter
    def logger(self, value: Any) -> None:
        self._logger, self._pending_logger = value, None

    def opened_logger(self) -> Any:
        """The logger once MLflow is open (waits for the opening thread).

        Code that imports MLflow itself calls this first: importing MLflow on two threads
        at once can fail inside MLflow's circular imports ("cannot import name …").
        """
        current = self.logger
        return current.resolve() if isinstance(current, DeferredRunLogger) else current

    @property
    def owns_run(self) -> bool:
        """Whether this process created its MLflow run (and so ends it)."""
        pending = self._pending_logger
        return bool(pending is not None and pending.owns_run)

    def open_tracking(self) -> None:
        """Start opening MLflow in the background: a model is about to fit."""
        if self._pending_logger is not None:
            self._pending_logger.start()

    # -- models --------------------------------------------------------------------------
    def build_pipeline(self, family: str, params: dict[str, Any] | None = None) -> Any:
        """The whole model for ``family`` on this run's data (``modeling.build_pipeline``)."""
        pipeline = modeling.build_pipeline(
            self.data,
            family,
            params,
            seed=self.seed,
            engine=self.engine,
            n_jobs=self.n_jobs,
            prefer=self.prefer,
        )
        observe_model(pipeline)
        return pipeline

    def on_finish(self, finisher: Finisher) -> None:
        """Call ``finisher(run)`` once when the pipeline ends well (e.g. log the model)."""
        if finisher not in self._finishers:
            self._finishers.append(finisher)

    def time_left(self) -> float | None:
        """Seconds until the run's deadline (None: no time budget)."""
        return None if self.deadline is None else self.deadline - time.time()

    # -- progress ------------------------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> None:
        record = PipelineEvent(type=kind, at=_now(), **fields)
        with (self.run_dir / protocol.EVENTS_FILE).open("a", encoding="utf-8") as fh:
            fh.write(record.to_json() + "\n")
        if self.echo is not None:
            self.echo(record)

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
        self.devices.stage_started(name)
        start = time.perf_counter()
        failed = False
        try:
            if self._startup_error is not None:
                raise self._startup_error  # the engine is not what it claims: nothing runs
            yield
        except BaseException:
            failed = True
            self.failed_stage = self.failed_stage or name  # the innermost stage that raised
            raise
        finally:
            elapsed = time.perf_counter() - start
            self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 4)
            self.result.stage_memory_mb[name] = peak_memory_mb()
            record = self.devices.stage_ended(name, self.timings[name])
            self.result.devices[name] = record
            release_stage_memory(self.engine)
            self.event(
                "stage_end",
                stage=name,
                seconds=round(elapsed, 4),
                device=record["device"],
                failed=True if failed else None,
            )
            self.current_stage = None

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> PipelineRun:
        self.event("pipeline_start", engine=self.engine, seed=self.seed, run_id=self._handed_run_id)
        try:
            self.result.accelerators = check_engine(self.engine)
        except MlpilotError as exc:  # reported by the first stage, so the run records it
            self._startup_error = exc
        self.devices.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None and self._startup_error is not None:
            exc, tb = self._startup_error, None
        try:
            if exc is None:
                self._finish()  # the finishers' stages (refit, log_model) are measured too
        except BaseException as finish_exc:
            logger.debug(
                "finishing the pipeline failed; it is recorded as its error: %s", finish_exc
            )
            exc, tb = finish_exc, finish_exc.__traceback__
        finally:
            self.devices.stop()
        if exc is not None:
            self._fail(exc, tb)
        self._write_result(protocol.SUCCEEDED if exc is None else protocol.FAILED)
        if self.owns_run:
            final = RunState.SUCCEEDED if exc is None else RunState.FAILED
            self.logger.end(final.mlflow_status)
        return exc is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit))

    def _finish(self) -> None:
        for finisher in self._finishers:
            finisher(self)
        self.timings["total"] = round(time.perf_counter() - self._started, 4)
        self.result.peak_memory_mb = peak_memory_mb()
        final = {f"time_{k}_s": v for k, v in self.timings.items()}
        final["peak_memory_mb"] = self.result.peak_memory_mb
        self.log_metrics(final)
        if self._pending_logger is not None and self._logger is self._pending_logger:
            self._pending_logger.resolve()  # an MLflow that cannot be opened fails the run
        self.event("pipeline_end", seconds=self.timings["total"])

    def _fail(self, exc: BaseException, tb: Any) -> None:
        self.exit_code = 1
        if isinstance(exc, MlpilotError):
            message = exc.one_line()
        elif _resource_message(exc):
            message = _resource_message(exc)
        else:
            message = " ".join(str(exc).split()) or type(exc).__name__
            traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
        stage = self.failed_stage or self.current_stage
        error = {"type": type(exc).__name__, "message": message, "stage": stage}
        self.result.error = error
        self.timings.setdefault("total", round(time.perf_counter() - self._started, 4))
        self.event("pipeline_failed", stage=stage, message=describe_error(error))
        print(f"error: {describe_error(error)}", file=sys.stderr)

    def _write_result(self, status: str) -> None:
        result = self.result
        try:
            result.run_id = self.logger.run_id
        except Exception as exc:  # MLflow could not be opened: the result still gets written
            logger.warning("no MLflow run id for the result: %s", exc)
            self.notes.append(f"MLflow could not be opened: {exc}")
        pending = self._pending_logger
        for skipped in pending.skipped if pending is not None else []:
            self.notes.append(f"not recorded in MLflow: {skipped}")
        result.status = status
        result.task, result.target = self.data.task, self.data.target
        model = self.model
        result.model_family, result.main_metric, result.model_uri = (
            model.family,
            model.main_metric,
            model.uri,
        )
        result.write(self.run_dir)
