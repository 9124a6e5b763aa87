"""All of mlpilot's settings in one place (DESIGN.md section 9).

Each setting is an environment variable with a typed default. An optional
``mlpilot.toml`` (in the working directory or in ``$MLPILOT_HOME``) may hold the same
keys; the environment wins. ``Settings.from_env()`` reads them once; core code takes a
``Settings`` explicitly rather than reading the environment itself.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import SettingsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

logger = logging.getLogger(__name__)

ENGINES = ("auto", "cpu", "gpu", "compare")
LLM_MODES = ("auto", "offline", "openai")
REASONING_MODES = ("off", "on")
LOG_LEVELS = ("debug", "info", "warning", "error")
CHILD_USERS = ("auto", "none")
#: the unprivileged account a pipeline runs as when mlpilot is root (MLPILOT_CHILD_USER=auto)
RUN_ACCOUNT = "mlpilot-run"
#: each pipeline (as root) runs as a uid and gid of its own from this range, no passwd entry
#: needed; a slot is held by an exclusive lock in the root-only folder while its run lives
RUN_IDS_FIRST, RUN_IDS_COUNT = 1_900_000_000, 4096
RUN_IDS_FOLDER = "/run/mlpilot/run-ids"
# The server behind MLPILOT_LLM_BASE_URL: it decides where the thinking budget goes
# (hosted NIM: top level; self-hosted NIM: under nvext; vLLM and OpenAI: not sent).
LLM_BACKENDS = ("nim", "nim-selfhosted", "vllm", "llamacpp", "openai")

DEFAULT_LLM_BASE_URL = "https://integrate.api.nvidia.com/v1"
DEFAULT_LLM_MODEL = "nvidia/nvidia-nemotron-nano-9b-v2"
DEFAULT_LLM_MAX_TOKENS = 4096  # what NVIDIA's reference agent sends; reasoning counts in it


def _choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    value = value.strip().lower()
    if value not in choices:
        raise SettingsError(
            f"{name}={value!r} is not valid",
            hint=f"use one of: {', '.join(choices)}",
        )
    return value


def _positive_float(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise SettingsError(f"{name}={value!r} is not a number") from None
    if number <= 0:
        raise SettingsError(f"{name}={value!r} must be greater than zero")
    return number


def _optional_positive(name: str, value: str | None) -> float | None:
    if value is None or value.strip() == "":
        return None
    return _positive_float(name, value)


def _limit_settings(get: Callable[[str, str], str | None]) -> dict[str, Any]:
    """A pipeline process's limits and who it runs as (DESIGN §8)."""
    return {
        "max_file_mb": _positive_float(
            "MLPILOT_MAX_FILE_MB", get("MLPILOT_MAX_FILE_MB", "2048") or "2048"
        ),
        "max_run_disk_mb": _positive_float(
            "MLPILOT_MAX_RUN_DISK_MB", get("MLPILOT_MAX_RUN_DISK_MB", "10240") or "10240"
        ),
        "max_processes": _positive_int(
            "MLPILOT_MAX_PROCESSES", get("MLPILOT_MAX_PROCESSES", "1024") or "1024"
        ),
        "child_user": _choice(
            "MLPILOT_CHILD_USER", get("MLPILOT_CHILD_USER", "auto") or "auto", CHILD_USERS
        ),
        "max_columns": _positive_int(
            "MLPILOT_MAX_COLUMNS", get("MLPILOT_MAX_COLUMNS", "10000") or "10000"
        ),
    }


def _gpu_settings(get: Callable[[str, str], str | None]) -> dict[str, Any]:
    """The engine comparison's and the GPU probe's settings."""
    return {
        "compare_repeat": _positive_int(
            "MLPILOT_COMPARE_REPEAT", get("MLPILOT_COMPARE_REPEAT", "3") or "3"
        ),
        "compare_tolerance": _positive_float(
            "MLPILOT_COMPARE_TOLERANCE", get("MLPILOT_COMPARE_TOLERANCE", "0.02") or "0.02"
        ),
        "gpu_share_min": _positive_float(
            "MLPILOT_GPU_SHARE_MIN", get("MLPILOT_GPU_SHARE_MIN", "0.5") or "0.5"
        ),
        "gpu_probe_ttl_s": _positive_float(
            "MLPILOT_GPU_PROBE_TTL", get("MLPILOT_GPU_PROBE_TTL", "86400") or "86400"
        ),
        "gpu_probe_fail_ttl_s": _positive_float(
            "MLPILOT_GPU_PROBE_FAIL_TTL", get("MLPILOT_GPU_PROBE_FAIL_TTL", "600") or "600"
        ),
    }


