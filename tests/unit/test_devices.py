"""Where each stage ran: the accelerator-log parser, the evidence rules, the engine checks.

No GPU here: cuml.accel's lines come from recorded logs (tests/unit/data/accel_logs), the
proxies are faked, and XGBoost's CPU fallback is the real one on this machine.
"""

from __future__ import annotations

import io
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlpilot.platform.errors import ExecutionError
from mlpilot.platform.execution import completed_stages
from mlpilot.platform.ml import devices, protocol
from mlpilot.platform.ml.context import PipelineRun, check_engine
from mlpilot.platform.ml.devices import (
    AccelCall,
    StageDevices,
    booster_device,
    describe_device,
    model_leaves,
    parse_accel_log,
)
from mlpilot.platform.ml.protocol import PipelineEvent, PipelineResult

LOGS = Path(__file__).parent / "data" / "accel_logs"


def _log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def test_parser_reads_cumls_documented_output() -> None:
    calls = parse_accel_log(_log("cuml_docs_ridge.log"))
    assert calls == [
        AccelCall("Ridge.fit", "gpu"),
        AccelCall("Ridge.predict", "gpu"),
        AccelCall("Ridge.fit", "cpu", "`positive=True` is not supported"),
        AccelCall("Ridge.predict", "cpu", ""),
    ]


def test_parser_carries_a_parameter_sync_fallback_to_the_next_cpu_call() -> None:
    calls = parse_accel_log(_log("cuml_tests_params_sync.log"))
    assert calls[0] == AccelCall("Ridge.fit", "gpu")
    assert calls[1] == AccelCall("Ridge.predict", "cpu", "`positive=True` is not supported")
    assert len(calls) == 2  # the DEBUG sync line is no call


def test_parser_on_a_mixed_gpu_leg() -> None:
    calls = parse_accel_log(_log("gpu_leg_mixed.log") + _log("cuml_tests_svc_multiclass.log"))
    on_cpu = {c.call: c.reason for c in calls if c.device == "cpu"}
    on_gpu = {c.call for c in calls if c.device == "gpu"}
    assert on_cpu["RandomForestClassifier.fit"] == (
        "`class_weight='balanced_subsample'` is not supported"
    )
    assert on_cpu["KNeighborsRegressor.fit"] == "Only `weights='uniform'` is supported"
    assert on_cpu["SVC.fit"] in (
        "`probability=True` is not supported",
        "Multiclass `y` is not supported",
    )
    assert on_gpu == {
        "LogisticRegression.fit",
        "LogisticRegression.predict_proba",
        "SVR.fit",
        "SVR.predict",
    }
    assert not parse_accel_log(_log("xgboost_cuda_without_gpu.log"))


def test_stage_devices_from_the_log_tap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines printed inside a stage count for that stage only; stdout still gets them."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    collector = StageDevices("gpu")
    collector.start()
    try:
        collector.stage_started("load")
        print("reading data")
        load = collector.stage_ended("load")
        collector.stage_started("train")
        print("[cuml.accel] `SVR.fit` ran on GPU")
        gpu_only = collector.stage_ended("train")
        collector.stage_started("evaluate")
        sys.stdout.write(_log("gpu_leg_mixed.log"))
        mixed = collector.stage_ended("evaluate")
    finally:
        collector.stop()
    assert sys.stdout is out and "`SVR.fit` ran on GPU" in out.getvalue()
    assert {k: load[k] for k in ("device", "gpu", "cpu", "reasons")} == {
        "device": "cpu",
        "gpu": [],
        "cpu": [],
        "reasons": {},
    }
    assert load["gpu_share"] is None  # no cuml.accel profile here: nothing timed
    assert gpu_only["device"] == "gpu" and gpu_only["gpu"] == ["SVR.fit"]
    assert mixed["device"] == "mixed" and "RandomForestClassifier.fit" in mixed["cpu"]
    assert describe_device(mixed).startswith("mixed (KNeighborsRegressor.fit, ")
    assert describe_device(None) == "unmeasured"


def _fitted_pipeline(tmp_path: Path, family: str):
    """A model fitted by the real steps on a small table with a categorical column."""
    from mlpilot.platform.ml import steps
    from mlpilot.tracking.run_logger import NullRunLogger

    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "colour": rng.choice(["red", "blue", "green"], size=n),
            "y": rng.normal(size=n),
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    run = PipelineRun(
        plan={}, seed=1, data_path=str(path), run_dir=tmp_path / family, logger=NullRunLogger()
    )
    (tmp_path / family).mkdir()
    with run:
        steps.load_data(run, str(path), target="y")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            steps.train_model(run, model=family, params={"n_estimators": 5})
    return run.model.pipeline


