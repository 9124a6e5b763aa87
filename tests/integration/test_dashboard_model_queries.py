"""Registering a run's model, moving its aliases and reading the version history from the
dashboard's queries, against MLflow's sqlite registry and both metadata stores (the
embedded one and a MongoDB-protocol server over TCP): every change recorded in both."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlpilot.dashboards import queries
from mlpilot.platform.config import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(params=["embedded", "mongodb"])
def stores(request: pytest.FixtureRequest, home: Path) -> Iterator[dict[str, Any]]:
    """A run that logged a (tiny) model in MLflow, with its run document."""
    env = {"MLPILOT_HOME": str(home)}
    if request.param == "mongodb":
        nx = request.getfixturevalue("nx_server")
        env.update(MLPILOT_MONGO_URI=nx.uri, MLPILOT_MONGO_DB=f"models{uuid.uuid4().hex[:6]}")
    settings = Settings.from_env(env)
    from mlpilot.tracking.metadata import open_store

    queries.configure(settings)
    run_id, model_uri = _run_with_a_model(queries.client())
    open_store(settings).create_run(
        run_id,
        {
            "experiment": "sales",
            "prompt": "train a ridge to predict sales",
            "plan": {"template": "regression", "steps": []},
            "dataset": {"path": "/data/sales.csv", "fingerprint": "sha256:abc123"},
            "main_metric": "rmse",
            "metrics": {"test_rmse": 1.25},
            "status": "SUCCEEDED",
            "model": {"uri": model_uri, "registered_name": None, "version": None},
        },
    )
    try:
        yield {"settings": settings, "run_id": run_id, "model_uri": model_uri}
    finally:
        queries.configure(None)


def _run_with_a_model(client: Any) -> tuple[str, str]:
    import mlflow
    from sklearn.linear_model import Ridge

    experiment = client.create_experiment(f"sales-{uuid.uuid4().hex[:6]}")
    with mlflow.start_run(experiment_id=experiment) as run:
        mlflow.log_metric("test_rmse", 1.25)
        logged = mlflow.sklearn.log_model(Ridge().fit([[0.0], [1.0]], [0.0, 1.0]), name="model")
    return run.info.run_id, f"models:/{logged.model_id}"


@pytest.fixture(autouse=True)
def _tracking_uri(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fluent API of the helper logs to the same sqlite store as the queries' client
    monkeypatch.setenv(
        "MLFLOW_TRACKING_URI", Settings.from_env({"MLPILOT_HOME": str(home)}).tracking_uri
    )


def test_register_move_and_history_are_recorded_in_both_stores(stores: dict[str, Any]) -> None:
    run_id = stores["run_id"]
    assert [o["value"] for o in queries.runs_with_models()] == [run_id]
    ok, line = queries.register_run_model(run_id, "sales-model", "champion")
    assert ok and "version 1 as @champion" in line, line
    ok, line = queries.register_run_model(run_id[:8], "sales-model", None)  # a prefix will do
    assert ok and "version 2" in line, line
    ok, line = queries.set_model_alias("sales-model", "champion", "2")
    assert ok and "was version 1" in line, line
    ok, _ = queries.delete_model_alias("sales-model", "champion")
    assert ok
    # MLflow: two versions pointing at the logged model, lineage tags on each
    client = queries.client()
    version = client.get_model_version("sales-model", "2")
    assert version.run_id == run_id and version.source == stores["model_uri"]
    assert client.get_registered_model("sales-model").aliases == {}
    # the run document: the newest registration, and every change in order
    doc = queries.store().get_run(run_id)
    assert doc["model"]["registered_name"] == "sales-model" and doc["model"]["version"] == "2"
    assert doc["model"]["uri"] == stores["model_uri"]
    changes = [
        (c["action"], c["version"], c.get("alias"), c["by"]) for c in doc["model"]["registry"]
    ]
    assert changes == [
        ("registered", "1", "champion", "dashboard"),
        ("registered", "2", None, "dashboard"),
        ("alias moved", "2", "champion", "dashboard"),
        ("alias deleted", None, "champion", "dashboard"),
    ]
    history = queries.model_history("sales-model")
    assert [v["version"] for v in history] == ["2", "1"]
    newest = history[0]
    assert newest["run_id"] == run_id and newest["created_at"]
    assert newest["template"] == "regression" and newest["dataset"] == "/data/sales.csv"
    assert newest["prompt"].startswith("train a ridge") and newest["metric"] == "rmse"
    assert newest["metric_value"] == pytest.approx(1.25)
    assert len(newest["changes"]) == 4 and newest["changes"][2]["previous"] == "1"


def test_refusals_leave_both_stores_as_they_were(stores: dict[str, Any]) -> None:
    run_id = stores["run_id"]
    for name, alias, why in (
        ("", None, "name the registered model"),
        ("m", "latest", "refused"),
        ("m", "v3", "refused"),
    ):
        ok, line = queries.register_run_model(run_id, name, alias)
        assert not ok and why in line, line
    ok, line = queries.register_run_model("nosuchrun", "m", None)
    assert not ok and "no run" in line, line
    assert queries.client().search_registered_models() == []
    assert not queries.store().get_run(run_id)["model"].get("registry")


def test_the_cli_records_its_registrations_and_promotions_the_same_way(
    stores: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from mlpilot.platform.cli.models import app

    if stores["settings"].mongo_uri:
        monkeypatch.setenv("MLPILOT_MONGO_URI", stores["settings"].mongo_uri)
        monkeypatch.setenv("MLPILOT_MONGO_DB", stores["settings"].mongo_db)
    runner = CliRunner()
    done = runner.invoke(app, ["register", stores["run_id"], "--name", "cli-model"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["promote", "cli-model", "1", "--alias", "champion"])
    assert done.exit_code == 0, done.output
    changes = queries.store().get_run(stores["run_id"])["model"]["registry"]
    assert [(c["action"], c["by"]) for c in changes] == [
        ("registered", "cli"),
        ("alias set", "cli"),
    ]
