"""GPU checks: run only where a CUDA device is usable and the gpu extra is installed.

They skip (saying why) elsewhere; the CPU suite covers engine selection and the exact
GPU command lines (tests/unit/test_engines.py). `make gpu-check` runs these.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from mlpilot.platform.execution import cuda_device_status, gpu_libraries_status

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def _require_gpu() -> None:
    device = cuda_device_status()
    if not device.usable:
        pytest.skip(f"no usable CUDA device: {device.reason}")
    ok, why = gpu_libraries_status()
    if not ok:
        pytest.skip(why)


def test_auto_picks_the_gpu() -> None:
    from mlpilot.platform.execution import resolve_engine

    assert resolve_engine("auto").used == "gpu"


def test_small_pipeline_runs_end_to_end_on_the_gpu(tmp_path: Path, sales_csv: Path) -> None:
    env = {
        "MLPILOT_HOME": str(tmp_path / "home"),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
    }
    done = run_cli(
        "run",
        "train xgboost to predict sales",
        "--data",
        str(sales_csv),
        "--engine",
        "gpu",
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["engine"]["used"] == "gpu" and outcome["metrics"]["test_r2"] > 0.5


def test_compare_reports_real_speedups(tmp_path: Path, sales_csv: Path) -> None:
    env = {
        "MLPILOT_HOME": str(tmp_path / "home"),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
    }
    done = run_cli(
        "run",
        "compare cpu and gpu speed for a random forest on sales",
        "--data",
        str(sales_csv),
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads(done.stdout)["metrics"]
    assert metrics["speedup_train"] > 0 and metrics["speedup_total"] > 0
