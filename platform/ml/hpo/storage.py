"""Optuna storage: open it, describe it safely, and keep it clean after crashes.

The default is a journal file under ``$MLPILOT_HOME`` (several processes on one machine,
or many on a shared file system); an RDB URL serves many machines. A trial whose process
dies stays RUNNING unless someone marks it FAIL:

- RDB storage records heartbeats; Optuna fails trials whose heartbeat is older than the
  grace period at the start of every trial (``fail_stale_trials``), and so does
  :func:`recover` when a study is opened.
- The journal has no heartbeats. Every trial records its owner (host, pid and process start
  time) when it starts; :func:`reap_dead_trials` marks RUNNING trials whose owner is a dead
  process on this host as FAIL. Trials owned by another host are left to that host.
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

HEARTBEAT_INTERVAL_S = 10
#: a trial whose heartbeat is older than this is failed (3 missed beats)
GRACE_PERIOD_S = 30
SQLITE_BUSY_TIMEOUT_S = 60
OWNER_ATTR = vocab.ATTR_WORKER
FAIL_REASON_ATTR = vocab.ATTR_FAIL_REASON


def is_rdb(url_or_path: str) -> bool:
    return "://" in url_or_path


def open_storage(
    url_or_path: str,
    *,
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S,
    grace_period: int | None = None,
) -> Any:
    """Optuna storage from an RDB URL (with heartbeats) or a journal file path.

    A contained pipeline given the parent's storage proxy (``proxy.proxy_fd``) gets the
    proxy instead, whatever ``url_or_path`` says: it has no access to the storage itself.
    """
    import optuna
    from optuna.storages.journal import JournalFileBackend

    from mlpilot.platform.ml.hpo import proxy

    fd = proxy.proxy_fd()
    if fd is not None:
        return proxy.open_proxy(fd)
    if is_rdb(url_or_path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                url_or_path,
                engine_kwargs=_engine_kwargs(url_or_path),
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period or GRACE_PERIOD_S,
            )
    path = Path(url_or_path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def _engine_kwargs(url: str) -> dict[str, Any] | None:
    # several local workers share one sqlite file: wait for a writer rather than fail
    # with "database is locked" after sqlite3's default five seconds
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return None


def redact(url_or_path: str) -> str:
    """The storage as it may be recorded: an RDB URL without its password."""
    if not is_rdb(url_or_path):
        return str(Path(url_or_path).expanduser())
    parts = urlsplit(url_or_path)
    if parts.password is None:
        return url_or_path
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


# -- owners -------------------------------------------------------------------------------------
def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a Linux process; None where /proc has no entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: fields start after the last ")"
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[19])


_OWNER: dict[int, dict[str, Any]] = {}


def owner_record() -> dict[str, Any]:
    """Who runs trials in this process: host, pid and (on Linux) the process start time.

    Behind the storage proxy the owner is the parent that serves it (it records what the
    pipeline claims, and the pipeline dies with it: a reaper that finds it dead is right).
    """
    from mlpilot.platform.ml.hpo import proxy

    fd = proxy.proxy_fd()
    if fd is not None:
        return proxy.open_proxy(fd).owner
    pid = os.getpid()  # looked up per pid: a forked worker is a different owner
    if pid not in _OWNER:
        stat = _proc_stat(pid)
        _OWNER[pid] = {"host": socket.gethostname(), "pid": pid, "start": stat[1] if stat else None}
        if _pid_namespace():  # a contained pipeline's pid means something in its own only
            _OWNER[pid]["pidns"] = _pid_namespace()
    return dict(_OWNER[pid])


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def claim(trial: optuna.Trial) -> None:
    """Record this process as the trial's owner, so a reaper can tell when it died."""
    trial.set_user_attr(OWNER_ATTR, owner_record())


def process_alive(pid: int, start: int | None = None) -> bool:
    """Whether ``pid`` on this host is the live process that recorded ``start``."""
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        # a zombie has finished running; a different start time means the pid was reused
        return state not in ("Z", "X") and (start is None or started == start)
    if Path("/proc/self/stat").exists():
        return False  # Linux, and no /proc entry: gone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_trials(study: optuna.Study) -> list[int]:
    """Mark RUNNING trials whose owner process died on this host as FAIL; their numbers."""
    import optuna

    host, me = socket.gethostname(), os.getpid()
    reaped = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        owner = trial.user_attrs.get(OWNER_ATTR)
        if not isinstance(owner, dict) or owner.get("host") != host:
            continue
        if owner.get("pidns", _pid_namespace()) != _pid_namespace():
            continue  # another run's PID namespace: its pids cannot be looked up from here
        pid = int(owner.get("pid", 0))
        if pid == me or process_alive(pid, owner.get("start")):
            continue
        if _fail(study, trial, f"worker pid {pid} on {host} died while the trial ran"):
            reaped.append(trial.number)
    return reaped


def fail_stale(study: optuna.Study) -> list[int]:
    """Fail trials whose heartbeat went stale (RDB storage only); their numbers."""
    import optuna

    running_state = optuna.trial.TrialState.RUNNING
    running = {t.number for t in study.get_trials(deepcopy=False, states=(running_state,))}
    if not running:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    failed = optuna.trial.TrialState.FAIL
    return sorted(
        t.number for t in study.get_trials(deepcopy=False, states=(failed,)) if t.number in running
    )


def recover(study: optuna.Study) -> list[int]:
    """Everything a process does before it joins a study: fail what dead processes left."""
    return sorted(set(reap_dead_trials(study)) | set(fail_stale(study)))


def _fail(study: optuna.Study, trial: optuna.trial.FrozenTrial, reason: str) -> bool:
    import optuna

    storage = study._storage  # the public tell() cannot attach the reason
    try:
        storage.set_trial_user_attr(trial._trial_id, FAIL_REASON_ATTR, reason)
        return storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError):
        return False  # finished meanwhile, or another reaper was first


def describe_failure(trial: optuna.trial.FrozenTrial) -> str | None:
    return trial.user_attrs.get(FAIL_REASON_ATTR)


__all__ = [
    "GRACE_PERIOD_S",
    "HEARTBEAT_INTERVAL_S",
    "OWNER_ATTR",
    "claim",
    "describe_failure",
    "fail_stale",
    "is_rdb",
    "open_storage",
    "owner_record",
    "process_alive",
    "reap_dead_trials",
    "recover",
    "redact",
]
