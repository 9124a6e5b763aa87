"""The engine comparison's statistics and protocol, with recorded (fake) leg results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlpilot.platform.agent import compare as C
from mlpilot.platform.config import Settings
from mlpilot.platform.execution import LegResult
from mlpilot.platform.execution.sandbox import ChildResult
from mlpilot.platform.ml.protocol import PipelineResult

GPU = {"device": "gpu", "gpu": ["RandomForestRegressor.fit"], "cpu": [], "reasons": {}}
MIXED = {
    "device": "mixed",
    "gpu": ["RandomForestRegressor.fit"],
    "cpu": ["OneHotEncoder"],
    "reasons": {"OneHotEncoder": "not accelerated by cuml.accel"},
}
CPU = {"device": "cpu", "gpu": [], "cpu": [], "reasons": {}}


def leg(
    engine: str,
    timings: dict[str, float],
    devices: dict[str, Any] | None = None,
    metrics: dict[str, float] | None = None,
    wall: float = 10.0,
    ok: bool = True,
) -> LegResult:
    result = PipelineResult(
        status="succeeded" if ok else "failed",
        engine=engine,
        timings=dict(timings),
        devices=dict(devices or {}),
        metrics=dict(metrics or {"test_r2": 0.9}),
        error=None if ok else {"type": "X", "message": "boom", "stage": "train"},
    )
    return LegResult(engine, ChildResult(0 if ok else 1, wall), result, Path("."))


def test_best_timings_take_each_stages_minimum() -> None:
    runs = [{"load": 2.0, "train": 5.0}, {"load": 1.5, "train": 6.0}, {"train": 4.5}]
    assert C.best_timings(runs) == {"load": 1.5, "train": 4.5}


def test_metrics_must_agree_within_the_tolerance() -> None:
    ok, why = C.metrics_agree({"test_r2": 0.90}, {"test_r2": 0.89}, 0.02)
    assert ok and "within 2.0%" in why
    ok, why = C.metrics_agree({"test_r2": 0.90}, {"test_r2": 0.85}, 0.02)
    assert not ok and "test_r2: CPU 0.9, GPU 0.85" in why
    # relative for large values: 2 % of an RMSE of 300 is 6
    assert C.metrics_agree({"test_rmse": 300.0}, {"test_rmse": 305.0}, 0.02)[0]
    assert not C.metrics_agree({"test_rmse": 300.0}, {"test_rmse": 310.0}, 0.02)[0]
    assert not C.metrics_agree({"cv_r2": 0.9}, {"cv_r2": 0.9}, 0.02)[0]  # no test metric


def test_without_a_gpu_leg_every_speedup_is_refused() -> None:
    cpu = C.LegSummary("cpu", leg("cpu", {"load": 1.0, "train": 4.0, "total": 6.0}, {"load": CPU}))
    cpu.runs = [cpu.tracked]
    rows = C.speedup_rows(cpu, None, "no CUDA driver (libcuda) on this machine", (False, ""))
    assert set(rows) == {"load", "train", "total", "wall"}
    for row in rows.values():
        assert row["speedup"] is None and row["gpu_s"] is None
        assert row["refused"] == "GPU leg unavailable: no CUDA driver (libcuda) on this machine"
    assert rows["load"]["cpu_device"] == "cpu"


def _pair(gpu_devices: dict[str, Any], gpu_metrics: dict[str, float] | None = None):
    timings = {"load": 2.0, "clean": 1.0, "train": 8.0, "total": 12.0}
    cpu_leg = leg("cpu", timings, {s: CPU for s in ("load", "clean", "train")}, wall=15.0)
    gpu_leg = leg(
        "gpu",
        {"load": 1.0, "clean": 1.0, "train": 1.0, "total": 4.0},
        gpu_devices,
        gpu_metrics,
        wall=9.0,
    )
    return C.LegSummary("cpu", cpu_leg, [cpu_leg]), C.LegSummary("gpu", gpu_leg, [gpu_leg])


def test_speedups_only_for_stages_that_ran_on_the_gpu() -> None:
    cpu, gpu = _pair({"load": GPU, "clean": CPU, "train": MIXED})
    agree = C.metrics_agree(cpu.metrics, gpu.metrics, 0.02)
    rows = C.speedup_rows(cpu, gpu, "ran", agree)
    assert rows["load"]["speedup"] == 2.0 and rows["load"]["refused"] is None
    assert rows["clean"]["speedup"] is None
    assert rows["clean"]["refused"] == "ran cpu in the GPU leg, not on the GPU"
    assert rows["train"]["speedup"] is None
    assert "mixed (OneHotEncoder on the CPU)" in rows["train"]["refused"]
    # the engines end to end, since one stage really ran on the GPU
    assert rows["total"]["speedup"] == 3.0 and rows["wall"]["speedup"] == round(15 / 9, 4)
    assert rows["total"]["gpu_device"] == "mixed (1 of 3 stages on the GPU)"


def test_engine_rows_are_reported_whenever_both_legs_ran_and_stages_need_agreement() -> None:
    cpu, gpu = _pair({"load": CPU, "clean": CPU, "train": CPU})
    rows = C.speedup_rows(cpu, gpu, "ran", (True, "agree"))
    assert all(rows[s]["speedup"] is None for s in ("load", "clean", "train"))
    assert rows["total"]["speedup"] == 3.0 and rows["total"]["kind"] == C.KIND_ENGINES
    cpu, gpu = _pair({"load": GPU, "clean": GPU, "train": GPU}, {"test_r2": 0.5})
    agree = C.metrics_agree(cpu.metrics, gpu.metrics, 0.02)
    rows = C.speedup_rows(cpu, gpu, "ran", agree)
    assert rows["train"]["speedup"] is None
    assert rows["train"]["refused"].startswith("the legs' test metrics differ by")
    assert rows["wall"]["speedup"] is not None
    assert rows["wall"]["note"].startswith("the legs' test metrics differ by")


def _timed(share: float, imputer_s: float) -> dict:
    """A GPU-leg record as the timed recorder writes it (train took 1.0 s in ``_pair``)."""
    return {
        **MIXED,
        "cpu": ["SimpleImputer"],
        "gpu_s": share,
        "gpu_share": share,
        "gpu_calls_s": {"RandomForestRegressor.fit": share},
        "cpu_calls_s": {"SimpleImputer": imputer_s},
    }


def test_a_mixed_stage_gets_its_speedup_by_its_gpu_share() -> None:
    cpu, gpu = _pair({"load": CPU, "clean": CPU, "train": _timed(0.96, 0.02)})
    rows = C.speedup_rows(cpu, gpu, "ran", (True, "agree"), share_min=0.5)
    train = rows["train"]
    assert train["speedup"] == 8.0 and train["kind"] == C.KIND_GPU and train["gpu_share"] == 0.96
    assert C.describe_row("train", train) == (
        "train 8.0×, 96% of its time on the GPU; SimpleImputer on the CPU 20 ms"
    )
    cpu, gpu = _pair({"load": CPU, "clean": CPU, "train": _timed(0.2, 0.7)})
    train = C.speedup_rows(cpu, gpu, "ran", (True, "agree"), share_min=0.5)["train"]
    assert train["speedup"] is None and train["ratio"] == 8.0 and train["refused"] is None
    assert train["kind"] == C.KIND_MOSTLY_CPU and "20% of its time on the GPU" in train["note"]
    assert "mostly CPU" in C.describe_row("train", train)


class FakeLogger:
    run_id = "parent"

    def __init__(self) -> None:
        self.children: list[Any] = []

    def child(self, name: str, tags: dict[str, str]) -> Any:
        logger = FakeLogger()
        logger.run_id, logger.ended, logger.tags = "gpu-child", None, {}
        logger.set_tags = logger.tags.update
        logger.end = lambda status: setattr(logger, "ended", status)
        self.children.append(logger)
        return logger


class FakeExecutor:
    """Records every leg it is asked to run; the GPU fails from ``gpu_fails_at`` on."""

    def __init__(self, tmp: Path, repeat: int, gpu_fails_at: int | None = None) -> None:
        self.settings = Settings.from_env({"MLPILOT_HOME": str(tmp)}).with_overrides(
            compare_repeat=repeat
        )
        self.calls: list[dict[str, Any]] = []
        self.gpu_fails_at = gpu_fails_at

    def run_leg(self, **kw: Any) -> LegResult:
        self.calls.append(kw)
        gpu_runs = sum(1 for c in self.calls if c["engine"] == "gpu")
        ok = kw["engine"] == "cpu" or self.gpu_fails_at is None or gpu_runs < self.gpu_fails_at
        devices = {"train": GPU if kw["engine"] == "gpu" else CPU}
        seconds = 1.0 + len(self.calls) / 100  # later runs slower: best = the first
        return leg(kw["engine"], {"train": seconds}, devices, ok=ok)


def test_warm_up_then_alternating_rounds_the_first_tracked(tmp_path: Path) -> None:
    executor = FakeExecutor(tmp_path, repeat=3)
    logger = FakeLogger()
    measured = C._measure(executor, Path("p.py"), tmp_path, "d.csv", logger, None)
    order = [(c["engine"], c["track"]) for c in executor.calls]
    assert order == [
        ("cpu", False),
        ("gpu", False),  # the warm-up
        ("cpu", True),
        ("gpu", True),  # round 1: tracked, CPU first
        ("gpu", False),
        ("cpu", False),  # round 2: GPU first
        ("cpu", False),
        ("gpu", False),
    ]
    assert all(c["prefer"] == "gpu" for c in executor.calls)  # the same model on both legs
    assert executor.calls[2]["mlflow_run_id"] == "parent"
    assert executor.calls[3]["mlflow_run_id"] == "gpu-child"
    assert logger.children[0].ended == "FINISHED"
    assert len(measured.cpu.runs) == 3 and len(measured.gpu.runs) == 3
    assert measured.cpu.timings["train"] == 1.03 and measured.gpu_reason == "ran"


def test_a_gpu_leg_that_fails_is_reported_never_estimated(tmp_path: Path) -> None:
    executor = FakeExecutor(tmp_path, repeat=3, gpu_fails_at=3)
    measured = C._measure(executor, Path("p.py"), tmp_path, "d.csv", FakeLogger(), None)
    assert measured.gpu is None and measured.gpu_reason.startswith("the GPU leg failed: boom")
    assert len(measured.cpu.runs) == 3
    warm = FakeExecutor(tmp_path, repeat=2, gpu_fails_at=1)
    measured = C._measure(warm, Path("p.py"), tmp_path, "d.csv", FakeLogger(), None)
    assert measured.gpu is None and "warm-up" in measured.gpu_reason
    assert [c["engine"] for c in warm.calls].count("gpu") == 1
