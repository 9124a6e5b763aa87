"""Tier-1 containment for generated pipelines (DESIGN §8).

The child gets its own process group, the run directory as working directory, an
environment allow-list (no LLM keys, no MongoDB credentials), resource limits (CPU time,
file size, open files, no core dumps), capped captured output, and a wall-clock timeout
that kills the whole group.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 7200.0
    cpu_s: int | None = None  # default: timeout × cores + a minute
    file_size_mb: int = 20_480
    open_files: int = 4096
    output_mb: float = 10.0


@dataclass
class ChildResult:
    returncode: int | None
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    signal_name: str | None = None
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    truncated: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.cancelled


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


def _limit_child(limits: Limits) -> Callable[[], None]:
    cpu = limits.cpu_s or int(limits.timeout_s * (os.cpu_count() or 1) + 60)

    def apply() -> None:  # runs in the child between fork and exec
        def cap(which: int, soft: int) -> None:
            _, hard = resource.getrlimit(which)
            value = soft if hard == resource.RLIM_INFINITY else min(soft, hard)
            resource.setrlimit(which, (value, hard))

        cap(resource.RLIMIT_CORE, 0)
        cap(resource.RLIMIT_CPU, cpu)
        cap(resource.RLIMIT_FSIZE, limits.file_size_mb * 1024 * 1024)
        cap(resource.RLIMIT_NOFILE, limits.open_files)

    return apply


def _drain(stream: object, path: Path, cap_bytes: int, truncated: list[str], name: str) -> None:
    written = 0
    with path.open("wb") as out:
        for chunk in iter(lambda: stream.read(65536), b""):  # type: ignore[attr-defined]
            if written < cap_bytes:
                take = chunk[: cap_bytes - written]
                out.write(take)
                written += len(take)
                if written >= cap_bytes:
                    out.write(b"\n[output truncated by mlpilot]\n")
                    truncated.append(name)
            out.flush()


def run_child(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    poll: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    log_prefix: str = "",
) -> ChildResult:
    """Run ``command`` contained; call ``poll`` about every 0.2 s while it runs."""
    child = start_child(command, cwd=cwd, env=env, limits=limits, log_prefix=log_prefix)
    return child.wait(poll=poll, cancel=cancel)


def start_child(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    log_prefix: str = "",
) -> ContainedChild:
    """Start ``command`` contained and return at once; ``wait`` (or ``kill``) ends it."""
    cwd.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = cwd / f"{log_prefix}stdout.txt", cwd / f"{log_prefix}stderr.txt"
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=str(cwd),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: a timeout kills every descendant
        preexec_fn=_limit_child(limits),
    )
    cap = int(limits.output_mb * 1024 * 1024)
    result = ChildResult(None, 0.0, stdout_path=stdout_path, stderr_path=stderr_path)
    readers = [
        threading.Thread(
            target=_drain,
            args=(proc.stdout, stdout_path, cap, result.truncated, "stdout"),
            daemon=True,
        ),
        threading.Thread(
            target=_drain,
            args=(proc.stderr, stderr_path, cap, result.truncated, "stderr"),
            daemon=True,
        ),
    ]
    for reader in readers:
        reader.start()
    return ContainedChild(proc, readers, result, start, limits)


class ContainedChild:
    """A started child process: wait for it under its limits, or kill its whole group."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        readers: list[threading.Thread],
        result: ChildResult,
        start: float,
        limits: Limits,
    ) -> None:
        self.proc, self._readers, self._result = proc, readers, result
        self._start, self._limits = start, limits

    def kill(self) -> ChildResult:
        """End the child and every descendant now (it is not needed after all)."""
        _kill_group(self.proc)
        self._result.cancelled = True
        return self._collect(None)

    def wait(
        self,
        *,
        poll: Callable[[], None] | None = None,
        cancel: threading.Event | None = None,
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
                if poll:
                    poll()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)  # returns as soon as the child exits
        except KeyboardInterrupt:
            result.cancelled = True
            _kill_group(proc)
        return self._collect(poll)

    def _collect(self, poll: Callable[[], None] | None) -> ChildResult:
        proc, result = self.proc, self._result
        proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        if poll:
            poll()
        result.returncode = proc.returncode
        result.duration_s = time.monotonic() - self._start
        if proc.returncode is not None and proc.returncode < 0:
            result.signal_name = signal.Signals(-proc.returncode).name
        return result


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
