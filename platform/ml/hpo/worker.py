"""``mlpilot worker``: join a study in shared storage and run its trials.

The study carries its recipe (``StudySpec``): the worker replays the data preparation through
the runtime library, rebuilds the same objective, and runs trials until the study's budget is
used, early stopping ends it, ``--trials`` of its own are done, or the time is up. Trial
numbers come from the storage, so workers never share one. Trials are logged as nested runs
of the study's MLflow parent run when that tracking server is reachable, else only to Optuna.
In a time-budgeted study a worker stores its best trials' out-of-fold output in the study
(``oof_store``), so they can join the parent's ensemble.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.hpo import summary as S
from mlpilot.platform.ml.hpo.early_stopping import EarlyStopping
from mlpilot.platform.ml.hpo.monitor import EARLY_STOP_ATTR, StudyMonitor
from mlpilot.platform.ml.hpo.objective import CVObjective
from mlpilot.platform.ml.hpo.session import (
    make_pruner,
    make_sampler,
    quiet_optuna,
    remaining,
    run_trials,
)
from mlpilot.platform.ml.hpo.spec import SPEC_ATTR, StudySpec, check_recipe, rebuild_run
from mlpilot.platform.ml.hpo.storage import open_storage, recover, redact
from mlpilot.platform.ml.hpo.trial_log import TrialLogger

logger = logging.getLogger(__name__)

#: the module each dask-cuda worker runs at start (its ``dask_setup`` turns cuml.accel on)
GPU_PRELOAD = "mlpilot.platform.ml.hpo.dask_gpu"


@dataclass
class WorkerReport:
    study: str
    storage: str
    ran: int = 0
    reaped: list[int] = field(default_factory=list)
    stop_reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    mlflow_run_id: str | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "storage": self.storage,
            "ran": self.ran,
            "reaped": self.reaped,
            "stop_reason": self.stop_reason,
            "mlflow_run_id": self.mlflow_run_id,
            "summary": self.summary,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }


#: the recipe's job for the contained trial loop, written by the worker into the child's folder
JOB_FILE = "worker-job.json"
#: what the contained trial loop reports back (read without following links, size-capped)
REPORT_FILE = "worker-report.json"
STOP_REASONS = ("budget", "early_stopping", "trials", "timeout", "failures", "exhausted")

#: runs one contained trial loop: (job, data path, engine, events) → (child report, trial ids)
Launch = Callable[[dict[str, Any], str | None, str, Any], tuple[dict[str, Any], list[int]]]


def run_worker(
    study_name: str,
    *,
    storage: str | None = None,
    trials: int | None = None,
    timeout_s: float | None = None,
    data_path: str | None = None,
    engine: str | None = None,
    dask: str | None = None,
    track: bool = True,
    on_event: Callable[[Any], None] | None = None,
    allowed: frozenset[str] = frozenset(),
    launch: Launch | None = None,
) -> WorkerReport:
    """Join ``study_name`` and run trials; ``trials`` = this worker's own count (None: until
    the study's budget is used or early stopping ends it).

    The recipe is checked first (``spec.check_recipe``: only built-in steps and the
    ``allowed`` plugin functions). ``launch`` runs the trial loop in a contained child that
    reaches the study through the storage proxy; this trusted process then logs its trials
    to MLflow. Without it (and always on Dask) the trials run in this process.
    """
    import optuna

    from mlpilot.platform.config import get_settings

    quiet_optuna()
    started = time.perf_counter()
    settings = get_settings()
    storage_url = storage or settings.optuna_storage
    backend = open_storage(storage_url)
    report = WorkerReport(study=study_name, storage=redact(storage_url))
    probe = _load(study_name, storage_url, backend)
    spec = _checked_spec(probe, allowed)
    check_worker_engine(spec, engine, here=launch is None or dask is not None)
    budget = spec.n_trials if trials is None else None
    timeout_s = timeout_s if timeout_s is not None else (spec.timeout_s if trials is None else None)
    if trials is None and _already_done(report, probe, budget):
        return _finish(report, probe, spec, None)
    n_trials = trials if trials is not None else remaining(probe, budget)
    total = budget or (_finished(probe) + trials if trials else None)
    parent = _parent_logger(spec, settings, track, report)
    if launch is not None and dask is None:
        job = {
            "study": study_name,
            "allowed": sorted(allowed),
            "budget": budget,
            "n_trials": n_trials,
            "timeout_s": timeout_s,
            "total": total,
        }
        # the contained loop sees only its own PID namespace: dead workers' trials are
        # reaped here, where their owners' pids mean something
        reaped = recover(probe)
        child, trial_ids = launch(job, data_path or spec.data_path, spec.engine, on_event)
        _take_child_report(report, child, trial_ids)
        report.reaped = sorted(set(reaped) | set(report.reaped))
        _log_trials(parent, study_name, backend, trial_ids)
    else:
        if dask is not None:
            report.notes.append(
                "Dask trials run uncontained, in this worker's Dask processes "
                "(the recipe was checked: only registered steps)"
            )
        _run_here(report, study_name, backend, storage_url, spec, parent, budget, n_trials,
                  timeout_s, data_path, engine, dask, on_event)  # fmt: skip
    report.seconds = time.perf_counter() - started
    study = optuna.load_study(study_name=study_name, storage=backend)
    return _finish(report, study, spec, parent)


def _already_done(report: WorkerReport, study: Any, budget: int | None) -> bool:
    """Whether a worker without its own --trials has nothing left to do (and why)."""
    if study.user_attrs.get(EARLY_STOP_ATTR):
        report.stop_reason = "early_stopping"
        report.notes.append("the study was stopped early already: pass --trials N to continue it")
        return True
    if remaining(study, budget) == 0:
        report.stop_reason = "budget"
        report.notes.append(
            f"the study's budget of {budget} trials is used: pass --trials N to add more"
        )
        return True
    return False


def _load(study_name: str, storage_url: str, backend: Any) -> Any:
    import optuna

    try:
        return optuna.load_study(study_name=study_name, storage=backend)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(backend)][-10:]
        raise MlpilotError(
            f"no study named {study_name!r} in {redact(storage_url)}",
            hint=f"studies there: {', '.join(names) or 'none'}; set --storage or MLPILOT_OPTUNA_STORAGE",
        ) from None


def _checked_spec(study: Any, allowed: frozenset[str]) -> StudySpec:
    """The study's recipe, when it calls only registered steps (nothing imported before)."""
    if not isinstance(study.user_attrs.get(SPEC_ATTR), dict):
        return StudySpec.of_study(study)  # raises: not an mlpilot study
    return check_recipe(study.user_attrs[SPEC_ATTR], allowed)


