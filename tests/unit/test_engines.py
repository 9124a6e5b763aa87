"""Engine commands and `auto` selection, checked on the CPU."""

from __future__ import annotations

import sys

import pytest

from mlpilot.platform.errors import ExecutionError, MissingExtraError
from mlpilot.platform.execution import GpuStatus, engine_command, resolve_engine

NO_GPU = GpuStatus(False, "no CUDA driver (libcuda) on this machine")
GPU = GpuStatus(True, "CUDA device available", 1, "NVIDIA H200")


def test_cpu_and_gpu_command_lines() -> None:
    assert engine_command("cpu", "pipeline.py", ["--data", "d.csv"], python="py") == [
        "py",
        "pipeline.py",
        "--data",
        "d.csv",
    ]
    assert engine_command("gpu", "pipeline.py", ["--data", "d.csv"], python="py") == [
        "py",
        "-m",
        "cudf.pandas",
        "-m",
        "cuml.accel",
        "pipeline.py",
        "--data",
        "d.csv",
    ]
    assert engine_command("cpu", "p.py", [])[0] == sys.executable


def test_auto_needs_a_device_not_just_libraries() -> None:
    choice = resolve_engine("auto", device=NO_GPU, libraries=(True, "cudf/cuml 26.10"))
    assert choice.used == "cpu" and "no CUDA driver" in choice.reason


def test_auto_needs_the_libraries_too() -> None:
    choice = resolve_engine(
        "auto", device=GPU, libraries=(False, "cudf/cuml do not import; install the gpu extra")
    )
    assert choice.used == "cpu" and "do not import" in choice.reason


def test_auto_picks_gpu_when_both_are_there() -> None:
    choice = resolve_engine("auto", device=GPU, libraries=(True, "cudf/cuml 26.10 26.10"))
    assert choice.used == "gpu" and "H200" in choice.reason


def test_explicit_gpu_without_device_is_a_clear_error() -> None:
    with pytest.raises(ExecutionError, match="engine gpu requested, but no CUDA driver"):
        resolve_engine("gpu", device=NO_GPU)
    with pytest.raises(MissingExtraError) as info:
        resolve_engine(
            "gpu", device=GPU, libraries=(False, "cudf/cuml do not import; install the gpu extra")
        )
    assert "pip install 'mlpilot[gpu]'" in info.value.one_line()


def test_cpu_and_compare_need_nothing() -> None:
    assert resolve_engine("cpu").used == "cpu"
    assert resolve_engine("compare").used == "compare"
