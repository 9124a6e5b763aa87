"""The GPU probe's decisions (fake command results), its cache per environment, and the
real probe command on this CPU-only machine (where it must fail, and say why)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.execution import probe as P
from mlpilot.platform.execution.probe import ProbeCache, ProbeVerdict, decide, gpu_probe
from mlpilot.platform.execution.sandbox import ChildResult
from mlpilot.platform.ml import gpu_probe as child_probe
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.devices import DriverReport

DEVICE = DriverReport(
    True, "CUDA device available", 1, "NVIDIA H200", 12080, (9, 0), "0000:3B:00.0"
)
NO_DEVICE = DriverReport(False, "no CUDA driver (libcuda) on this machine")
EXITED = ChildResult(returncode=0, duration_s=8.0)
WITHOUT_CUDF = pytest.mark.skipif(
    importlib.util.find_spec("cudf") is not None,
    reason="cudf is installed: the GPU command works here (tests/gpu cover this machine)",
)
PASSING = {
    "checks": {
        "driver": {"ok": True, "detail": "NVIDIA H200, compute capability 9.0, driver CUDA 12.8"},
        "accelerators": {"ok": True, "detail": "cudf 26.08.01, cuml 26.08.00"},
        "cudf": {"ok": True, "detail": "cuDF reduction on the device"},
        "cuml_fit": {"ok": True, "detail": "Ridge.fit ran on GPU"},
        "xgboost": {"ok": True, "detail": "XGBoost 3.3.0 (CUDA [12, 9]) trained on the GPU"},
    }
}


def _with(name: str, ok: bool, detail: str) -> dict:
    checks = {k: dict(v) for k, v in PASSING["checks"].items()}
    checks[name] = {"ok": ok, "detail": detail}
    return {"checks": checks}


def test_a_passing_probe() -> None:
    verdict = decide(PASSING, EXITED)
    assert verdict.usable and verdict.xgboost_gpu and "H200" in verdict.reason


def test_xgboost_on_the_cpu_keeps_the_gpu_engine_but_says_so() -> None:
    report = _with(
        "xgboost", False, "RuntimeError: XGBoost 3.4.1 (built for CUDA [13, 0]) trained on the CPU"
    )
    verdict = decide(report, EXITED)
    assert verdict.usable and not verdict.xgboost_gpu
    assert "XGBoost will train on the CPU" in verdict.reason and "CUDA [13, 0]" in verdict.reason


@pytest.mark.parametrize(
    ("check", "detail"),
    [
        ("driver", "RuntimeError: the driver supports CUDA 11.8; the -cu12 wheels need 12.0+"),
        ("driver", "RuntimeError: Tesla P100 has compute capability 6.0; RAPIDS needs 7.0+"),
        ("accelerators", "RuntimeError: cuml.accel not active in the GPU command"),
        ("cudf", "RuntimeError: CUDA error: cudaErrorInsufficientDriver"),
        ("cuml_fit", "RuntimeError: Ridge.fit did not run on the GPU (no GPU call was logged)"),
    ],
)
def test_a_failed_required_check_makes_the_gpu_unusable(check: str, detail: str) -> None:
    verdict = decide(_with(check, False, detail), EXITED)
    assert not verdict.usable and f"check {check} failed" in verdict.reason
    assert detail in verdict.reason


def test_a_probe_that_crashed_timed_out_or_lacks_the_extra() -> None:
    crashed = ChildResult(returncode=-11, duration_s=3.0, signal_name="SIGSEGV")
    verdict = decide(
        None, crashed, "cudaErrorInsufficientDriver: CUDA driver version is insufficient"
    )
    assert not verdict.usable and "exited with status -11" in verdict.reason
    assert "cudaErrorInsufficientDriver" in verdict.reason
    hung = ChildResult(returncode=None, duration_s=300.0, timed_out=True)
    assert "did not finish in 300 s" in decide(None, hung).reason
    missing = decide(None, ChildResult(1, 0.2), "ModuleNotFoundError: No module named 'cudf'")
    assert missing.missing_extra and "pip install 'mlpilot[gpu]'" in missing.reason


def test_the_cache_is_per_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    calls: list[int] = []

    def runner(_: Settings) -> ProbeVerdict:
        calls.append(1)
        return decide(PASSING, EXITED)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    first = gpu_probe(settings, driver=DEVICE, runner=runner)
    again = gpu_probe(settings, driver=DEVICE, runner=runner)
    assert first.usable and not first.cached and again.cached and len(calls) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another device: another verdict
    gpu_probe(settings, driver=DEVICE, runner=runner)
    assert len(calls) == 2
    newer_driver = DriverReport(**{**DEVICE.__dict__, "driver_version": 13000})
    gpu_probe(settings, driver=newer_driver, runner=runner)
    assert len(calls) == 3
    gpu_probe(settings, driver=DEVICE, runner=runner, refresh=True)
    assert len(calls) == 4
    assert gpu_probe(settings, driver=NO_DEVICE, runner=runner).reason == NO_DEVICE.reason
    assert len(calls) == 4  # no device: nothing is run
    assert (tmp_path / "cache" / P.CACHE_FILE).is_file()


def test_cached_verdicts_expire(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "probe.json", ttl_s=60)
    cache.put("k", ProbeVerdict(False, "GPU probe check cudf failed", at=1000.0))
    assert cache.get("k", now=1030.0).cached
    assert cache.get("k", now=1061.0) is None
    assert cache.get("other", now=1030.0) is None


def test_a_failed_verdict_is_kept_for_minutes_a_pass_for_a_day(tmp_path: Path) -> None:
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    assert (settings.gpu_probe_ttl_s, settings.gpu_probe_fail_ttl_s) == (86400.0, 600.0)
    cache = ProbeCache(tmp_path / "probe.json", ttl_s=86400, fail_ttl_s=600)
    cache.put("failed", ProbeVerdict(False, "GPU probe check driver failed", at=1000.0))
    cache.put("passed", ProbeVerdict(True, "GPU probe passed", at=1000.0))
    assert cache.get("failed", now=1599.0).cached and cache.get("failed", now=1601.0) is None
    assert cache.get("passed", now=1000.0 + 3600).cached


def test_refresh_probes_again_despite_a_cached_verdict(tmp_path: Path) -> None:
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    runs: list[int] = []

    def runner(_: Settings) -> ProbeVerdict:
        runs.append(1)
        return ProbeVerdict(len(runs) > 1, f"probe {len(runs)}")

    assert not gpu_probe(settings, driver=DEVICE, runner=runner).usable
    assert gpu_probe(settings, driver=DEVICE, runner=runner).cached  # within the minutes
    assert gpu_probe(settings, driver=DEVICE, runner=runner, refresh=True).usable
    assert len(runs) == 2


STAND_IN = Path(__file__).parent / "data" / "stand_in_gpu"


@pytest.mark.skipif(os.geteuid() != 0, reason="the pipeline account is switched to as root")
@WITHOUT_CUDF
def test_the_probe_runs_as_the_pipeline_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in accelerators (``data/stand_in_gpu``) carry the GPU command to the probe's
    checks here: its report says it ran as a leg runs, as the run's own uid with ``HOME``
    in its own folder, and its failure (no device) is the check's, not a crash."""
    monkeypatch.setenv("PYTHONPATH", str(STAND_IN))
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    verdict = P.run_probe(settings)
    assert verdict.account, verdict.reason
    assert verdict.account["uid"] != 0 and verdict.account["gid"] != 0
    home = Path(verdict.account["home"])
    assert home.parent == tmp_path / "cache" and home.name.startswith("gpu-probe-")
    assert not verdict.usable and verdict.reason.startswith("GPU probe check")
    assert not home.exists()  # its folder is cleaned up


