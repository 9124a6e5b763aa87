"""Tier-1 containment for generated pipelines (DESIGN §8).

The child gets its own process group, the run directory as working directory, an
environment allow-list (no LLM keys, no MongoDB credentials), resource limits (CPU time,
file size, open files, no core dumps), capped captured output, a wall-clock timeout that
kills the whole group, and a disk cap on what it writes (the run folder, and through the
``Watch`` its private /tmp and its files in the stores). As root the launcher's namespaces
make the group one process (the relay): killing it ends the whole tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mlpilot.tracking.runfolder import RunFolder

logger = logging.getLogger(__name__)

#: variables passed through from the parent environment when set
ENV_ALLOW = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_MAX_THREADS",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        # MLflow logging and its artifact stores
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_REGION",
        "AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_STORAGE_ACCESS_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "REQUESTS_CA_BUNDLE",
        "SSL_CERT_FILE",
    }
)
ENV_ALLOW_PREFIXES = (
    "LC_",
    "MLFLOW_",
    # the GPU stack's own settings: device choice, memory pools, kernel caches (no secrets)
    "CUDA_",
    "CUDF_",
    "CUML_",
    "RAPIDS_",
    "RMM_",
    "LIBCUDF_",
    "CUPY_",
    "NUMBA_",
)
#: how often the parent measures a running pipeline's folder against its disk cap
DISK_CHECK_EVERY_S = 2.0
#: never passed, whatever the allow-list says
ENV_DENY = frozenset(
    {
        "NVIDIA_API_KEY",
        "OPENAI_API_KEY",
        "MLPILOT_MONGO_URI",
        "MLPILOT_DASH_PASSWORD",
        "MLPILOT_DASH_USER",
    }
)


class Cancel(Protocol):
    """Anything that says when to stop: a ``threading.Event``, a cancel file."""

    def is_set(self) -> bool: ...


class Watch(Protocol):
    """The parent's side of a contained tree (``containment.TreeWatch``)."""

    def extra_mb(self, pid: int) -> float:
        """What the tree wrote outside its run folder (its private tmpfs, the stores)."""
        ...

    def end(self) -> None:
        """Called once every process of the tree is gone."""
        ...


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 7200.0
    cpu_s: int | None = None  # default: timeout × cores + a minute
    file_size_mb: float = 2048.0
    open_files: int = 4096
    output_mb: float = 10.0
    processes: int | None = None  # only for a dedicated account: it counts the user's tasks
    address_space_mb: int | None = None
    run_disk_mb: float | None = None  # the run folder's size, watched by the parent

    def describe(self) -> dict[str, str]:
        """The limits in words, for the run's record."""
        words = {
            "timeout": f"{self.timeout_s:g} s",
            "file size": f"{self.file_size_mb:g} MiB",
            "open files": str(self.open_files),
        }
        if self.run_disk_mb:
            words["run folder"] = f"{self.run_disk_mb:g} MiB"
        if self.processes:
            words["processes"] = str(self.processes)
        if self.address_space_mb:
            words["address space"] = f"{self.address_space_mb} MiB"
        return words

    def rlimits(self) -> dict[str, int]:
        """The resource limits the launcher applies, by ``resource`` name."""
        cpu = self.cpu_s or int(self.timeout_s * (os.cpu_count() or 1) + 60)
        limits = {
            "RLIMIT_CORE": 0,
            "RLIMIT_CPU": cpu,
            "RLIMIT_FSIZE": int(self.file_size_mb * 2**20),
            "RLIMIT_NOFILE": self.open_files,
        }
        if self.processes:
            limits["RLIMIT_NPROC"] = self.processes
        if self.address_space_mb:
            limits["RLIMIT_AS"] = int(self.address_space_mb * 2**20)
        return limits


@dataclass
class ChildResult:
    returncode: int | None
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    disk_exceeded: bool = False
    signal_name: str | None = None
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    truncated: list[str] = field(default_factory=list)
    #: what the parent read from the child's pipes (capped): the copy it logs and shows,
    #: never the run folder's files, which the pipeline can replace
    captured: dict[str, bytearray] = field(
        default_factory=lambda: {"stdout": bytearray(), "stderr": bytearray()}
    )

    @property
    def stdout(self) -> bytes:
        return bytes(self.captured["stdout"])

    @property
    def stderr(self) -> bytes:
        return bytes(self.captured["stderr"])

    @property
    def ok(self) -> bool:
        return (
            self.returncode == 0
            and not self.timed_out
            and not self.cancelled
            and not self.disk_exceeded
        )


