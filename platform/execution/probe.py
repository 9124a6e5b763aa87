"""Does the GPU engine work here? Asked by running it, answered once per environment.

The probe is ``ml/gpu_probe.py`` started as a GPU leg starts: the GPU engine's own
command, the pipelines' scrubbed environment, and the leg's containment (its own uid with
``HOME`` in its folder, the mount namespace, Landlock with the device nodes a leg gets,
seccomp, limits), so it fails where a GPU leg would fail (a CUDA-13 build on a CUDA-12
driver, an accelerator that does not install, ``/dev/nvidia*`` that root may open and the
pipeline account may not). Its report is read from its folder without following links.
The verdict is cached under ``$MLPILOT_HOME/cache`` keyed by what decides it — interpreter,
installed RAPIDS and XGBoost versions, driver, device, and the environment variables the
GPU stack reads — a pass for ``MLPILOT_GPU_PROBE_TTL`` seconds, a failure for
``MLPILOT_GPU_PROBE_FAIL_TTL`` (minutes: a fixed driver or permission is seen soon), and
``mlpilot doctor --refresh-gpu`` probes again at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from mlpilot.platform.config import Settings, get_settings
from mlpilot.platform.execution.commands import engine_command, leg_env
from mlpilot.platform.execution.containment import set_up_child
from mlpilot.platform.execution.sandbox import ChildResult, Limits, captured_tail, start_set_up
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.devices import DriverReport, cuda_driver_report
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 300.0
CACHE_FILE = "gpu-probe.json"
REPORT_FILE = "report.json"
REPORT_MAX_BYTES = 1 << 20
#: checks that must pass for the GPU engine to be usable (XGBoost may still train on the CPU)
REQUIRED = ("driver", "accelerators", "cudf", "cuml_fit")
#: distributions whose versions decide the verdict (read from metadata, nothing imported)
DISTRIBUTIONS = (
    "cudf-cu12",
    "cuml-cu12",
    "cudf-cu13",
    "cuml-cu13",
    "xgboost",
    "xgboost-cu12",
    "pandas",
    "scikit-learn",
)
#: environment variables the GPU stack reads
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
ENV_PREFIXES = ("CUDF_", "CUML_", "RAPIDS_", "RMM_", "LIBCUDF_")
MISSING_EXTRA_MARKERS = ("No module named 'cudf'", "No module named 'cuml'", "No module named cudf")


@dataclass(frozen=True)
class ProbeVerdict:
    usable: bool
    reason: str
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    xgboost_gpu: bool = False
    missing_extra: bool = False
    cached: bool = False
    at: float = 0.0
    #: who the probe ran as (``uid``, ``gid``, ``home``), from its report
    account: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeVerdict:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def decide(
    report: Mapping[str, Any] | None, child: ChildResult, stderr_tail: str = ""
) -> ProbeVerdict:
    """The verdict from the probe's report and how its process ended (pure: tested with fakes)."""
    if child.timed_out:
        return ProbeVerdict(False, f"the GPU probe did not finish in {child.duration_s:.0f} s")
    if report is None:
        missing = any(marker in stderr_tail for marker in MISSING_EXTRA_MARKERS)
        if missing:
            return ProbeVerdict(
                False,
                "cudf/cuml are not installed: pip install 'mlpilot[gpu]'",
                missing_extra=True,
            )
        how = f"exited with status {child.returncode}" if child.returncode else "wrote no report"
        detail = f": {stderr_tail}" if stderr_tail else ""
        return ProbeVerdict(False, f"the GPU probe {how}{detail}"[:400])
    checks = dict(report.get("checks") or {})
    account = report.get("account") if isinstance(report.get("account"), dict) else {}
    for name in REQUIRED:
        check = checks.get(name)
        if not check or not check.get("ok"):
            why = (check or {}).get("detail") or "not run"
            reason = f"GPU probe check {name} failed: {why}"[:400]
            return ProbeVerdict(False, reason, checks, account=account)
    xgb = checks.get("xgboost") or {}
    reason = f"GPU probe passed: {checks['driver']['detail']}; {checks['accelerators']['detail']}"
    if not xgb.get("ok"):
        reason += f"; XGBoost will train on the CPU ({xgb.get('detail') or 'not checked'})"
    return ProbeVerdict(
        True, reason[:400], checks, xgboost_gpu=bool(xgb.get("ok")), account=account
    )


def probe_script() -> Path:
    from mlpilot.platform.ml import gpu_probe

    return Path(gpu_probe.__file__).resolve()


