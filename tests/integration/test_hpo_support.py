"""Helpers for the HPO tests: a prepared run, a study started in-process, trial owners.

(Named test_* to sit with the HPO tests; it holds no tests itself.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SALES_STEPS = [
    {"tool": "load_data", "args": {"target": "sales", "task": "auto"}},
    {"tool": "clean_data", "args": {"strategy": "auto"}},
    {"tool": "engineer_features", "args": {"datetime": True, "target_encoding": True}},
]


def tracked_logger(home: Path) -> Any:
    """An MLflow parent run in the home's default sqlite store."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.mlflow_store import ensure_experiment, make_client
    from mlpilot.tracking.run_logger import MlflowRunLogger

    settings = get_settings()
    assert str(settings.home) == str(home)
    client = make_client(settings)
    experiment = ensure_experiment(client, "hpo-tests", settings.artifact_root)
    run = client.create_run(experiment, tags={"mlpilot.kind": "agent_run"})
    return MlflowRunLogger(client, run.info.run_id, experiment)


def prepared_run(data: Path, run_dir: Path, logger: Any = None, seed: int = 42) -> Any:
    """A PipelineRun on the sales data after load, clean and features, as a pipeline has it."""
    from mlpilot.platform.ml import steps
    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.tracking.run_logger import NullRunLogger

    run_dir.mkdir(parents=True, exist_ok=True)
    plan = {"steps": [{"tool": s["tool"], "args": dict(s["args"])} for s in SALES_STEPS]}
    plan["steps"][0]["args"]["path"] = str(data)
    run = PipelineRun(
        plan=plan,
        seed=seed,
        data_path=str(data),
        run_dir=run_dir,
        logger=logger or NullRunLogger(),
    )
    for step in plan["steps"]:
        getattr(steps, step["tool"])(run, **step["args"])
    return run


def load_study(name: str, storage: str | None = None) -> Any:
    import optuna

    from mlpilot.platform.config import get_settings
    from mlpilot.platform.ml.hpo import open_storage

    return optuna.load_study(
        study_name=name, storage=open_storage(storage or get_settings().optuna_storage)
    )


def owner_pid(trial: Any) -> int | None:
    from mlpilot.platform.ml.hpo.storage import OWNER_ATTR

    return (trial.user_attrs.get(OWNER_ATTR) or {}).get("pid")
