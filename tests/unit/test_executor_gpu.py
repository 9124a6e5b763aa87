"""The executor's GPU duties on a CPU machine: auto's rerun on the CPU when the GPU leg
dies before its first stage or fails with a device error at any stage, the per-device lock,
the memory sampler, the worker rules."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import mlpilot.platform.execution as execution
from mlpilot.platform.config import Settings
from mlpilot.platform.errors import ExecutionError, MlpilotError
from mlpilot.platform.execution import EngineChoice, Executor, completed_stages, fallback_reason
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
    assert fallback_reason(leg) is None
    leg.child.captured["stderr"] += (  # unless it died of the device (an abort says why)
        b"terminate called after throwing an instance of 'rmm::out_of_memory'\n"
        b"  what():  std::bad_alloc: out_of_memory: CUDA error at: "
        b"/rmm/include/rmm/mr/device/cuda_memory_resource.hpp:60: cudaErrorMemoryAllocation\n"
        b"Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n"
    )
    assert fallback_reason(leg) == "hit a device error in running"


TRAIN_SCRIPT = """
from mlpilot.platform.ml.entry import exit_process, open_pipeline

with open_pipeline(None, plan={}, seed=1, default_data=None) as run:
    with run.stage("load"):
        pass
    with run.stage("train"):
        if run.engine == "gpu":
            raise ERROR
        print("trained on", run.engine, "with the defaults of", run.prefer)
exit_process(run.exit_code)
"""

# what the GPU stack raises (see mlpilot.platform.ml.device_errors for each source)
DEVICE_ERRORS = {
    "rmm": 'MemoryError("std::bad_alloc: out_of_memory: CUDA error at: '
    '/rmm/include/rmm/mr/device/cuda_memory_resource.hpp:60: cudaErrorMemoryAllocation")',
    "libcudf": 'RuntimeError("CUDF failure at: /cudf/cpp/src/copying/gather.cu:110: '
    'CUDA error encountered at: cudaErrorIllegalAddress an illegal memory access")',
    "cupy": 'type("CUDARuntimeError", (RuntimeError,), {})("cudaErrorMemoryAllocation: '
    'out of memory")',
    "xgboost": 'type("XGBoostError", (ValueError,), {})("[10:02:11] /workspace/src/common/'
    'device_helpers.cuh:431: Memory allocation error on worker 0: cudaErrorMemoryAllocation")',
}


STAND_IN = Path(__file__).parent / "data" / "stand_in_gpu"


def run_auto_leg(executor: Executor, script: Path, run_dir: Path) -> execution.LegResult:
    """An auto GPU leg through the GPU engine's real command, with stand-in accelerators
    (``data/stand_in_gpu``: no RAPIDS here) handed to the child like the data it reads."""
    choice = EngineChoice("auto", "gpu", "auto: GPU probe passed", fallback="cpu")
    leg = executor.start_leg(
        script=script,
        run_dir=run_dir,
        engine=choice,
        data_path=None,
        mlflow_run_id=None,
        track=False,
        extra_reads=(str(STAND_IN),),
        extra_env={"PYTHONPATH": str(STAND_IN)},
    )
    return leg.finish()


@pytest.mark.parametrize("library", sorted(DEVICE_ERRORS))
def test_auto_reruns_on_the_cpu_after_a_device_error_in_train(
    tmp_path: Path, executor: Executor, library: str
) -> None:
    """A GPU leg that finished ``load`` and hit a device error in ``train`` reruns whole on
    the CPU, with the GPU leg's model defaults, and the error is kept."""
    script = tmp_path / "pipeline.py"
    script.write_text(TRAIN_SCRIPT.replace("ERROR", DEVICE_ERRORS[library]))
    leg = run_auto_leg(executor, script, tmp_path / "run")
    assert leg.ok and leg.engine == "cpu", leg.failure()
    assert leg.fallback["stage"] == "train" and leg.fallback["why"] == "hit a device error in train"
    assert "cudaError" in leg.fallback["error"]
    assert "rerun on the cpu" in leg.fallback["reason"]
    stdout = (tmp_path / "run" / protocol.STDOUT_FILE).read_text()
    assert "trained on cpu with the defaults of gpu" in stdout
    gpu_stderr = (tmp_path / "run" / "gpu-stderr.txt").read_text()
    assert "cudaError" in gpu_stderr  # the GPU leg's own output is kept beside the rerun's
    assert completed_stages(tmp_path / "run") == ["load", "train"]