def _take_child_report(report: WorkerReport, child: dict[str, Any], trial_ids: list[int]) -> None:
    """What the contained loop says, where it can be checked: the trial count is the
    proxy's (the trials it created), the rest is typed before it is used."""
    report.ran = len(trial_ids)
    reaped = child.get("reaped")
    if isinstance(reaped, list):
        report.reaped = [int(n) for n in reaped if isinstance(n, int)]
    reason = child.get("stop_reason")
    report.stop_reason = reason if reason in STOP_REASONS else None
    notes = child.get("notes")
    if isinstance(notes, list):
        report.notes.extend(str(n)[:500] for n in notes[:20])


def _log_trials(parent: Any, study_name: str, backend: Any, trial_ids: list[int]) -> None:
    """The contained loop's finished trials as nested runs of the study's parent run."""
    if parent is None or not trial_ids:
        return
    trial_logger = TrialLogger.for_parent(parent, study_name)
    if trial_logger is None:
        return
    try:
        for trial_id in sorted(trial_ids):
            trial = backend.get_trial(trial_id)
            if trial.state.is_finished():
                trial_logger.add(trial)
    finally:
        trial_logger.close()


def _run_here(
    report: WorkerReport,
    study_name: str,
    backend: Any,
    storage_url: str,
    spec: StudySpec,
    parent: Any,
    budget: int | None,
    n_trials: int | None,
    timeout_s: float | None,
    data_path: str | None,
    engine: str | None,
    dask: str | None,
    on_event: Callable[[Any], None] | None,
) -> None:
    """The trial loop in this process (on Dask, or where no launcher is given)."""
    trial_logger = TrialLogger.for_parent(parent, study_name) if parent is not None else None
    try:
        with tempfile.TemporaryDirectory(prefix="mlpilot-worker-") as tmp:
            emit = _trial_events(on_event) if on_event else None
            session = trial_loop(
                study_name, backend, storage_url, spec, Path(tmp), data_path, engine,
                budget=budget, n_trials=n_trials, timeout_s=timeout_s, logger=trial_logger,
                emit=emit, dask=dask, report=report,
            )  # fmt: skip
    finally:
        if trial_logger is not None:
            trial_logger.close()
    report.ran, report.reaped, report.stop_reason = session.ran, session.reaped, session.stop_reason


