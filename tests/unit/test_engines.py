"""Engine commands, environments and `auto` selection, checked on the CPU."""

from __future__ import annotations

import sys

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import ExecutionError, MissingExtraError
from mlpilot.platform.execution import GpuStatus, ProbeVerdict, engine_command, resolve_engine
from mlpilot.platform.execution.commands import leg_env
from mlpilot.platform.ml import protocol

NO_GPU = GpuStatus(False, "no CUDA driver (libcuda) on this machine")
GPU = GpuStatus(True, "CUDA device available", 1, "NVIDIA H200", "0000:3B:00.0")
PASSED = ProbeVerdict(True, "GPU probe passed: NVIDIA H200, compute capability 9.0")
FAILED = ProbeVerdict(False, "GPU probe check cuml_fit failed: Ridge.fit did not run on the GPU")
NOT_INSTALLED = ProbeVerdict(
    False, "cudf/cuml are not installed: pip install 'mlpilot[gpu]'", missing_extra=True
)


def test_cpu_and_gpu_command_lines() -> None:
    assert engine_command("cpu", "pipeline.py", ["--data", "d.csv"], python="py") == [
        "py",
        "pipeline.py",
        "--data",
        "d.csv",
    ]
    assert engine_command("gpu", "pipeline.py", [], python="py") == [
        "py",
        "-m",
        "cudf.pandas",
        "-m",
        "cuml.accel",
        "pipeline.py",
    ]
    assert engine_command("cpu", "p.py", [])[0] == sys.executable


def test_leg_environments(tmp_path) -> None:
    """The exact variables each leg gets: RAPIDS' own pass through, accelerator switches
    never reach a CPU leg, and secrets never reach either."""
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    source = {
        "PATH": "/usr/bin",
        "CUDA_VISIBLE_DEVICES": "1",
        "CUDF_PANDAS_RMM_MODE": "pool",
        "RAPIDS_NO_INITIALIZE": "1",
        "RMM_LOGGING": "0",
        "CUML_ACCEL_ENABLED": "1",
        "NVIDIA_API_KEY": "secret",
        "MLPILOT_MONGO_URI": "mongodb://user:pw@host",
        "SOME_TOKEN": "x",
    }
    gpu = leg_env(settings, "gpu", source=source)
    cpu = leg_env(settings, "cpu", source=source)
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "CUDF_PANDAS_RMM_MODE",
        "RAPIDS_NO_INITIALIZE",
        "RMM_LOGGING",
    ):
        assert gpu[name] == source[name] and cpu[name] == source[name]
    assert gpu["CUML_ACCEL_LOG_LEVEL"] == "info" and gpu["CUML_ACCEL_ENABLED"] == "1"
    assert "CUML_ACCEL_ENABLED" not in cpu and "CUML_ACCEL_LOG_LEVEL" not in cpu
    for env in (gpu, cpu):
        assert not {"NVIDIA_API_KEY", "MLPILOT_MONGO_URI", "SOME_TOKEN"} & set(env)
        assert env[protocol.ENV_HOME] == str(tmp_path.resolve())
        assert float(env[protocol.ENV_LAUNCHED_AT]) > 0
    assert gpu[protocol.ENV_ENGINE_USED] == "gpu" and cpu[protocol.ENV_ENGINE_USED] == "cpu"


def test_auto_needs_a_device_before_probing() -> None:
    choice = resolve_engine("auto", device=NO_GPU, probe=PASSED)
    assert choice.used == "cpu" and "no CUDA driver" in choice.reason and choice.fallback is None


def test_auto_needs_the_probe_to_pass() -> None:
    choice = resolve_engine("auto", device=GPU, probe=FAILED)
    assert choice.used == "cpu" and "Ridge.fit did not run on the GPU" in choice.reason


def test_auto_picks_gpu_with_a_cpu_fallback() -> None:
    choice = resolve_engine("auto", device=GPU, probe=PASSED)
    assert choice.used == "gpu" and choice.fallback == "cpu" and "H200" in choice.reason
    assert choice.to_dict()["fallback"] == "cpu"


def test_explicit_gpu_has_no_fallback_and_clear_errors() -> None:
    assert resolve_engine("gpu", device=GPU, probe=PASSED).fallback is None
    with pytest.raises(ExecutionError, match="engine gpu requested, but no CUDA driver"):
        resolve_engine("gpu", device=NO_GPU)
    with pytest.raises(ExecutionError, match="cuml_fit failed"):
        resolve_engine("gpu", device=GPU, probe=FAILED)
    with pytest.raises(MissingExtraError) as info:
        resolve_engine("gpu", device=GPU, probe=NOT_INSTALLED)
    assert "pip install 'mlpilot[gpu]'" in info.value.one_line()


def test_cpu_and_compare_need_nothing() -> None:
    assert resolve_engine("cpu").used == "cpu"
    assert resolve_engine("compare").used == "compare"
    with pytest.raises(ExecutionError, match="unknown engine"):
        resolve_engine("tpu")