def scrubbed_env(
    extra: Mapping[str, str], source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allow-listed part of ``source`` (default: os.environ) plus ``extra``."""
    source = os.environ if source is None else source
    env = {
        key: value
        for key, value in source.items()
        if (key in ENV_ALLOW or key.startswith(ENV_ALLOW_PREFIXES)) and key not in ENV_DENY
    }
    env.update({k: v for k, v in extra.items() if k not in ENV_DENY})
    return env


TRUNCATED = b"\n[output truncated by mlpilot]\n"


def _drain(stream: object, fd: int, cap_bytes: int, result: ChildResult, name: str) -> None:
    """Read the child's pipe to its end: the first ``cap_bytes`` into ``result.captured``
    (what the parent logs) and into ``fd``, the parent's own file in the run folder (a
    copy for people to read; the parent never reads it back)."""
    kept = result.captured[name]
    with os.fdopen(fd, "wb") as out:
        for chunk in iter(lambda: stream.read(65536), b""):  # type: ignore[attr-defined]
            if len(kept) < cap_bytes:
                take = chunk[: cap_bytes - len(kept)]
                kept += take
                out.write(take)
                if len(kept) >= cap_bytes:
                    kept += TRUNCATED
                    out.write(TRUNCATED)
                    result.truncated.append(name)
            out.flush()


def run_child(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    poll: Callable[[], None] | None = None,
    cancel: Cancel | None = None,
    log_prefix: str = "",
    contain: dict[str, object] | None = None,
) -> ChildResult:
    """Run ``command`` contained; call ``poll`` about every 0.2 s while it runs."""
    child = start_child(
        command, cwd=cwd, env=env, limits=limits, log_prefix=log_prefix, contain=contain
    )
    return child.wait(poll=poll, cancel=cancel)


def captured_tail(captured: bytes, lines: int, chars: int) -> str:
    """The last ``lines`` of what the parent captured from a child's pipe, as one line of
    at most ``chars`` (never a file of its folder, which the child could swap for a link)."""
    text = captured.decode("utf-8", errors="replace").strip().splitlines()
    return " ".join(text[-lines:])[-chars:]


def start_set_up(
    setup: Any, command: list[str], *, cwd: Path, env: Mapping[str, str], limits: Limits
) -> ContainedChild:
    """Start ``command`` under a ``containment.ChildSetup`` (its containment, descriptors
    and watch); the parent's copies of the descriptors are closed either way."""
    try:
        return start_child(
            command,
            cwd=cwd,
            env=env,
            limits=limits,
            contain=setup.contain,
            pass_fds=setup.pass_fds,
            watch=setup.watch,
        )
    finally:
        setup.close_fds()