def _trial_events(on_event: Callable[[Any], None]) -> Callable[[dict[str, Any]], None]:
    """Trial fields as the ``trial`` events every progress display takes (never bare dicts)."""
    from datetime import datetime, timezone

    from mlpilot.platform.ml.protocol import PipelineEvent

    def emit(fields: dict[str, Any]) -> None:
        at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        known = {k: v for k, v in fields.items() if k in PipelineEvent.__dataclass_fields__}
        on_event(PipelineEvent(type="trial", at=at, **known))

    return emit


def trial_loop(
    study_name: str,
    backend: Any,
    storage_url: str,
    spec: StudySpec,
    run_dir: Path,
    data_path: str | None,
    engine: str | None,
    *,
    budget: int | None,
    n_trials: int | None,
    timeout_s: float | None,
    logger: TrialLogger | None = None,
    emit: Callable[[dict[str, Any]], None] | None = None,
    dask: str | None = None,
    report: WorkerReport | None = None,
    total: int | None = None,
) -> Any:
    """Rebuild the study's objective from its (checked) recipe and run its trials."""
    import optuna

    # a fresh seed: workers that shared the study's seed would all sample the same points
    study = optuna.load_study(
        study_name=study_name,
        storage=backend,
        sampler=make_sampler(spec.model, None),
        pruner=make_pruner(spec.pruning),
    )
    run = rebuild_run(spec, run_dir=run_dir, data_path=data_path, engine=engine)
    if report is not None:
        report.notes.extend(run.notes)
    objective = CVObjective(
        run,
        model=spec.model,
        metric=spec.metric,
        folds=spec.cv_folds,
        pruning=spec.pruning,
        # a time-budgeted study ends in the parent's ensemble: its good trials' output
        # reaches the parent through the study's storage
        share_oof=spec.timeout_s is not None,
    )
    if total is None:
        total = budget or (_finished(study) + n_trials if n_trials else None)
    monitor = StudyMonitor(
        metric=spec.metric,
        budget=budget,
        stopper=_stopper(spec),
        logger=logger,
        emit=emit,
        total=total,
    )
    client = _dask_client(dask, spec.engine, report) if dask else None
    try:
        return run_trials(
            study,
            objective,
            monitor,
            n_trials=n_trials,
            timeout_s=timeout_s,
            storage_url=storage_url,
            backend=backend,
            dask_client=client,
        )
    finally:
        if client is not None:
            _close_dask(client)


def _stopper(spec: StudySpec) -> EarlyStopping | None:
    if not spec.early_stopping:
        return None
    return EarlyStopping(patience=spec.patience, min_delta=spec.min_delta, warmup=spec.warmup)


def child_main() -> int:
    """The contained trial loop (``worker.py`` in the child's folder runs this).

    It reaches the study only through the parent's storage proxy, checks the recipe again
    against the functions its job allows, and writes ``REPORT_FILE`` and ``result.json``.
    """
    import json

    import optuna

    from mlpilot.platform.ml import protocol

    quiet_optuna()
    here = Path.cwd()
    job = json.loads((here / JOB_FILE).read_text(encoding="utf-8"))
    backend = open_storage("proxy")  # the proxy: ENV_OPTUNA_FD is set by the worker
    try:
        probe = optuna.load_study(study_name=job["study"], storage=backend)
        spec = _checked_spec(probe, frozenset(job["allowed"]))
        check_worker_engine(spec, None)
        run_dir = here / "trials"
        session = trial_loop(
            job["study"], backend, "proxy", spec, run_dir,
            os.environ.get(protocol.ENV_DATA) or None, None,
            budget=job["budget"], n_trials=job["n_trials"], timeout_s=job["timeout_s"],
            total=job["total"], emit=_child_emit(here),
        )  # fmt: skip
    except MlpilotError as exc:
        protocol.PipelineResult(status=protocol.FAILED, error=exc.to_dict("tune")).write(here)
        return 1
    out = {"ran": session.ran, "reaped": session.reaped, "stop_reason": session.stop_reason}
    (here / REPORT_FILE).write_text(json.dumps(out), encoding="utf-8")
    protocol.PipelineResult(status=protocol.SUCCEEDED).write(here)
    return 0


def _child_emit(run_dir: Path) -> Callable[[dict[str, Any]], None]:
    from mlpilot.platform.ml.protocol import EVENTS_FILE

    def write(event: Any) -> None:
        with (run_dir / EVENTS_FILE).open("a", encoding="utf-8") as fh:
            fh.write(event.to_json() + "\n")

    return _trial_events(write)


def _finished(study: Any) -> int:
    return sum(t.state.is_finished() for t in study.get_trials(deepcopy=False))


