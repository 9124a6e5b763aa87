"""Run every real data set through the CLI once per test session, two at a time.

Each worker has its own ``MLPILOT_HOME`` (its own sqlite MLflow store and embedded
metadata store), so the two never write the same database; runs of one worker follow
each other as a user's would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import MLPILOT

from realdata.cases import CASES, Case, materialise

WORKERS = 2
_SCRUBBED = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_RUN_ID",
    "MLPILOT_MONGO_URI",
    "MLPILOT_OPTUNA_STORAGE",
    "MLPILOT_ENGINE",
    "MLPILOT_EXPERIMENT",
    "NVIDIA_API_KEY",
    "OPENAI_API_KEY",
    "MLPILOT_LLM_BASE_URL",
)


@dataclass
class CaseResult:
    case: Case
    outcome: dict[str, Any] = field(default_factory=dict)
    run_stderr: str = ""
    home: Path | None = None
    predictions: pd.DataFrame | None = None
    predict_error: str = ""
    truth: pd.Series | None = None
    seconds: float = 0.0


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(MLPILOT_HOME=str(home), MLPILOT_LLM="offline", MLPILOT_ENGINE="cpu")
    return env


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MLPILOT, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


def _run_case(case: Case, folder: Path, home: Path) -> CaseResult:
    started = time.monotonic()
    folder.mkdir(parents=True)
    train, holdout = materialise(case)
    train.to_csv(folder / "train.csv", index=False)
    holdout.drop(columns=[case.target]).to_csv(folder / "holdout.csv", index=False)
    # the truth as the file holds it: read back, so it is compared as a user would see it
    holdout[[case.target]].to_csv(folder / "holdout_truth.csv", index=False)
    truth = pd.read_csv(folder / "holdout_truth.csv")[case.target]
    env = _env(home)
    if case.prompt:
        args = ["run", case.prompt, "--data", "train.csv", "--json"]
    else:
        params = case.params or (f"model={case.family}",)
        args = ["run", "--template", case.template, *(f"--param={p}" for p in params)]
        args += ["--target", case.target, "--data", "train.csv", "--json"]
    run = _cli(args, env, folder)
    result = CaseResult(case, run_stderr=run.stderr[-3000:], truth=truth, home=home)
    try:
        result.outcome = json.loads(run.stdout)
    except json.JSONDecodeError:
        result.outcome = {"status": "NO-JSON", "stdout": run.stdout[-2000:]}
    result.seconds = time.monotonic() - started
    return result


def _predict_all(results: list[CaseResult], root: Path) -> None:
    """Each logged model, loaded from its MLflow store, predicts its held-out raw rows.

    One child process loads them all (MLflow is imported once instead of once per set);
    ``mlpilot predict`` itself is run by the README test.
    """
    jobs = []
    for result in results:
        folder = root / result.case.name
        if result.outcome.get("status") == "SUCCEEDED" and result.outcome.get("model_uri"):
            jobs.append(
                {
                    "tracking_uri": f"sqlite:///{result.home}/mlflow.db",
                    "model_uri": result.outcome["model_uri"],
                    "rows": str(folder / "holdout.csv"),
                    "out": str(folder / "preds.csv"),
                }
            )
    (root / "jobs.json").write_text(json.dumps(jobs), encoding="utf-8")
    script = Path(__file__).with_name("predict_holdout.py")
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    subprocess.run([sys.executable, str(script), str(root / "jobs.json")], env=env, timeout=600)
    for result in results:
        preds, error = (
            root / result.case.name / "preds.csv",
            root / result.case.name / "preds.csv.error",
        )
        if preds.exists():
            result.predictions = pd.read_csv(preds)
        elif error.exists():
            result.predict_error = error.read_text()


@pytest.fixture(scope="session")
def realdata_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    root = tmp_path_factory.mktemp("realdata")
    queues: list[list[Case]] = [[] for _ in range(WORKERS)]
    for i, case in enumerate(CASES):
        queues[i % WORKERS].append(case)

    def work(index: int) -> list[CaseResult]:
        home = root / f"home{index}"
        return [_run_case(case, root / case.name, home) for case in queues[index]]

    with ThreadPoolExecutor(WORKERS) as pool:
        done = [r for results in pool.map(work, range(WORKERS)) for r in results]
    _predict_all(done, root)
    return {r.case.name: r for r in done}
