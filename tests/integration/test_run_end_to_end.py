"""A prompt-launched run on the embedded defaults (sqlite MLflow, embedded metadata store)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import run_cli

from mlpilot.platform.datasets import SALES_TRUE_DRIVERS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMPT = "find the key features driving sales and train a random forest"
STATES = ["RECEIVED", "PLANNING", "VALIDATING", "GENERATING", "RUNNING", "RECORDING", "SUCCEEDED"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from mlpilot.platform.datasets import make_sales, write_table

    base = tmp_path_factory.mktemp("e2e")
    data = write_table(make_sales(4000, seed=3), base / "sales.csv")
    env = {"MLPILOT_HOME": str(base / "home"), "MLPILOT_LLM": "offline"}
    for name in ("MLFLOW_TRACKING_URI", "MLPILOT_MONGO_URI", "NVIDIA_API_KEY", "OPENAI_API_KEY"):
        env[name] = ""
    done = run_cli("run", PROMPT, "--data", str(data), "--json", env=env, cwd=base)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    return {"outcome": outcome, "data": data, "env": env, "base": base, "home": base / "home"}


def _client(home: Path):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{home / 'mlflow.db'}")


def test_mlflow_run_holds_the_contract(finished_run: dict) -> None:
    outcome, home = finished_run["outcome"], finished_run["home"]
    client = _client(home)
    run = client.get_run(outcome["run_id"])
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["mlpilot.kind"] == "agent_run" and tags["mlpilot.prompt"] == PROMPT
    assert tags["mlpilot.planner"] == "offline" and tags["mlpilot.engine"] == "cpu (requested auto)"
    assert tags["mlpilot.dataset_fingerprint"].startswith("sha256:")
    assert tags["mlpilot.session_id"] == outcome["session_id"] and tags["mlpilot.template"]

    def listing(path: str | None = None) -> list[str]:
        out = []
        for item in client.list_artifacts(run.info.run_id, path):
            out += listing(item.path) if item.is_dir else [item.path]
        return out

    artifacts = set(listing())
    for name in (
        "prompt.txt",
        "plan.json",
        "pipeline.py",
        "data/profile.json",
        "timings.json",
        "importance.json",
        "logs/stdout.txt",
        "logs/stderr.txt",
        "reports/cleaning.json",
        "plots/feature_importance.png",
    ):
        assert name in artifacts, name
    metrics = run.data.metrics
    for key in ("test_rmse", "test_r2", "cv_rmse", "time_load_s", "time_train_s", "time_total_s"):
        assert key in metrics, key
    assert metrics["test_r2"] > 0.7
    assert run.inputs.dataset_inputs, "dataset not recorded with log_input"
    plan = json.loads(
        client.download_artifacts(run.info.run_id, "plan.json", str(finished_run["base"]))
        and Path(finished_run["base"], "plan.json").read_text()
    )
    assert plan["steps"][0]["args"]["target"] == "sales"


def test_importance_puts_the_true_drivers_on_top(finished_run: dict) -> None:
    ranking = [item["feature"] for item in finished_run["outcome"]["importance"]]
    assert set(ranking[:3]) <= set(SALES_TRUE_DRIVERS), ranking
    assert "temperature" not in ranking[:3] and "region" not in ranking[:3]


def test_model_predicts_raw_rows(finished_run: dict) -> None:
    import mlflow

    home = finished_run["home"]
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    model = mlflow.pyfunc.load_model(finished_run["outcome"]["model_uri"])
    raw = pd.read_csv(finished_run["data"]).drop(columns=["sales"])
    predictions = model.predict(raw.head(50))
    assert len(predictions) == 50 and pd.Series(predictions).notna().all()
    odd = raw.head(3).copy()
    odd.loc[odd.index[0], ["price", "temperature"]] = None
    odd.loc[odd.index[1], "store_id"] = "S-never-seen"
    odd["promotion"] = odd["promotion"].astype(object)
    odd.loc[odd.index[2], "promotion"] = None
    assert pd.Series(model.predict(odd)).notna().all()


def test_metadata_document_records_the_states(finished_run: dict) -> None:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    settings = Settings.from_env({"MLPILOT_HOME": str(finished_run["home"])})
    doc = connect(settings).get_run(finished_run["outcome"]["run_id"])
    assert doc["status"] == "SUCCEEDED"
    assert doc["plan"]["steps"][0]["tool"] == "load_data"
    states = [e["state"] for e in doc["events"]]
    assert [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]] == STATES
    assert doc["metrics"]["test_rmse"] > 0 and doc["timings"]["total"] > 0
    assert doc["dataset"]["fingerprint"].startswith("sha256:") and doc["engine"]["used"] == "cpu"


def test_pipeline_script_reproduces_the_run(finished_run: dict, tmp_path: Path) -> None:
    outcome, home = finished_run["outcome"], finished_run["home"]
    client = _client(home)
    script = Path(client.download_artifacts(outcome["run_id"], "pipeline.py", str(tmp_path)))
    env = {**os.environ, **finished_run["env"], "MLFLOW_RUN_ID": ""}
    env = {k: v for k, v in env.items() if v != ""}
    before = len(client.search_runs([outcome["experiment_id"]]))
    done = subprocess.run(
        [sys.executable, str(script), "--data", str(finished_run["data"])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    runs = client.search_runs([outcome["experiment_id"]], order_by=["attributes.start_time DESC"])
    assert len(runs) == before + 1
    fresh = runs[0]
    assert fresh.info.run_id != outcome["run_id"] and fresh.info.status == "FINISHED"
    for key in ("test_rmse", "test_mae", "test_r2", "cv_rmse"):
        assert fresh.data.metrics[key] == pytest.approx(outcome["metrics"][key], rel=1e-9), key

    quiet = tmp_path / "quiet"
    quiet.mkdir()
    shutil.copy(script, quiet / "pipeline.py")
    done = subprocess.run(
        [sys.executable, "pipeline.py", "--data", str(finished_run["data"]), "--no-track"],
        cwd=quiet,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(client.search_runs([outcome["experiment_id"]])) == before + 1
    result = json.loads((quiet / "result.json").read_text())
    assert result["status"] == "succeeded" and result["metrics"]["test_rmse"] == pytest.approx(
        outcome["metrics"]["test_rmse"], rel=1e-9
    )


def test_the_pipeline_started_before_its_run_and_logged_to_it(finished_run: dict) -> None:
    """The child starts while MLflow opens; it never learns the run id: what it logs goes
    through its folder (tracking.jsonl), and the parent logs it to the run."""
    outcome, home = finished_run["outcome"], finished_run["home"]
    run_dir = Path(outcome["run_dir"])
    assert run_dir == home / "runs" / outcome["run_id"] and run_dir.is_symlink()
    real = run_dir.resolve()
    assert real.parent == (home / "runs").resolve() and real.name != outcome["run_id"]
    assert not (real / "mlflow_run_id").exists() and (real / "tracking.jsonl").is_file()
    first = json.loads((run_dir / "events.jsonl").read_text().splitlines()[0])
    assert first["type"] == "pipeline_start" and first.get("run_id") is None
    result = json.loads((run_dir / "result.json").read_text())
    assert result["run_id"] is None
    # what the pipeline logged before MLflow was open reached the run
    params = _client(home).get_run(outcome["run_id"]).data.params
    assert params["data.rows"] == "4000" and params["target"] == "sales"
    assert Path(outcome["pipeline_path"]) == run_dir / "pipeline.py"
