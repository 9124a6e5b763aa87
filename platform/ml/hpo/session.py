"""One process's share of a study: open it, clean up after dead workers, run trials.

Trials run here (``run_local``) or on a Dask cluster (``run_on_dask``), as ``run_trials``
chooses; either way every
trial goes through the same objective and the same ``StudyMonitor`` rules, and the study's
budget is shared by everyone working on it.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml.hpo.boosting import BOOST_REPORT_EVERY

if TYPE_CHECKING:
    import optuna

    from mlpilot.platform.ml.hpo.monitor import StudyMonitor

#: a trial that raises fails alone (a configuration the data cannot take, a library's own
#: error class); a study whose trials keep failing is stopped by the monitor instead
TRIAL_ERRORS: tuple[type[Exception], ...] = (Exception,)
#: trials before the pruner judges anyone, and boosting rounds before it looks at them
PRUNER_STARTUP_TRIALS = 5
PRUNER_WARMUP_STEPS = 2 * BOOST_REPORT_EVERY - 1


def make_sampler(model: str, seed: int | None) -> optuna.samplers.BaseSampler:
    """Multivariate TPE; grouped when model=auto (each family has its own parameters);
    the constant liar keeps parallel workers from sampling the same point."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, group=model == "auto", constant_liar=True
        )


def make_pruner(pruning: bool) -> optuna.pruners.BasePruner:
    import optuna

    if not pruning:
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(
        n_startup_trials=PRUNER_STARTUP_TRIALS, n_warmup_steps=PRUNER_WARMUP_STEPS
    )


def quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@dataclass
class SessionResult:
    ran: int = 0
    reaped: list[int] = field(default_factory=list)
    stop_reason: str | None = None


def remaining(study: optuna.Study, budget: int | None) -> int | None:
    """Trials left in the study's budget (running ones count as taken); None = no budget."""
    if budget is None:
        return None
    used = sum(t.state.name != "WAITING" for t in study.get_trials(deepcopy=False))
    return max(0, budget - used)


def run_trials(
    study: optuna.Study,
    objective: Any,
    monitor: StudyMonitor,
    *,
    n_trials: int | None,
    timeout_s: float | None,
    storage_url: str,
    backend: Any,
    dask_client: Any = None,
) -> SessionResult:
    """Run trials here, or on the Dask cluster of ``dask_client`` when one is given
    (``backend``: the storage opened from ``storage_url``)."""
    if dask_client is None:
        return run_local(study, objective, monitor, n_trials=n_trials, timeout_s=timeout_s)
    from mlpilot.platform.ml.hpo.storage import is_rdb

    return run_on_dask(
        study,
        objective,
        monitor,
        client=dask_client,
        # DaskStorage rebuilds an RDB storage from its URL; a journal travels as is
        storage=storage_url if is_rdb(storage_url) else backend,
        n_trials=n_trials,
        timeout_s=timeout_s,
    )


def run_local(
    study: optuna.Study,
    objective: Any,
    monitor: StudyMonitor,
    *,
    n_trials: int | None,
    timeout_s: float | None,
) -> SessionResult:
    """Run up to ``n_trials`` trials in this process (None = until stopped or timed out)."""
    from mlpilot.platform.ml.hpo.storage import recover

    result = SessionResult(reaped=recover(study))
    monitor.start(study)
    before = _count_mine(study)
    if n_trials is None or n_trials > 0:
        study.optimize(
            objective,
            n_trials=n_trials,
            timeout=timeout_s,
            callbacks=[monitor],
            catch=TRIAL_ERRORS,
            gc_after_trial=False,
        )
    result.ran = _count_mine(study) - before
    result.stop_reason = _why(monitor, result.ran, n_trials, timeout_s)
    return result


def _why(monitor: StudyMonitor, ran: int, n_trials: int | None, timeout_s: float | None) -> str:
    """What ended the session: the monitor's reason, else its trial count, else the clock."""
    if monitor.stop_reason:
        return monitor.stop_reason
    if timeout_s is not None and (n_trials is None or ran < n_trials):
        return "timeout"
    return "trials"


def _count_mine(study: optuna.Study) -> int:
    from mlpilot.platform.ml.hpo.storage import OWNER_ATTR, owner_record

    me = owner_record()

    def mine(trial: optuna.trial.FrozenTrial) -> bool:
        owner = trial.user_attrs.get(OWNER_ATTR) or {}
        same = ("pid", "host", "pidns")  # every contained pipeline is pid 2 of its namespace
        return all(owner.get(key) == me.get(key) for key in same)

    return sum(t.state.is_finished() and mine(t) for t in study.get_trials(deepcopy=False))


# -- Dask --------------------------------------------------------------------------------------
def run_on_dask(
    study: optuna.Study,
    objective: Any,
    monitor: StudyMonitor,
    *,
    client: Any,
    storage: Any,
    n_trials: int | None,
    timeout_s: float | None,
    poll_s: float = 1.0,
) -> SessionResult:
    """Run trials on the Dask cluster of ``client``: one task per Dask worker.

    The study's storage moves behind optuna-integration's ``DaskStorage`` (it lives on the
    scheduler, and workers reach it through Dask); this process watches the real storage and
    reports (logs, emits) every trial that finishes.
    """
    from optuna_integration import DaskStorage

    from mlpilot.platform.ml.hpo.storage import recover

    result = SessionResult(reaped=recover(study))
    monitor.start(study)
    started = {t.number for t in study.get_trials(deepcopy=False)}
    client.run(quiet_optuna)  # before the workers unpickle the (experimental) DaskStorage
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DaskStorage is marked experimental
        shared = DaskStorage(storage=storage, client=client)
    import optuna

    remote = optuna.load_study(
        study_name=study.study_name, storage=shared, sampler=study.sampler, pruner=study.pruner
    )
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    shares = _split(n_trials, workers)
    futures = [
        client.submit(
            _dask_task, remote, objective, monitor.worker_copy(), share, timeout_s, pure=False
        )
        for share in shares
        if share is None or share > 0
    ]
    try:
        while not all(f.done() for f in futures):
            time.sleep(poll_s)
            monitor.poll(study)
    finally:
        monitor.poll(study)
    client.gather(futures)  # raises what a task raised
    result.ran = sum(
        t.state.is_finished() for t in study.get_trials(deepcopy=False) if t.number not in started
    )
    result.stop_reason = _why(monitor, result.ran, n_trials, timeout_s)
    return result


def _split(n_trials: int | None, parts: int) -> list[int | None]:
    if n_trials is None:
        return [None] * parts
    return [n_trials // parts + (1 if i < n_trials % parts else 0) for i in range(parts)]


def _dask_task(
    study: optuna.Study,
    objective: Any,
    monitor: StudyMonitor,
    n_trials: int | None,
    timeout_s: float | None,
) -> None:
    """Runs on a Dask worker: this worker's share of the trials."""
    quiet_optuna()
    study.sampler.reseed_rng()  # every worker got the same pickled sampler
    monitor.start(study)
    study.optimize(
        objective,
        n_trials=n_trials,
        timeout=timeout_s,
        callbacks=[monitor],
        catch=TRIAL_ERRORS,
        gc_after_trial=False,
    )
