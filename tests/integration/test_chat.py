"""`mlpilot chat` driven through its standard input, as a user types: leaving it, questions
about the session's own runs, "tune it", and "register the best one"."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import MLPILOT

pytestmark = pytest.mark.integration


@pytest.fixture
def churn_csv(tmp_path: Path) -> Path:
    """300 rows: enough for a model, small enough for seconds per run."""
    rng = np.random.default_rng(3)
    n = 300
    tenure = rng.integers(0, 60, n)
    frame = pd.DataFrame(
        {
            "tenure": tenure,
            "charges": rng.normal(70, 20, n).round(2),
            "contract": rng.choice(["monthly", "yearly"], n),
        }
    )
    frame["churned"] = np.where(rng.random(n) < 0.7 - tenure / 100, "yes", "no")
    path = tmp_path / "churn.csv"
    frame.to_csv(path, index=False)
    return path


def chat(lines: list[str], data: Path, *, close: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``mlpilot chat`` with ``lines`` typed on its standard input (then end of input)."""
    env = {**os.environ, "MLPILOT_ENGINE": "cpu"}
    return subprocess.run(
        [MLPILOT, "chat", "--data", str(data)],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def answers(session: dict[str, Any]) -> list[Any]:
    """The query answers the session recorded as its replies, in order (the chat itself
    prints them as tables)."""
    found = []
    for message in session["messages"]:
        if message["role"] == "assistant" and message["content"].startswith("{"):
            found.append(json.loads(message["content"])["answer"])
    return found


def readable(stdout: str) -> None:
    """What the chat printed is for people: no JSON, no epoch milliseconds."""
    assert "{" not in stdout and '"run_id"' not in stdout, stdout[-3000:]
    assert not re.search(r"\b1[6-9]\d{11}\b", stdout), stdout[-3000:]


def _settings(home: Path) -> Any:
    from mlpilot.platform.config import Settings

    return Settings.from_env({**os.environ, "MLPILOT_HOME": str(home)})


def _session(home: Path, stdout: str | None = None) -> dict[str, Any]:
    """The home's one session, or the one the chat that printed ``stdout`` saved."""
    from mlpilot.tracking.metadata import open_store

    store = open_store(_settings(home))
    query = {}
    if stdout is not None:
        query = {"_id": re.search(r"session (\w+) saved", stdout).group(1)}
    (doc,) = list(store.collection("sessions").find(query))
    return doc


@pytest.mark.parametrize("word", ["quit", "exit", "bye", "退出", "Bye!"])
def test_exit_words_end_the_chat_and_plan_nothing(home: Path, churn_csv: Path, word: str) -> None:
    done = chat([word, "train knn to predict churned"], churn_csv)
    assert done.returncode == 0, done.stderr
    assert "saved; resume with: mlpilot chat --session" in done.stdout
    assert "RECEIVED" not in done.stdout  # neither the word nor the line after it ran
    assert not (home / "runs").exists()


def test_end_of_input_ends_the_chat(home: Path, churn_csv: Path) -> None:
    done = chat(["/context"], churn_csv)  # then stdin closes: Ctrl-D
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(
        f"resume with: mlpilot chat --session {_session(home)['_id']}"
    )


def test_session_questions_tune_it_and_register_the_best_one(home: Path, churn_csv: Path) -> None:
    done = chat(
        [
            "quick baseline with knn to predict churned",
            "now a quick baseline with logistic regression",
            "which run was best?",
            "show the last run",
            "compare the last two",
            "register the best one",
            "tune it with 2 trials",
            "exit",
        ],
        churn_csv,
    )
    assert done.returncode == 0, done.stderr
    session = _session(home)
    runs = session["context"]["runs"]
    knn, linear, register, tune = (r["run_id"] for r in runs)
    assert [r["model"] for r in runs] == ["knn", "linear", None, "linear"]
    best, last, compared = answers(session)
    readable(done.stdout)
    assert "best run of this conversation, by test_roc_auc" in done.stdout
    assert "runs side by side" in done.stdout and knn[:8] in done.stdout
    auc = {r["run_id"]: r["metrics"]["test_roc_auc"] for r in runs[:2]}
    # "which run was best?" answers from this session's two runs, not the experiment
    assert best["scope"] == "session" and best["run_id"] == max(auc, key=auc.get)
    assert last["scope"] == "session" and [r["run_id"] for r in last["runs"]] == [linear]
    assert [r["run_id"] for r in compared["runs"]] == [knn, linear]
    # "register the best one" registers the run "which run was best?" named, as @champion
    from mlpilot.tracking.mlflow_store import make_client

    client = make_client(_settings(home))
    version = client.get_model_version_by_alias("churned-model", "champion")
    assert (
        version.run_id == best["run_id"] or version.tags.get("mlpilot.source_run") == best["run_id"]
    )
    # "tune it" tuned the session's model family (the last one trained) on its data
    tuned = client.get_run(tune)
    assert tuned.data.tags["mlpilot.template"] == "hpo-linear"
    assert tuned.data.params["target"] == "churned"
    assert register != tune


def test_questions_in_other_words_asking_back_and_compare_with(home: Path, churn_csv: Path) -> None:
    """A question without the word "run" is answered; a line that names nothing is asked
    back (nothing trained or recorded); "compare with X" trains X and shows it beside the
    earlier runs; "of every experiment" lists runs beyond the conversation."""
    env = {**os.environ, "MLPILOT_ENGINE": "cpu"}
    other = subprocess.run(
        [
            MLPILOT,
            "run",
            "quick baseline with knn to predict churned",
            "--data",
            str(churn_csv),
            "--experiment",
            "elsewhere",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert other.returncode == 0, other.stderr[-2000:]
    done = chat(
        [
            "quick baseline with logistic regression to predict churned",
            "bananas are yellow",
            "which model scored highest?",
            "compare with a random forest",
            "show the last 5 runs of every experiment",
            "exit",
        ],
        churn_csv,
    )
    assert done.returncode == 0, done.stderr
    session = _session(home, done.stdout)
    linear, forest = (r["run_id"] for r in session["context"]["runs"])
    assert [r["model"] for r in session["context"]["runs"]] == ["linear", "rf"]
    assert "I could not place that" in done.stdout  # asked back, and no run for it
    best, listed = answers(session)
    assert best["scope"] == "session" and best["run_id"] == linear  # before the forest ran
    readable(done.stdout)
    side = done.stdout.split("runs side by side", 1)[1]
    assert linear[:8] in side and forest[:8] in side and "test_roc_auc" in side
    assert listed["scope"] == "all"
    assert {r["experiment"] for r in listed["runs"]} == {"elsewhere", "mlpilot"}
    assert "runs of every experiment, newest first" in done.stdout
