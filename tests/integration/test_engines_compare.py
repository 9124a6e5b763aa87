"""`--engine compare` on a machine without a GPU: the GPU leg is reported, never estimated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from mlpilot.platform.execution import cuda_device_status

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_compare_without_gpu_reports_the_leg_unavailable(tmp_path: Path, sales_csv: Path) -> None:
    if cuda_device_status().usable:
        pytest.skip("this machine has a GPU: the GPU leg runs (covered by tests/gpu)")
    home = tmp_path / "home"
    env = {
        "MLPILOT_HOME": str(home),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
    }
    done = run_cli(
        "run",
        "GPU和CPU的加速比是多少？用随机森林测一下",
        "--data",
        str(sales_csv),
        "--target",
        "sales",
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["engine"]["used"] == "compare"
    assert not any(k.startswith("speedup_") for k in outcome["metrics"])
    assert outcome["metrics"]["time_train_s"] > 0

    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    run = MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(outcome["run_id"])
    assert run.data.tags["mlpilot.compare.gpu"].startswith("unavailable")
    assert not any(k.startswith("speedup_") for k in run.data.metrics)
    benchmarks = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).find_benchmarks(
        {"run_id": outcome["run_id"]}
    )
    assert len(benchmarks) == 1
    bench = benchmarks[0]
    assert bench["gpu"]["available"] is False and "CUDA" in bench["gpu"]["reason"]
    assert (
        bench["stages"]["train"]["cpu_s"] > 0
        and bench["stages"]["train"]["gpu_s"] is None
        and bench["stages"]["train"]["speedup"] is None
    )
    assert bench["hardware"]["cpu_count"] >= 1
    _assert_devices_and_refusals(bench, run, home, tmp_path, outcome["run_id"])


def _assert_devices_and_refusals(
    bench: dict, run: object, home: Path, tmp_path: Path, run_id: str
) -> None:
    """Every stage records the device it ran on, and why it has no speedup."""
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    tags = run.data.tags  # type: ignore[attr-defined]
    for stage, row in bench["stages"].items():
        assert row["cpu_device"] == "cpu", stage
        assert row["refused"].startswith("GPU leg unavailable: no CUDA driver"), stage
        assert tags[f"mlpilot.speedup.{stage}"].startswith("refused: GPU leg unavailable")
    assert {"load", "train", "total", "wall"} <= set(bench["stages"])
    assert tags["mlpilot.device.train"] == "cpu"
    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    timings = json.loads(
        Path(client.download_artifacts(run_id, "timings.json", str(tmp_path))).read_text()
    )
    assert timings["devices"]["train"]["device"] == "cpu" and timings["wall_s"] > 0
    assert timings["accelerators"] == {"cudf.pandas": False, "cuml.accel": False}
    store = connect(Settings.from_env({"MLPILOT_HOME": str(home)}))
    assert store.get_run(run_id)["devices"]["load"]["device"] == "cpu"
