"""The executor's GPU duties on a CPU machine: auto's rerun on the CPU when the GPU leg
dies before its first stage, the per-device lock, the memory sampler, the worker rules."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import ExecutionError, MlpilotError
from mlpilot.platform.execution import EngineChoice, Executor, completed_stages, should_fall_back
from mlpilot.platform.execution.gpu import DeviceLock, MemorySampler, lock_name
from mlpilot.platform.ml import protocol

SCRIPT = """
from mlpilot.platform.ml.entry import exit_process, open_pipeline

with open_pipeline(None, plan={}, seed=1, default_data=None) as run:
    with run.stage("load"):
        print("loaded on", run.engine)
exit_process(run.exit_code)
"""


WITHOUT_CUDF = pytest.mark.skipif(
    importlib.util.find_spec("cudf") is not None,
    reason="cudf is installed: the GPU command works here (tests/gpu cover this machine)",
)


@pytest.fixture
def executor(tmp_path: Path) -> Executor:
    return Executor(Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home")}))


@WITHOUT_CUDF
def test_auto_reruns_on_the_cpu_when_the_gpu_leg_dies_first(
    tmp_path: Path, executor: Executor
) -> None:
    """The real GPU command dies here (no cudf) before any stage: an auto choice reruns
    the pipeline on the CPU, keeps the dead leg's output, and says why."""
    script = tmp_path / "pipeline.py"
    script.write_text(SCRIPT)
    choice = EngineChoice("auto", "gpu", "auto: GPU probe passed", fallback="cpu")
    leg = executor.run_leg(
        script=script,
        run_dir=tmp_path / "run",
        engine=choice,
        data_path=None,
        mlflow_run_id=None,
        track=False,
    )
    assert leg.ok and leg.engine == "cpu" and leg.result.devices["load"]["device"] == "cpu"
    assert leg.fallback["from"] == "gpu" and leg.fallback["to"] == "cpu"
    assert "cudf" in leg.fallback["error"]
    assert "died before its first stage" in leg.fallback["reason"]
    assert "No module named" in (tmp_path / "run" / "gpu-stderr.txt").read_text()
    assert "loaded on cpu" in (tmp_path / "run" / protocol.STDOUT_FILE).read_text()
    lock = DeviceLock(executor.settings.home / "locks", "0")
    lock.acquire(1.0)  # released by the dead GPU leg
    lock.release()


@WITHOUT_CUDF
def test_an_explicit_gpu_leg_does_not_fall_back(tmp_path: Path, executor: Executor) -> None:
    script = tmp_path / "pipeline.py"
    script.write_text(SCRIPT)
    leg = executor.run_leg(
        script=script,
        run_dir=tmp_path / "run",
        engine="gpu",
        data_path=None,
        mlflow_run_id=None,
        track=False,
    )
    assert not leg.ok and leg.engine == "gpu" and leg.fallback is None
    assert "No module named" in leg.failure()["message"]


def test_a_leg_that_completed_a_stage_is_not_rerun(tmp_path: Path, executor: Executor) -> None:
    script = tmp_path / "pipeline.py"
    script.write_text(SCRIPT.replace('print("loaded on", run.engine)', "pass") + "\n")
    leg = executor.run_leg(
        script=script,
        run_dir=tmp_path / "run",
        engine="cpu",
        data_path=None,
        mlflow_run_id=None,
        track=False,
    )
    assert leg.ok and completed_stages(tmp_path / "run") == ["load"]
    leg.child.returncode = 1  # as if it had died after its first stage
    leg.result = None
    assert not should_fall_back(leg)


def test_one_gpu_leg_per_device(tmp_path: Path) -> None:
    assert lock_name("0000:3B:00.0") == "gpu-0000-3b-00-0.lock"
    first = DeviceLock(tmp_path, "0000:3B:00.0")
    first.acquire(1.0)
    waited: list[str] = []
    second = DeviceLock(tmp_path, "0000:3b:00.0")
    with pytest.raises(ExecutionError, match="stayed busy") as info:
        second.acquire(0.6, on_wait=waited.append)
    assert f"pid {os.getpid()}" in info.value.message and waited == [f"pid {os.getpid()}"]
    other = DeviceLock(tmp_path, "0000:5E:00.0")  # another device is free
    other.acquire(0.5)
    other.release()
    first.release()
    second.acquire(0.5)
    assert second.held
    second.release()


class FakeNvml:
    def __init__(self, readings: list[int]) -> None:
        self.readings = readings

    def handle(self, bus_id: str) -> object:
        return object() if bus_id else None

    def used_bytes(self, handle: object) -> int:
        return self.readings.pop(0)


def test_gpu_peak_memory_is_measured_above_the_start() -> None:
    mib = 2**20
    sampler = MemorySampler("0000:3B:00.0", FakeNvml([500 * mib, 900 * mib, 2500 * mib, 700 * mib]))
    for _ in range(3):
        sampler.sample()
    assert sampler.peak_mb == 2000.0
    assert MemorySampler("", FakeNvml([])).peak_mb is None  # no device: not measured


def test_one_study_keeps_one_engine() -> None:
    from mlpilot.platform.ml.hpo.spec import StudySpec
    from mlpilot.platform.ml.hpo.worker import check_worker_engine

    spec = StudySpec(
        data_path="d.csv",
        target="y",
        task="regression",
        model="rf",
        metric="rmse",
        seed=1,
        steps=[],
    )
    check_worker_engine(spec, None)
    with pytest.raises(MlpilotError, match="asked for --engine gpu"):
        check_worker_engine(spec, "gpu")
    gpu_spec = StudySpec(**{**spec.to_attr(), "engine": "gpu"})
    with pytest.raises(MlpilotError, match="this process runs on the cpu"):
        check_worker_engine(gpu_spec, None)


def test_a_fallback_is_recorded_on_the_run() -> None:
    from types import SimpleNamespace

    from mlpilot.platform.agent.orchestrator import RunOutcome
    from mlpilot.platform.agent.recording import _record_fallback, device_tags

    tags: dict[str, str] = {}
    logger = SimpleNamespace(set_tags=tags.update)
    outcome = RunOutcome(status="RUNNING", session_id="s")
    outcome.engine = {"requested": "auto", "used": "gpu", "reason": "auto: GPU probe passed"}
    leg = SimpleNamespace(
        engine="cpu",
        fallback={
            "from": "gpu",
            "to": "cpu",
            "error": "CUDA error: cudaErrorInsufficientDriver",
            "reason": "auto: the gpu leg died before its first stage; rerun on the cpu",
        },
    )
    _record_fallback(leg, logger, outcome)
    assert outcome.engine["used"] == "cpu" and outcome.engine["fallback"]["from"] == "gpu"
    assert tags["mlpilot.engine.used"] == "cpu" and "died before" in tags["mlpilot.engine.reason"]
    assert any("cudaErrorInsufficientDriver" in note for note in outcome.notes)
    mixed = {"device": "mixed", "cpu": ["OneHotEncoder"], "gpu": ["Ridge.fit"]}
    assert device_tags({"train": mixed}) == {
        "mlpilot.device.train": "mixed (OneHotEncoder on the CPU)"
    }