def run_probe(settings: Settings, python: str = sys.executable) -> ProbeVerdict:
    """Run the probe as a GPU leg runs: command, environment, account and containment."""
    folder = settings.home / "cache"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu-probe-", dir=folder) as tmp:
        work = Path(tmp)
        env = leg_env(settings, "gpu", {protocol.ENV_PROBE_OUT: str(work / REPORT_FILE)})
        setup = set_up_child(settings, engine="gpu", run_dir=work, reads=[])
        env.update(setup.env)
        limits = Limits(
            timeout_s=PROBE_TIMEOUT_S,
            file_size_mb=settings.max_file_mb,
            run_disk_mb=settings.max_run_disk_mb,
            processes=settings.max_processes if setup.contained else None,
        )
        command = engine_command("gpu", str(probe_script()), [], python=python)
        result = start_set_up(setup, command, cwd=work, env=env, limits=limits).wait()
        report = _read_report(work)
    verdict = decide(report, result, captured_tail(result.stderr, 3, 400))
    logger.info("GPU probe (as %s): %s", setup.record.user, verdict.reason)
    return verdict


def _read_report(work: Path) -> dict[str, Any] | None:
    """The probe's report, from its folder without following links (the probe ran as the
    pipelines run: what it left there is the pipeline account's)."""
    try:
        with RunFolder(work) as folder:
            data = folder.read_bytes(REPORT_FILE, REPORT_MAX_BYTES)
        parsed = json.loads(data or b"")
    except (UnsafeFile, OSError, ValueError) as exc:
        logger.debug("no readable GPU probe report: %s", exc)
        return None
    return parsed if isinstance(parsed, dict) else None


def environment_key(
    driver: DriverReport, python: str = sys.executable, environ: Mapping[str, str] | None = None
) -> str:
    """What decides the verdict, hashed: a change in any of it probes again."""
    environ = os.environ if environ is None else environ
    versions = {}
    for name in DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    env = {k: v for k, v in sorted(environ.items()) if k in ENV_KEYS or k.startswith(ENV_PREFIXES)}
    material = {
        "python": str(Path(python).resolve()),
        "prefix": sys.prefix,
        "versions": versions,
        "driver": [driver.driver_version, driver.name, driver.bus_id, driver.devices],
        "env": env,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


class ProbeCache:
    """Verdicts by environment key, in one JSON file (written atomically); a failed verdict
    is kept for ``fail_ttl_s`` at most."""

    def __init__(self, path: Path, ttl_s: float, fail_ttl_s: float | None = None) -> None:
        self.path, self.ttl_s = path, ttl_s
        self.fail_ttl_s = min(ttl_s, fail_ttl_s if fail_ttl_s is not None else ttl_s)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str, now: float | None = None) -> ProbeVerdict | None:
        entry = self._load().get(key)
        if not isinstance(entry, dict):
            return None
        verdict = ProbeVerdict.from_dict(entry)
        ttl = self.ttl_s if verdict.usable else self.fail_ttl_s
        if (now or time.time()) - verdict.at > ttl:
            return None
        return ProbeVerdict.from_dict({**entry, "cached": True})

    def put(self, key: str, verdict: ProbeVerdict) -> None:
        data = self._load()
        data[key] = {**verdict.to_dict(), "cached": False}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        tmp.replace(self.path)


def gpu_probe(
    settings: Settings | None = None,
    *,
    refresh: bool = False,
    driver: DriverReport | None = None,
    runner: Callable[[Settings], ProbeVerdict] | None = None,
    python: str = sys.executable,
) -> ProbeVerdict:
    """The cached verdict for this environment, probing only when there is none (or
    ``refresh``). Without a usable CUDA device nothing is run."""
    settings = settings or get_settings()
    driver = driver or cuda_driver_report()
    if not driver.ok:
        return ProbeVerdict(False, driver.reason, at=time.time())
    cache = ProbeCache(
        settings.home / "cache" / CACHE_FILE,
        settings.gpu_probe_ttl_s,
        settings.gpu_probe_fail_ttl_s,
    )
    key = environment_key(driver, python)
    if not refresh and (hit := cache.get(key)) is not None:
        return hit
    verdict = (runner or (lambda s: run_probe(s, python)))(settings)
    verdict = ProbeVerdict.from_dict({**verdict.to_dict(), "at": time.time(), "cached": False})
    cache.put(key, verdict)
    return verdict