#: a host name or IPv4 address as a Host header carries it: DNS labels (underscores too, as
#: in compose service names); IPv6 addresses are parsed by ``ipaddress`` instead
HOST_NAME = re.compile(
    r"^(?:[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$"
)


def _allowed_hosts(value: str | None) -> tuple[str, ...]:
    """``MLPILOT_DASH_ALLOWED_HOSTS``: comma-separated names (no port), ``.example.org`` for
    a domain and its subdomains; IPv6 addresses with or without brackets."""
    hosts: list[str] = []
    for raw in (value or "").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        name = entry.removeprefix(".")
        if name.startswith("[") and name.endswith("]"):
            name = name[1:-1]
        if ":" in name:  # IPv6: kept in the form a Host header carries it
            try:
                hosts.append(f"[{ipaddress.IPv6Address(name).compressed}]")
            except ValueError:
                raise _bad_host(entry) from None
            continue
        if not HOST_NAME.match(name):
            raise _bad_host(entry)
        hosts.append(entry if entry.startswith(".") else name)
    return tuple(hosts)


def _bad_host(entry: str) -> SettingsError:
    return SettingsError(
        f"MLPILOT_DASH_ALLOWED_HOSTS: {entry!r} is not a host name",
        hint="list names without scheme or port, e.g. dash.example.org,.corp.example,10.0.0.5",
    )


