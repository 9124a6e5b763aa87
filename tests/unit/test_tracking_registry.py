"""Registry references, batching, engine tags, model requirements and the reconciler."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking.mlflow_store import engine_of, engine_tags
from mlpilot.tracking.registry import ModelRef, parse_model_ref
from mlpilot.tracking.run_logger import batches


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("sales@champion", ModelRef("sales", alias="champion")),
        ("models:/sales@champion", ModelRef("sales", alias="champion")),
        ("models:/sales/3", ModelRef("sales", version="3")),
        ("sales/latest", ModelRef("sales")),
        ("sales", ModelRef("sales")),
    ],
)
def test_model_references(text: str, ref: ModelRef) -> None:
    assert parse_model_ref(text) == ref


@pytest.mark.parametrize("text", ["", "models:/m-123abc", "sales/three", "@champion"])
def test_bad_model_references(text: str) -> None:
    with pytest.raises(TrackingError):
        parse_model_ref(text)


def test_predict_accepts_bare_registry_references() -> None:
    from mlpilot.platform.agent.predicting import normalize_model_uri

    assert normalize_model_uri("sales@champion") == "models:/sales@champion"
    assert normalize_model_uri("sales/2") == "models:/sales/2"
    assert normalize_model_uri("models:/m-abc") == "models:/m-abc"
    assert normalize_model_uri("runs:/abc/model") == "runs:/abc/model"
    assert normalize_model_uri("./saved_model") == "./saved_model"


def test_batches_respect_mlflow_limits() -> None:
    parts = batches(list(range(2500)), list(range(150)), list(range(30)))
    assert sum(len(m) for m, _, _ in parts) == 2500 and sum(len(p) for _, p, _ in parts) == 150
    for m, p, t in parts:
        assert (
            len(m) <= 1000 and len(p) <= 100 and len(t) <= 100 and len(m) + len(p) + len(t) <= 1000
        )
    assert batches([], [], []) == []


def test_engine_tag_carries_requested_and_used() -> None:
    tags = engine_tags("auto", "cpu", "auto: no CUDA driver")
    assert tags["mlpilot.engine"] == "cpu (requested auto)"
    assert engine_of(tags) == {"requested": "auto", "used": "cpu", "reason": "auto: no CUDA driver"}
    assert engine_of({"mlpilot.engine": "gpu"})["used"] == "gpu"  # runs logged before the change


def test_model_requirements_list_the_estimators_packages() -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from mlpilot.tracking.run_logger import model_requirements

    model = Pipeline(
        [("prep", ColumnTransformer([("num", StandardScaler(), [0])])), ("fit", Ridge())]
    )
    names = {r.split("==")[0].lower() for r in model_requirements(model)}
    assert {"scikit-learn", "numpy", "pandas", "scipy", "cloudpickle"} <= names
    assert all("==" in r for r in model_requirements(model))


# -- against a local MLflow store -----------------------------------------------------------------
@pytest.fixture(scope="module")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow sqlite store with its tables created once (migrations take seconds)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def client(tmp_path: Path, empty_mlflow_db: Path) -> Any:
    from mlflow import MlflowClient

    shutil.copy(empty_mlflow_db, tmp_path / "mlflow.db")
    return MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")


class CountingClient:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if callable(attr):

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return attr(*args, **kwargs)

            return counted
        return attr


def test_a_trial_is_three_calls_and_keeps_every_value(client: Any, tmp_path: Path) -> None:
    from mlpilot.tracking.run_logger import MlflowRunLogger

    experiment = client.create_experiment("e", artifact_location=(tmp_path / "a").as_uri())
    parent = MlflowRunLogger(client, client.create_run(experiment).info.run_id, experiment)
    parent.client = counting = CountingClient(client)
    child = parent.child("trial-0", tags={"mlpilot.kind": "trial"})
    child.log_params({"alpha": 0.5, "depth": 3})
    child.log_params({"alpha": 9})  # params are write-once: the first value stays
    child.log_metrics({f"m{i}": i / 10 for i in range(20)})
    child.set_tags({"mlpilot.trial_state": "COMPLETE"})
    child.end()
    assert counting.calls == ["create_run", "log_batch", "set_terminated"]
    run = client.get_run(child.run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"alpha": "0.5", "depth": "3"}
    assert len(run.data.metrics) == 20 and run.data.tags["mlflow.parentRunId"] == parent.run_id
    assert run.data.tags["mlpilot.trial_state"] == "COMPLETE"


def _agent_run(
    client: Any,
    experiment: str,
    status: str | None,
    metrics: dict[str, float],
    tags: dict[str, str] | None = None,
) -> str:
    run = client.create_run(
        experiment,
        tags={
            "mlpilot.kind": "agent_run",
            "mlpilot.prompt": "train a model",
            "mlpilot.planner": "offline",
            "mlpilot.session_id": "s1",
            "mlpilot.dataset_fingerprint": "sha256:abc",
            **engine_tags("auto", "cpu", "test"),
            **(tags or {}),
        },
    )
    run_id = run.info.run_id
    client.log_text(run_id, json.dumps({"template": "quick-baseline", "steps": []}), "plan.json")
    client.log_text(run_id, "train a model, in full", "prompt.txt")
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    if status:
        client.set_terminated(run_id, status=status)
    return run_id


def test_reconciler_makes_the_store_agree_with_mlflow(client: Any, tmp_path: Path) -> None:
    from mlpilot.tracking.metadata._embedded import EmbeddedStore
    from mlpilot.tracking.reconcile import reconcile

    store = EmbeddedStore(tmp_path / "m.db")
    exp = client.create_experiment("rec", artifact_location=(tmp_path / "art").as_uri())
    missing = _agent_run(client, exp, "FINISHED", {"test_rmse": 2.0, "time_total_s": 3.0})
    stuck = _agent_run(client, exp, "FAILED", {}, {"mlpilot.error": "child was killed"})
    drifted = _agent_run(client, exp, "FINISHED", {"test_rmse": 1.5})
    killed = _agent_run(client, exp, "KILLED", {})
    young = _agent_run(client, exp, None, {})
    unfinished = _agent_run(client, exp, None, {})
    store.create_run(stuck, {"status": "RUNNING", "experiment": "rec"})
    store.create_run(drifted, {"status": "SUCCEEDED", "metrics": {"test_rmse": 9.9}})
    store.create_run(killed, {"status": "SUCCEEDED", "metrics": {}})
    store.create_run(unfinished, {"status": "FAILED"})
    store.create_run("gone", {"status": "RUNNING"})
    queued = _agent_run(client, exp, "FINISHED", {})

    report = reconcile(client, store, skip_run_ids={queued})
    actions = {(c.run_id, c.action) for c in report.changes}
    assert actions == {
        (missing, "created"),
        (stuck, "stuck"),
        (drifted, "metrics"),
        (killed, "status"),
        (unfinished, "mlflow-ended"),
        ("gone", "orphaned"),
    }
    assert report.in_progress == [young] and [c.run_id for c in report.skipped] == [queued]

    rebuilt = store.get_run(missing)
    assert rebuilt["status"] == "SUCCEEDED" and rebuilt["plan"]["template"] == "quick-baseline"
    assert rebuilt["prompt"] == "train a model, in full" and rebuilt["experiment"] == "rec"
    assert rebuilt["metrics"] == {"test_rmse": 2.0, "time_total_s": 3.0}
    assert rebuilt["timings"] == {"total": 3.0} and rebuilt["engine"]["requested"] == "auto"
    assert [e["state"] for e in rebuilt["events"]] == ["RECEIVED", "SUCCEEDED"]
    failed = store.get_run(stuck)
    assert failed["status"] == "FAILED" and failed["error"]["message"] == "child was killed"
    assert failed["events"][-1]["state"] == "FAILED"
    assert store.get_run(drifted)["metrics"] == {"test_rmse": 1.5}
    assert store.get_run(killed)["status"] == "CANCELLED"
    assert store.get_run("gone")["status"] == "FAILED"
    assert client.get_run(unfinished).info.status == "FAILED"

    again = reconcile(client, store)
    assert [(c.run_id, c.action) for c in again.changes] == [(queued, "created")]
    assert reconcile(client, store).changes == []


def test_reconciler_dry_run_changes_nothing(client: Any, tmp_path: Path) -> None:
    from mlpilot.tracking.metadata._embedded import EmbeddedStore
    from mlpilot.tracking.reconcile import reconcile

    store = EmbeddedStore(tmp_path / "m.db")
    exp = client.create_experiment("dry", artifact_location=(tmp_path / "art").as_uri())
    run_id = _agent_run(client, exp, "FINISHED", {"test_rmse": 2.0})
    report = reconcile(client, store, dry_run=True)
    assert [(c.run_id, c.action) for c in report.changes] == [(run_id, "created")]
    assert store.get_run(run_id) is None


def test_abandoned_runs_fail_in_both_stores(client: Any, tmp_path: Path) -> None:
    from mlpilot.tracking.metadata._embedded import EmbeddedStore
    from mlpilot.tracking.reconcile import reconcile

    store = EmbeddedStore(tmp_path / "m.db")
    exp = client.create_experiment("stale", artifact_location=(tmp_path / "art").as_uri())
    run_id = _agent_run(client, exp, None, {})
    store.create_run(run_id, {"status": "RUNNING"})
    time.sleep(0.05)
    report = reconcile(client, store, stale_after_s=0.01)
    assert [(c.run_id, c.action) for c in report.changes] == [(run_id, "abandoned")]
    assert store.get_run(run_id)["status"] == "FAILED"
    assert client.get_run(run_id).info.status == "FAILED"