def test_a_pipeline_error_in_train_is_not_rerun(tmp_path: Path, executor: Executor) -> None:
    script = tmp_path / "pipeline.py"
    script.write_text(
        TRAIN_SCRIPT.replace("ERROR", "ValueError(\"column 'sales' is not numeric\")")
    )
    leg = run_auto_leg(executor, script, tmp_path / "run")
    assert not leg.ok and leg.engine == "gpu" and leg.fallback is None
    assert leg.failure()["stage"] == "train" and "not numeric" in leg.failure()["message"]


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
            "why": "died before its first stage",
            "reason": "auto: the gpu leg died before its first stage; rerun on the cpu",
        },
    )
    _record_fallback(leg, logger, outcome)
    assert outcome.engine["used"] == "cpu" and outcome.engine["fallback"]["from"] == "gpu"
    assert tags["mlpilot.engine.used"] == "cpu" and "died before" in tags["mlpilot.engine.reason"]
    assert any("cudaErrorInsufficientDriver" in note for note in outcome.notes)
    assert tags["mlpilot.engine.fallback_error"] == "CUDA error: cudaErrorInsufficientDriver"
    mixed = {"device": "mixed", "cpu": ["OneHotEncoder"], "gpu": ["Ridge.fit"]}
    assert device_tags({"train": mixed}) == {
        "mlpilot.device.train": "mixed (OneHotEncoder on the CPU)"
    }


def test_a_rerun_after_a_device_error_says_where_it_failed() -> None:
    from types import SimpleNamespace

    from mlpilot.dashboards.queries import engine_label
    from mlpilot.platform.agent.orchestrator import RunOutcome
    from mlpilot.platform.agent.recording import _record_fallback

    tags: dict[str, str] = {}
    outcome = RunOutcome(status="RUNNING", session_id="s")
    outcome.engine = {"requested": "auto", "used": "gpu", "reason": "auto: GPU probe passed"}
    fallback = {
        "from": "gpu",
        "to": "cpu",
        "stage": "train",
        "why": "hit a device error in train",
        "error": "MemoryError: std::bad_alloc: out_of_memory: CUDA error at: rmm",
        "reason": "auto: the gpu leg hit a device error in train; rerun on the cpu",
    }
    leg = SimpleNamespace(engine="cpu", fallback=fallback)
    _record_fallback(leg, SimpleNamespace(set_tags=tags.update), outcome)
    assert outcome.notes == [
        "the GPU leg hit a device error in train (MemoryError: std::bad_alloc: out_of_memory: "
        "CUDA error at: rmm); rerun on the CPU"
    ]
    assert "device error in train" in tags["mlpilot.engine.reason"]
    assert engine_label(outcome.engine) == "cpu (rerun: the gpu leg failed)"
    assert engine_label({"used": "gpu"}) == "gpu"


@pytest.mark.parametrize(
    ("kind", "message", "expected"),
    [
        ("CUDARuntimeError", "cudaErrorMemoryAllocation: out of memory", True),
        ("OutOfMemoryError", "Out of memory allocating 1,024 bytes", True),  # cupy.cuda.memory
        ("CudaAPIError", "[2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY", True),
        ("MemoryError", "std::bad_alloc: out_of_memory: CUDA error at: /rmm/include/rmm", True),
        ("RuntimeError", "cuDF failure at: /cudf/cpp/src/io/parquet/reader.cu:10: x", True),
        ("RuntimeError", "RAFT failure at file=/raft/core/resources.hpp line=120: cusolver", True),
        ("XGBoostError", "device_helpers.cuh:431: Memory allocation error on worker 0", True),
        ("XGBoostError", "Check failed: labels are not in [0, num_class)", False),
        ("MemoryError", "", False),  # the host's: its address-space limit says so
        ("ValueError", "could not convert string to float: 'abc'", False),
        ("ChildProcessError", "the pipeline process was killed by SIGKILL without a result", False),
    ],
)
def test_device_errors_are_told_from_the_pipelines_own(
    kind: str, message: str, expected: bool
) -> None:
    from mlpilot.platform.ml.device_errors import is_device_error

    assert is_device_error(kind, message) is expected
