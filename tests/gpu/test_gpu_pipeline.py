"""GPU checks: where a stage really ran, on a machine with a CUDA device (`make gpu-check`).

They skip, saying why, only where the CUDA driver reports no usable device. With a
device, a missing or broken gpu extra fails them: that is what they are for. The CPU
suite covers the same logic with recorded logs and fakes (tests/unit/test_devices.py,
test_gpu_probe.py, test_compare_stats.py, test_engines.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from mlpilot.platform.execution import cuda_device_status

pytestmark = pytest.mark.gpu

#: family → (prompt word, the estimator call cuml.accel or XGBoost must run on the GPU)
FAMILIES = {
    "rf": ("random forest", "RandomForestRegressor.fit"),
    "linear": ("linear model", "Ridge.fit"),
    "knn": ("k-nearest neighbours", "KNeighborsRegressor.fit"),
    "svm": ("support vector machine", "SVR.fit"),
    "xgb": ("xgboost", "XGBRegressor.fit"),
}


@pytest.fixture(scope="module", autouse=True)
def _require_gpu() -> None:
    device = cuda_device_status()
    if not device.usable:
        pytest.skip(f"no usable CUDA device: {device.reason}")


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "MLPILOT_HOME": str(tmp_path / "home"),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
    }


def _artifact(tmp_path: Path, run_id: str, name: str) -> Any:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")
    return json.loads(Path(client.download_artifacts(run_id, name, str(tmp_path))).read_text())


def test_the_probe_passes_here(tmp_path: Path) -> None:
    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution import gpu_probe, resolve_engine

    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    verdict = gpu_probe(settings, refresh=True)
    print(f"probe: {verdict.reason}")
    assert verdict.usable, verdict.reason
    assert verdict.xgboost_gpu, verdict.checks.get("xgboost")
    assert resolve_engine("auto", settings=settings).used == "gpu"


def test_a_probe_that_must_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cudf.pandas in its fallback mode runs pandas only: the probe must see it."""
    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution.probe import run_probe

    monkeypatch.setenv("CUDF_PANDAS_FALLBACK_MODE", "1")
    verdict = run_probe(Settings.from_env({"MLPILOT_HOME": str(tmp_path)}))
    assert not verdict.usable
    assert "check accelerators failed" in verdict.reason and "cudf.pandas" in verdict.reason


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_device_per_stage(tmp_path: Path, sales_csv: Path, family: str) -> None:
    word, call = FAMILIES[family]
    done = run_cli(
        "run",
        f"train a {word} to predict sales",
        "--data",
        str(sales_csv),
        "--engine",
        "gpu",
        "--json",
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["engine"]["used"] == "gpu"
    devices = _artifact(tmp_path, outcome["run_id"], "timings.json")["devices"]
    print(family, {stage: record["device"] for stage, record in devices.items()})
    train = devices["train"]
    assert call in train["gpu"] and call not in train["cpu"], train
    assert train["device"] in ("gpu", "mixed")
    predict = call.replace(".fit", ".predict")
    assert predict in devices["score"]["gpu"], devices["score"]
    assert outcome["metrics"]["test_r2"] > 0.3


def test_compare_reports_speedups_only_where_the_gpu_ran(tmp_path: Path, sales_csv: Path) -> None:
    done = run_cli(
        "run",
        "compare cpu and gpu speed for a random forest on sales",
        "--data",
        str(sales_csv),
        "--repeat",
        "2",
        "--json",
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    bench = _artifact(tmp_path, outcome["run_id"], "benchmark.json")
    print(json.dumps(bench["stages"], indent=1))
    assert bench["gpu"]["available"], bench["gpu"]
    assert bench["method"]["repeat"] == 2 and bench["gpu"]["peak_memory_mb"] is not None
    for stage, row in bench["stages"].items():
        metric = outcome["metrics"].get(f"speedup_{stage}")
        if row["speedup"] is None:
            assert row["refused"] or row["kind"] == "mostly_cpu", stage
            assert metric is None, stage
        else:
            assert metric == row["speedup"] and row["refused"] is None
            assert stage in ("total", "wall") or row["gpu_share"] >= 0.5, row
    # the headline rows exist on a real GPU: the engines and the model's training
    assert bench["stages"]["total"]["speedup"] is not None
    assert bench["stages"]["train"]["ratio"] is not None
    assert bench["stages"]["train"]["gpu_s"] is not None