def test_checks_run_on_past_a_failure() -> None:
    def broken() -> str:
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    report = child_probe.run_checks({"driver": broken, "cudf": lambda: "fine"})
    assert report["checks"]["driver"] == {
        "ok": False,
        "detail": "RuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected",
    }
    assert report["checks"]["cudf"] == {"ok": True, "detail": "fine"}


@WITHOUT_CUDF
def test_the_probe_runs_the_gpu_command_with_the_scrubbed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real command on this machine: `python -m cudf.pandas -m cuml.accel gpu_probe.py`
    with the pipelines' environment (no secrets) — and without cudf it must fail."""
    seen: dict = {}
    real = P.start_set_up

    def spy(setup, command, *, cwd, env, limits):
        seen.update(command=command, env=dict(env))
        return real(setup, command, cwd=cwd, env=env, limits=limits)

    monkeypatch.setattr(P, "start_set_up", spy)
    monkeypatch.setenv("NVIDIA_API_KEY", "secret")
    monkeypatch.setenv("CUDF_PANDAS_RMM_MODE", "pool")
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    verdict = P.run_probe(settings)
    script = str(Path(child_probe.__file__).resolve())
    assert seen["command"] == [sys.executable, "-m", "cudf.pandas", "-m", "cuml.accel", script]
    env = seen["env"]
    assert "NVIDIA_API_KEY" not in env and env["CUDF_PANDAS_RMM_MODE"] == "pool"
    assert env["CUML_ACCEL_LOG_LEVEL"] == "info" and env[protocol.ENV_ENGINE_USED] == "gpu"
    assert env[protocol.ENV_PROBE_OUT].endswith("report.json")
    assert not verdict.usable and verdict.missing_extra
    assert not list((tmp_path / "cache").glob("gpu-probe-*"))  # its folder is cleaned up