def _finish(report: WorkerReport, study: Any, spec: StudySpec, parent: Any) -> WorkerReport:
    report.summary = S.study_summary(
        study,
        storage=report.storage,
        metric=spec.metric,
        model=spec.model,
        budget=spec.n_trials,
        stop_reason=report.stop_reason,
    )
    if parent is not None and report.ran:
        try:  # the parent run shows the study as it is now
            S.log_to_parent(parent, report.summary)
        except Exception as exc:
            logger.debug("could not update the study's MLflow parent run: %s", exc)
            report.notes.append(f"could not update the MLflow parent run: {exc}")
    return report


def _parent_logger(spec: StudySpec, settings: Any, track: bool, report: WorkerReport) -> Any | None:
    """The study's MLflow parent run, when tracking is on and reachable."""
    if not track or not spec.mlflow_run_id:
        return None
    # the tracking URI this machine is configured with wins; else the one the study recorded
    uri = (
        settings.tracking_uri
        if settings.tracking_uri_set
        else spec.tracking_uri or settings.tracking_uri
    )
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file():
        report.notes.append(f"MLflow store {uri} is not on this machine: trials go to Optuna only")
        return None
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    try:
        from mlflow import MlflowClient

        from mlpilot.tracking.run_logger import MlflowRunLogger

        client = MlflowClient(uri)
        run = client.get_run(spec.mlflow_run_id)
        report.mlflow_run_id = spec.mlflow_run_id
        return MlflowRunLogger(client, spec.mlflow_run_id, run.info.experiment_id)
    except Exception as exc:
        logger.debug("the study's MLflow run is not reachable; trials go to Optuna only: %s", exc)
        report.notes.append(
            f"MLflow run {spec.mlflow_run_id} not reachable at {redact(uri)} ({type(exc).__name__}): "
            "trials go to Optuna only"
        )
        return None


def study_engine(study_name: str, storage: str | None = None) -> str:
    """The engine a study's trials are scored on (what a worker must run with)."""
    import optuna

    from mlpilot.platform.config import get_settings

    quiet_optuna()
    backend = open_storage(storage or get_settings().optuna_storage)
    try:
        study = optuna.load_study(study_name=study_name, storage=backend)
    except KeyError:
        return "cpu"  # run_worker reports the missing study with the names it has
    return StudySpec.of_study(study).engine


def check_worker_engine(spec: StudySpec, engine: str | None, *, here: bool = True) -> None:
    """One study keeps one engine: a worker on another engine would mix its trials.

    ``here``: the trials run in this process, so it must run on that engine too (a
    contained trial loop is started with the study's engine command instead)."""
    from mlpilot.platform.ml.devices import process_engine

    if engine is not None and engine != spec.engine:
        raise MlpilotError(
            f"the study runs on the {spec.engine}; this worker was asked for --engine {engine}",
            hint=f"start it with --engine {spec.engine} (or none), or start a new study",
        )
    if not here:
        return
    here_engine = process_engine()
    if here_engine != spec.engine:
        raise MlpilotError(
            f"the study runs on the {spec.engine}, but this process runs on the {here_engine}",
            hint="mlpilot worker starts GPU studies under cudf.pandas and cuml.accel itself",
        )


def _dask_client(address: str, engine: str = "cpu", report: WorkerReport | None = None) -> Any:
    """A client of the scheduler at ``address``, or of a local cluster for ``local[:N]``:
    CPU workers, or for a GPU study one dask-cuda worker per GPU with cuml.accel on."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise MlpilotError(
            "--dask needs dask.distributed", hint="pip install 'mlpilot[dask]'"
        ) from None
    if not (address == "local" or address.startswith("local:")):
        return Client(address)
    wanted = int(address.partition(":")[2] or 0) or None
    if engine != "gpu":
        workers = wanted or os.cpu_count() or 2
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
        return Client(cluster)
    return Client(_gpu_cluster(wanted, report))


def _gpu_cluster(wanted: int | None, report: WorkerReport | None) -> Any:
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        raise MlpilotError(
            "--dask local:N for a GPU study needs dask-cuda", hint="pip install 'mlpilot[gpu-dask]'"
        ) from None
    from mlpilot.platform.ml.devices import cuda_driver_report

    gpus = cuda_driver_report().devices
    workers = min(wanted or gpus, gpus) or 1
    if report is not None and wanted and wanted > gpus:
        report.notes.append(f"local:{wanted} asked, {gpus} GPU(s) here: one worker per GPU")
    return LocalCUDACluster(
        n_workers=workers,
        threads_per_worker=1,
        dashboard_address=None,
        # each worker pins its own GPU (CUDA_VISIBLE_DEVICES) and turns cuml.accel on
        preload=[GPU_PRELOAD],
    )


def _close_dask(client: Any) -> None:
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()