def start_child(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    log_prefix: str = "",
    contain: dict[str, object] | None = None,
    pass_fds: tuple[int, ...] = (),
    watch: Watch | None = None,
) -> ContainedChild:
    """Start ``command`` contained and return at once; ``wait`` (or ``kill``) ends it.

    The launcher (``_launch.py``) applies ``contain`` (namespaces, user, Landlock,
    seccomp) and the limits, then becomes ``command``; ``pass_fds`` stay open in it (data
    descriptors). ``watch`` counts its writes beyond ``cwd`` and ends with it.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    names = f"{log_prefix}stdout.txt", f"{log_prefix}stderr.txt"
    stdout_path, stderr_path = cwd / names[0], cwd / names[1]
    # created by the parent, exclusively, before the child runs: whatever stood at those
    # names (a link left by an earlier leg) is removed, never written through
    with RunFolder(cwd) as folder:
        fds = [folder.create(name) for name in names]
    start = time.monotonic()
    spec = {"limits": limits.rlimits(), **(contain or {})}
    if spec.get("tree"):  # the script and interpreter stay in sight under a private /tmp
        spec["keep"] = [*spec.get("keep", []), *(a for a in command if os.path.isabs(a))]  # type: ignore[misc]
    try:
        return _popen(
            command, spec, cwd, env, limits, pass_fds, watch, start, (stdout_path, stderr_path), fds
        )
    except BaseException:
        for fd in fds:
            os.close(fd)
        if watch is not None:
            watch.end()
        raise


def _popen(
    command: list[str],
    spec: dict[str, object],
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    pass_fds: tuple[int, ...],
    watch: Watch | None,
    start: float,
    paths: tuple[Path, Path],
    fds: list[int],
) -> ContainedChild:
    from mlpilot.platform.execution.containment import launcher_command

    proc = subprocess.Popen(
        launcher_command(spec, command),
        cwd=str(cwd),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
        start_new_session=True,  # its own process group: a timeout kills every descendant
    )
    cap = int(limits.output_mb * 1024 * 1024)
    result = ChildResult(None, 0.0, stdout_path=paths[0], stderr_path=paths[1])
    readers = [
        threading.Thread(target=_drain, args=(stream, fd, cap, result, name), daemon=True)
        for stream, fd, name in ((proc.stdout, fds[0], "stdout"), (proc.stderr, fds[1], "stderr"))
    ]
    for reader in readers:
        reader.start()
    return ContainedChild(proc, readers, result, start, limits, cwd, watch)


class ContainedChild:
    """A started child process: wait for it under its limits, or kill its whole group."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        readers: list[threading.Thread],
        result: ChildResult,
        start: float,
        limits: Limits,
        folder: Path,
        watch: Watch | None = None,
    ) -> None:
        self.proc, self._readers, self._result = proc, readers, result
        self._start, self._limits, self._folder = start, limits, folder
        self._watch = watch
        self._next_disk_check = start

    def kill(self) -> ChildResult:
        """End the child and every descendant now (it is not needed after all)."""
        _kill_group(self.proc)
        self._result.cancelled = True
        return self._collect(None)

    def wait(
        self,
        *,
        poll: Callable[[], None] | None = None,
        cancel: Cancel | None = None,
    ) -> ChildResult:
        """Wait for the child; call ``poll`` about every 0.2 s while it runs."""
        proc, result = self.proc, self._result
        try:
            while proc.poll() is None:
                if time.monotonic() - self._start > self._limits.timeout_s:
                    result.timed_out = True
                    _kill_group(proc)
                    break
                if cancel is not None and cancel.is_set():
                    result.cancelled = True
                    _kill_group(proc)
                    break
                if self._over_disk_cap():
                    result.disk_exceeded = True
                    _kill_group(proc)
                    break
                if poll:
                    poll()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)  # returns as soon as the child exits
        except KeyboardInterrupt:
            result.cancelled = True
            _kill_group(proc)
        return self._collect(poll)

    def _over_disk_cap(self) -> bool:
        """Every few seconds: have its writes passed ``run_disk_mb``? The run folder, and
        (``watch``) its private /tmp and its files in the stores."""
        cap = self._limits.run_disk_mb
        now = time.monotonic()
        if not cap or now < self._next_disk_check:
            return False
        self._next_disk_check = now + DISK_CHECK_EVERY_S
        used = folder_mb(self._folder)
        if self._watch is not None and used <= cap:
            used += self._watch.extra_mb(self.proc.pid)
        return used > cap

    def _collect(self, poll: Callable[[], None] | None) -> ChildResult:
        proc, result = self.proc, self._result
        proc.wait()
        # what the pipeline left behind in its group (a forked helper, a fork bomb) ends too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if self._watch is not None:  # the tree is gone: seal its folder, free its uid
            self._watch.end()
        for reader in self._readers:
            reader.join(timeout=5)
        if poll:
            poll()
        result.returncode = proc.returncode
        result.duration_s = time.monotonic() - self._start
        if proc.returncode is not None and proc.returncode < 0:
            result.signal_name = signal.Signals(-proc.returncode).name
        return result


def folder_mb(folder: Path) -> float:
    """The size of everything under ``folder`` (files it cannot see count as nothing)."""
    total = 0
    stack = [folder]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total / 2**20


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