def _omp_threads(value: str | None) -> int | None:
    """OpenMP's own variable, as OpenMP reads it: the first level of a list ("4,2")."""
    first = (value or "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise SettingsError(f"{name}={value!r} is not an integer") from None
    if number <= 0:
        raise SettingsError(f"{name}={value!r} must be greater than zero")
    return number


def _thinking_budget(value: str | None, max_tokens: int) -> tuple[int | None, int | None]:
    """``MLPILOT_LLM_THINKING_BUDGET`` as (min, max) thinking tokens: ``MAX`` or ``MIN:MAX``.

    Nemotron Nano 9B v2 takes both bounds together; with one number the floor is half of it,
    the ratio of NVIDIA's own example for this model (1024 / 2048).
    """
    name = "MLPILOT_LLM_THINKING_BUDGET"
    if value is None or not value.strip():
        return None, None
    low_text, _, high_text = value.strip().rpartition(":")
    high = _positive_int(name, high_text)
    low = _positive_int(name, low_text) if low_text else max(1, high // 2)
    if not low_text:
        logger.debug("%s=%s: at least %d thinking tokens (half the maximum)", name, value, low)
    if low > high:
        raise SettingsError(f"{name}={value!r}: the minimum is above the maximum")
    if high >= max_tokens:
        raise SettingsError(
            f"{name}={value!r} leaves no room for the answer in MLPILOT_LLM_MAX_TOKENS={max_tokens}",
            hint="raise MLPILOT_LLM_MAX_TOKENS above the thinking budget, or lower the budget",
        )
    return low, high


def _llm_settings(get: Callable[..., str | None]) -> dict[str, object]:
    """The LLM planner's settings (section 9), checked together: the budget fits the cap."""
    if get("MLPILOT_LLM_THINKING_FIELD"):
        raise SettingsError(
            "MLPILOT_LLM_THINKING_FIELD is no longer read",
            hint="set MLPILOT_LLM_BACKEND (nim, nim-selfhosted, vllm or openai): it places the "
            "thinking budget for that server",
        )
    max_tokens = _positive_int(
        "MLPILOT_LLM_MAX_TOKENS", get("MLPILOT_LLM_MAX_TOKENS") or str(DEFAULT_LLM_MAX_TOKENS)
    )
    low, high = _thinking_budget(get("MLPILOT_LLM_THINKING_BUDGET"), max_tokens)
    return {
        "llm_base_url": get("MLPILOT_LLM_BASE_URL") or DEFAULT_LLM_BASE_URL,
        "llm_model": get("MLPILOT_LLM_MODEL") or DEFAULT_LLM_MODEL,
        "llm_api_key": get("NVIDIA_API_KEY") or get("OPENAI_API_KEY"),
        "llm_reasoning": _choice(
            "MLPILOT_LLM_REASONING", get("MLPILOT_LLM_REASONING") or "off", REASONING_MODES
        ),
        "llm_backend": _choice(
            "MLPILOT_LLM_BACKEND", get("MLPILOT_LLM_BACKEND") or "nim", LLM_BACKENDS
        ),
        "llm_max_tokens": max_tokens,
        "llm_thinking_budget": high,
        "llm_thinking_min": low,
        "llm_timeout_s": _positive_float("MLPILOT_LLM_TIMEOUT", get("MLPILOT_LLM_TIMEOUT") or "60"),
    }


def _artifact_root(tracking_uri: str, home: Path) -> str | None:
    """Where new experiments keep artifacts when no server decides it.

    A sqlite store keeps them beside its database file; another database under
    ``MLPILOT_HOME``. Left to MLflow they would go to ``./mlruns`` of whichever folder
    the user happens to be in. A tracking server chooses its own (None).
    """
    if tracking_uri.startswith(("http://", "https://", "databricks")):
        return None
    if tracking_uri.startswith("sqlite:///"):
        database = Path(tracking_uri.removeprefix("sqlite:///")).expanduser()
        return (database.resolve().parent / "artifacts").as_uri()
    return (home / "artifacts").as_uri()


@dataclass(frozen=True)
class Settings:
    """Resolved settings. Paths are absolute; URIs are complete."""

    home: Path
    tracking_uri: str
    artifact_root: str | None
    mongo_uri: str | None
    mongo_db: str
    optuna_storage: str
    engine: str
    experiment: str
    llm: str
    llm_base_url: str
    llm_model: str
    llm_api_key: str | None = field(repr=False)
    llm_reasoning: str  # off | on: /no_think or /think in the system prompt
    llm_backend: str  # one of LLM_BACKENDS
    llm_max_tokens: int  # completion cap per model turn, reasoning included
    llm_thinking_budget: int | None  # max thinking tokens, sent only with reasoning on
    llm_thinking_min: int | None  # min thinking tokens, sent with the max
    llm_timeout_s: float
    run_timeout_s: float
    mongo_timeout_ms: int
    dash_user: str | None
    dash_password: str | None = field(repr=False)
    #: MLFLOW_TRACKING_URI was set (not the embedded default)
    tracking_uri_set: bool = False
    dash_max_upload_mb: float = 50.0
    #: Host names the dashboard answers besides 127.0.0.1, localhost, [::1] and the bound
    #: address (DNS rebinding); ``.example.org`` takes the domain and its subdomains
    dash_allowed_hosts: tuple[str, ...] = ()
    memory_budget_mb: float | None = None
    log_level: str = "WARNING"
    #: OMP_NUM_THREADS, when set: the thread count pipelines train with
    threads: int | None = None
    #: limits of a pipeline process (DESIGN §8)
    max_file_mb: float = 2048.0
    max_run_disk_mb: float = 10240.0
    max_processes: int = 1024
    #: who a pipeline runs as when mlpilot runs as root: auto (a dedicated unprivileged
    #: user), or none (stay root: only for debugging containment itself)
    child_user: str = "auto"
    #: the widest table mlpilot profiles (wider ones are refused before being read whole)
    max_columns: int = 10000
    #: --engine compare: measured runs per leg after one warm-up (the best is reported)
    compare_repeat: int = 3
    #: --engine compare: largest difference of the legs' test metrics a speedup accepts
    #: (relative, or absolute for scores within [-1, 1])
    compare_tolerance: float = 0.02
    #: --engine compare: a stage is a GPU speedup when at least this share of its GPU-leg
    #: time ran on the GPU (else its ratio is reported as "mostly CPU")
    gpu_share_min: float = 0.5
    #: how long a GPU probe verdict is trusted for one environment, seconds
    gpu_probe_ttl_s: float = 86400.0
    #: how long a failed GPU probe is trusted, seconds (at most ``gpu_probe_ttl_s``): a
    #: driver, a device permission or an install fixed since is seen within minutes
    gpu_probe_fail_ttl_s: float = 600.0
    #: plugin packages whose model families (entry-point group ``mlpilot.families``) are
    #: loaded; an installed package's code runs in mlpilot only when named here or with
    #: --plugins
    family_plugins: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        home = Path(env.get("MLPILOT_HOME") or Path.home() / ".mlpilot").expanduser().resolve()
        merged = {**_read_toml(home), **{k: v for k, v in env.items() if v != ""}}

        def get(name: str, default: str | None = None) -> str | None:
            return merged.get(name, default)

        tracking_uri = get("MLFLOW_TRACKING_URI") or f"sqlite:///{home / 'mlflow.db'}"
        artifact_root = _artifact_root(tracking_uri, home)
        storage = get("MLPILOT_OPTUNA_STORAGE") or str(home / "optuna" / "journal.log")
        return cls(
            home=home,
            tracking_uri=tracking_uri,
            artifact_root=artifact_root,
            mongo_uri=get("MLPILOT_MONGO_URI"),
            mongo_db=get("MLPILOT_MONGO_DB", "mlpilot") or "mlpilot",
            optuna_storage=storage,
            engine=_choice("MLPILOT_ENGINE", get("MLPILOT_ENGINE", "auto") or "auto", ENGINES),
            experiment=get("MLPILOT_EXPERIMENT", "mlpilot") or "mlpilot",
            llm=_choice("MLPILOT_LLM", get("MLPILOT_LLM", "auto") or "auto", LLM_MODES),
            **_llm_settings(get),  # type: ignore[arg-type]
            run_timeout_s=_positive_float(
                "MLPILOT_RUN_TIMEOUT", get("MLPILOT_RUN_TIMEOUT", "7200") or "7200"
            ),
            mongo_timeout_ms=int(
                _positive_float(
                    "MLPILOT_MONGO_TIMEOUT_MS", get("MLPILOT_MONGO_TIMEOUT_MS", "2000") or "2000"
                )
            ),
            dash_user=get("MLPILOT_DASH_USER"),
            dash_password=get("MLPILOT_DASH_PASSWORD"),
            tracking_uri_set=bool(get("MLFLOW_TRACKING_URI")),
            dash_allowed_hosts=_allowed_hosts(get("MLPILOT_DASH_ALLOWED_HOSTS")),
            dash_max_upload_mb=_positive_float(
                "MLPILOT_DASH_MAX_UPLOAD_MB", get("MLPILOT_DASH_MAX_UPLOAD_MB", "50") or "50"
            ),
            memory_budget_mb=_optional_positive(
                "MLPILOT_MEMORY_BUDGET_MB", get("MLPILOT_MEMORY_BUDGET_MB")
            ),
            log_level=_choice(
                "MLPILOT_LOG_LEVEL", get("MLPILOT_LOG_LEVEL", "WARNING") or "WARNING", LOG_LEVELS
            ).upper(),
            threads=_omp_threads(get("OMP_NUM_THREADS")),
            family_plugins=tuple(
                p.strip() for p in (get("MLPILOT_FAMILY_PLUGINS") or "").split(",") if p.strip()
            ),
            **_limit_settings(get),
            **_gpu_settings(get),
        )

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"

    @property
    def private_dir(self) -> Path:
        """What pipeline processes never see: the metadata store, the outbox, sessions."""
        return self.home / "private"

    @property
    def outbox_path(self) -> Path:
        return self.private_dir / "outbox.jsonl"

    @property
    def embedded_store_path(self) -> Path:
        return self.private_dir / "metadata.db"

    @property
    def sessions_dir(self) -> Path:
        return self.private_dir / "sessions"

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def _read_toml(home: Path) -> dict[str, str]:
    """Keys of the first mlpilot.toml found (working directory, then MLPILOT_HOME)."""
    for candidate in (Path.cwd() / "mlpilot.toml", home / "mlpilot.toml"):
        if candidate.is_file():
            _check_trusted(candidate)
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise SettingsError(f"cannot read {candidate}: {exc}") from None
            return {str(k): str(v) for k, v in data.items() if not isinstance(v, dict)}
    return {}


def _check_trusted(path: Path) -> None:
    """Settings decide who a pipeline runs as and where the LLM key is sent: a file that a
    pipeline could have written (MLPILOT_HOME takes the store's new files) is not read."""
    info = path.stat()
    owners = {os.geteuid(), 0}
    writable_by_pipelines = bool(info.st_mode & stat.S_IWGRP) and info.st_gid == _run_gid()
    if info.st_uid not in owners or info.st_mode & stat.S_IWOTH or writable_by_pipelines:
        raise SettingsError(
            f"{path} is not read: another account could have written it (it is owned by "
            "another account or writable by others, and pipelines could change mlpilot's "
            "settings through it)",
            # never "chown it": another account could have written it, and trusting it
            # would let that account choose who pipelines run as
            hint=f"delete {path} and write your own, or set the settings as environment variables",
        )


def _run_gid() -> int | None:
    """The group of the account pipelines run as (when mlpilot is root), if it exists."""
    import grp

    try:
        return grp.getgrnam(RUN_ACCOUNT).gr_gid
    except KeyError:
        return None


def get_settings() -> Settings:
    """Settings from the current environment (read fresh on each call)."""
    return Settings.from_env()