def test_leaves_that_are_not_proxies_ran_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the GPU engine the encoders and imputers are no cuml.accel proxies: the stage
    is mixed even when the model itself ran on the GPU."""
    pipeline = _fitted_pipeline(tmp_path, "rf")
    leaves = {type(leaf).__name__ for leaf in model_leaves(pipeline)}
    assert "RandomForestRegressor" in leaves and "Pipeline" not in leaves
    monkeypatch.setattr(
        devices, "_is_proxy", lambda est: type(est).__name__ == "RandomForestRegressor"
    )
    collector = StageDevices("gpu")
    collector.stage_started("train")
    collector.on_line("[cuml.accel] `RandomForestRegressor.fit` ran on GPU")
    collector.observe(pipeline)
    record = collector.stage_ended("train")
    assert record["device"] == "mixed" and record["gpu"] == ["RandomForestRegressor.fit"]
    assert "RandomForestRegressor" not in record["cpu"] and record["cpu"]
    assert all(record["reasons"][name] == devices.NOT_PROXIED for name in record["cpu"])


def test_xgboost_that_found_no_gpu_is_recorded_on_the_cpu(tmp_path: Path) -> None:
    """The real fallback: device="cuda" on this machine trains on the CPU, and says so
    only in a warning; the booster's configuration is what the stage records."""
    pipeline = _fitted_pipeline(tmp_path, "xgb")
    model = pipeline.named_steps["model"]
    assert model.get_params()["device"] == "cpu"  # built for the CPU engine
    from xgboost import XGBRegressor

    X = np.random.default_rng(1).random((64, 3))
    cuda = XGBRegressor(n_estimators=2, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cuda.fit(X, X[:, 0])
    assert booster_device(cuda) == "cpu"
    assert booster_device(XGBRegressor()) is None  # not fitted: no evidence
    collector = StageDevices("gpu")
    collector.stage_started("train")
    collector.observe(cuda)
    record = collector.stage_ended("train")
    assert record["device"] == "cpu" and record["cpu"] == ["XGBRegressor.fit"]
    assert "booster ran on the CPU" in record["reasons"]["XGBRegressor.fit"]


def test_pandas_fallbacks_are_counted_through_cudf_pandas_hooks(monkeypatch) -> None:
    proxy = types.ModuleType("cudf.pandas.fast_slow_proxy")
    proxy._fast_function_call = lambda: None
    proxy._slow_function_call = lambda: None
    package = types.ModuleType("cudf.pandas")
    package.fast_slow_proxy = proxy
    monkeypatch.setitem(sys.modules, "cudf", types.ModuleType("cudf"))
    monkeypatch.setitem(sys.modules, "cudf.pandas", package)
    monkeypatch.setitem(sys.modules, "cudf.pandas.fast_slow_proxy", proxy)
    collector = StageDevices("gpu")
    assert collector._pandas.install()
    collector.stage_started("clean")
    proxy._fast_function_call()
    proxy._fast_function_call()
    proxy._slow_function_call()
    record = collector.stage_ended("clean")
    assert record["device"] == "mixed"
    assert record["gpu"] == [devices.PANDAS_GPU] and record["cpu"] == [devices.PANDAS_CPU]
    assert record["reasons"][devices.PANDAS_CPU] == "1 pandas call(s) fell back"


def test_a_cpu_run_records_cpu_per_stage_in_results_and_events(tmp_path: Path) -> None:
    run = PipelineRun(plan={}, seed=1, data_path=None, run_dir=tmp_path)
    with run:
        with run.stage("load"):
            pass
        with run.stage("train"):
            pass
    result = PipelineResult.read(tmp_path)
    assert result is not None and result.ok
    assert {s: r["device"] for s, r in result.devices.items()} == {"load": "cpu", "train": "cpu"}
    assert result.accelerators == {"cudf.pandas": False, "cuml.accel": False}
    ends = [
        PipelineEvent.from_json(line)
        for line in (tmp_path / protocol.EVENTS_FILE).read_text().splitlines()
    ]
    assert [e.device for e in ends if e.type == "stage_end"] == ["cpu", "cpu"]
    assert completed_stages(tmp_path) == ["load", "train"]


def test_a_gpu_run_without_its_accelerators_fails_before_any_stage(tmp_path: Path) -> None:
    """The label "gpu" is not enough: without cudf.pandas and cuml.accel the first stage
    fails, no stage completes (so auto may rerun on the CPU), and the result says why."""
    run = PipelineRun(plan={}, seed=1, data_path=None, run_dir=tmp_path, engine="gpu")
    with run, run.stage("load"):
        raise AssertionError("the stage body must not run")
    result = PipelineResult.read(tmp_path)
    assert result is not None and not result.ok
    assert (
        result.error["stage"] == "load"
        and "without cudf.pandas and cuml.accel" in (result.error["message"])
    )
    assert completed_stages(tmp_path) == []


def test_a_cpu_leg_with_cuml_accel_on_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    accel = types.ModuleType("cuml.accel")
    accel.enabled = lambda: True
    monkeypatch.setitem(sys.modules, "cuml.accel", accel)
    with pytest.raises(ExecutionError, match=r"CPU engine runs with cuml\.accel active"):
        check_engine("cpu")
    assert devices.process_engine() == "gpu"
    monkeypatch.setattr(accel, "enabled", lambda: False)
    assert check_engine("cpu") == {"cudf.pandas": False, "cuml.accel": False}


def test_gpu_defaults_prefer_what_cuml_accelerates() -> None:
    from mlpilot.platform.ml.hpo.spaces import auto_families
    from mlpilot.platform.ml.modeling import make_estimator, resolve_family

    assert resolve_family("auto") == "hgb" and resolve_family("auto", "gpu") == "xgb"
    forest = make_estimator("rf", "classification", imbalanced=True, prefer="gpu")
    assert forest.class_weight == "balanced"
    assert make_estimator("rf", "classification", imbalanced=True).class_weight == (
        "balanced_subsample"
    )
    assert make_estimator("knn", "regression", prefer="gpu").weights == "uniform"
    assert make_estimator("knn", "regression").weights == "distance"
    assert make_estimator("xgb", "regression", device="gpu").get_params()["device"] == "cuda"
    assert not {"hgb", "lgbm"} & set(auto_families("gpu"))


class _Stats:
    def __init__(self, **fields: object) -> None:
        self.gpu_calls = int(fields["gpu_calls"])  # type: ignore[arg-type]
        self.gpu_time = float(fields["gpu_time"])  # type: ignore[arg-type]
        self.cpu_calls = int(fields["cpu_calls"])  # type: ignore[arg-type]
        self.cpu_time = float(fields["cpu_time"])  # type: ignore[arg-type]
        self.fallback_reasons = set(fields["fallback_reasons"])  # type: ignore[call-overload]


def _fake_profile(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """``cuml.accel.profile(quiet=True)`` yielding results the test fills in."""
    import contextlib

    results = types.SimpleNamespace(method_calls={})

    @contextlib.contextmanager
    def profile(quiet: bool = False):
        assert quiet
        yield results

    accel = types.ModuleType("cuml.accel")
    accel.profile = profile  # type: ignore[attr-defined]
    cuml = types.ModuleType("cuml")
    cuml.accel = accel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuml", cuml)
    monkeypatch.setitem(sys.modules, "cuml.accel", accel)
    monkeypatch.setattr(devices, "set_accel_log_level", lambda level="info": True)
    return results


def test_a_mixed_stage_gets_a_gpu_share_from_cuml_accels_profile(monkeypatch) -> None:
    """The recorder reads ``cuml.accel.profile(quiet=True)``'s results (a fixture composed
    from cuML's profilers.py) and times the leaves that are not proxies."""
    import json

    from sklearn.impute import SimpleImputer

    fixture = json.loads(
        (Path(__file__).parent / "data/accel_profiles/train_mixed.json").read_text()
    )
    results = _fake_profile(monkeypatch)
    collector = StageDevices("gpu")
    collector.start()
    try:
        assert collector.timed
        collector.stage_started("train")
        imputer = SimpleImputer()
        collector.observe(imputer)
        imputer.fit(np.ones((20, 2)))
        for name, stats in fixture["method_calls"].items():
            results.method_calls[name] = _Stats(**stats)
        record = collector.stage_ended("train", 1.0)
    finally:
        collector.stop()
    assert record["device"] == "mixed"
    assert record["gpu_s"] == 0.95 and record["gpu_share"] == 0.95
    assert record["gpu_calls_s"]["RandomForestRegressor.fit"] == 0.9
    assert "SimpleImputer" in record["cpu_calls_s"]
    assert record["cpu_calls_s"]["RandomForestClassifier.fit"] == 0.3
    assert "balanced_subsample" in record["reasons"]["RandomForestClassifier.fit"]
    import pickle

    assert pickle.loads(pickle.dumps(imputer)).statistics_.tolist() == [1.0, 1.0]


def test_xgboost_predictions_are_recorded_with_their_device(tmp_path: Path) -> None:
    pipeline = _fitted_pipeline(tmp_path, "xgb")
    collector = StageDevices("gpu")
    collector.start()
    try:
        collector.stage_started("score")
        collector.observe(pipeline)
        pipeline.predict(pipeline_input(pipeline))
        record = collector.stage_ended("score", 1.0)
    finally:
        collector.stop()
    assert "XGBRegressor.predict" in record["cpu"], record  # this machine's booster: the CPU
    assert record["cpu_calls_s"]["XGBRegressor.predict"] >= 0.0
    assert "booster ran on the CPU" in record["reasons"]["XGBRegressor.predict"]


def pipeline_input(pipeline) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame({"x": rng.normal(size=10), "colour": ["red"] * 10})


def test_a_worker_trial_sends_where_it_trained_and_the_tune_stage_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trial scored in ``mlpilot worker`` or a Dask worker has no stages: its model says
    where it trained (a cuml.accel proxy keeps its GPU model in ``_gpu``, None after a
    fallback), the record rides on the trial, and the parent's open ``tune`` stage takes
    its calls (not a share: the worker's seconds are not the stage's)."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from mlpilot.platform.ml import devices

    class OnGpu(Ridge):  # stands in for a proxy that trained on the device
        _gpu = object()

    class FellBack(StandardScaler):  # a proxy whose call fell back
        _gpu = None

    model = make_pipeline(FellBack(), OnGpu())
    assert devices.fitted_evidence(model) is None  # off the GPU engine: nothing to send
    monkeypatch.setattr(devices, "process_engine", lambda: "gpu")
    monkeypatch.setattr(devices, "_is_proxy", lambda leaf: isinstance(leaf, (OnGpu, FellBack)))
    record = devices.fitted_evidence(model)
    assert record["device"] == "mixed"
    assert record["gpu"] == ["OnGpu.fit"] and record["cpu"] == ["FellBack.fit"]
    assert record["reasons"]["FellBack.fit"] == devices.FELL_BACK
    collector = StageDevices("gpu")
    collector.start()
    try:
        assert devices.fitted_evidence(model) is None  # in a pipeline its stages measure
        collector.stage_started("tune")
        devices.absorb_evidence(record)
        devices.absorb_evidence("not a record")  # a worker's attribute is its own: ignored
        devices.absorb_evidence({"gpu": "XGBRegressor.fit", "cpu": {"a": 1}})  # not lists
        tune = collector.stage_ended("tune", seconds=4.0)
    finally:
        collector.stop()
    assert tune["device"] == "mixed" and tune["gpu"] == ["OnGpu.fit"]
    assert tune["cpu"] == ["FellBack.fit"]
    assert tune["reasons"]["FellBack.fit"] == devices.FELL_BACK
    assert tune["gpu_calls_s"] == {}  # devices, never seconds, from another process


@pytest.mark.parametrize("version", ["25.08", "26.02", "26.08"])
def test_each_cuml_release_gives_the_train_stage_its_share_and_its_kind(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """One pipeline (an imbalanced forest with the GPU defaults) as each release logs and
    profiles it (fixtures composed from that tag's cuML sources): through the recorder and
    the comparison, 25.08 and 26.02 train mostly on the CPU, 26.08 is a GPU speedup."""
    import json

    from mlpilot.platform.agent import compare as C
    from mlpilot.platform.execution import LegResult
    from mlpilot.platform.execution.sandbox import ChildResult
    from mlpilot.platform.ml.protocol import PipelineResult

    fixture = json.loads(
        (Path(__file__).parent / f"data/accel_versions/train_{version}.json").read_text()
    )
    results = _fake_profile(monkeypatch)
    calls = fixture["method_calls"]
    seconds = round(sum(c["gpu_time"] + c["cpu_time"] for c in calls.values()) + 0.1, 4)
    collector = StageDevices("gpu")
    collector.start()
    try:
        collector.stage_started("train")
        for line in fixture["log"]:
            collector.on_line(line)
        results.method_calls.update({name: _Stats(**stats) for name, stats in calls.items()})
        record = collector.stage_ended("train", seconds)
    finally:
        collector.stop()
    assert record["device"] == fixture["expect"]["device"]
    gpu_time = sum(c["gpu_time"] for c in calls.values())
    assert record["gpu_share"] == round(gpu_time / seconds, 4)

    def summary(engine: str, train_s: float, devices_: dict) -> C.LegSummary:
        result = PipelineResult(
            status="succeeded",
            engine=engine,
            timings={"train": train_s, "total": train_s + 1.0},
            devices=devices_,
            metrics={"test_f1": 0.8},
        )
        leg = LegResult(engine, ChildResult(0, train_s + 3.0), result, Path("."))
        return C.LegSummary(engine, leg, [leg])

    cpu = summary("cpu", 2.6, {"train": {"device": "cpu", "gpu": [], "cpu": [], "reasons": {}}})
    gpu = summary("gpu", seconds, {"train": record})
    row = C.speedup_rows(cpu, gpu, "ran", (True, "agree"))["train"]
    assert row["kind"] == fixture["expect"]["kind"] and row["refused"] is None
    assert row["ratio"] == round(2.6 / seconds, 4)
    if row["kind"] == C.KIND_GPU:
        assert row["speedup"] == row["ratio"] and row["gpu_share"] >= 0.5
    else:
        assert row["speedup"] is None and "mostly CPU" in row["note"]
        assert "RandomForestClassifier.fit" in (row["cpu_leaves"] or "")
