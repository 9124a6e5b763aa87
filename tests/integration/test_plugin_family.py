"""A plugin model family end to end: listed, planned and searched once named, never before.

``tests/plugin_family`` holds two installed-looking packages (a module and its
``.dist-info``): ``mlpilot_demo_family`` (a decision tree, ``dtree``) and
``mlpilot_clash_family`` (a family named ``rf``). Both are on ``PYTHONPATH`` in every test:
being installed must not be enough to run their code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import REPO, local_env, run_cli

pytestmark = [pytest.mark.integration]
DEMO = "mlpilot_demo_family"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    plugins = tmp_path / "plugins"  # a copy the pipeline's account can read
    shutil.copytree(REPO / "tests" / "plugin_family", plugins)
    return local_env(tmp_path / "home", PYTHONPATH=str(plugins))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["y"] = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    return path


def _listed(env: dict[str, str], *args: str) -> dict[str, str]:
    done = run_cli("families", "list", "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    return {f["name"]: f["provider"] for f in json.loads(done.stdout)}


def test_an_installed_plugin_family_is_listed_only_when_named(env: dict[str, str]) -> None:
    assert "dtree" not in _listed(env)
    listed = _listed(env, "--plugins", DEMO)
    assert listed["dtree"] == DEMO and listed["catboost"] == "mlpilot"
    assert "dtree" in _listed({**env, "MLPILOT_FAMILY_PLUGINS": DEMO})


def test_a_plugin_family_taking_a_builtin_name_is_refused_naming_both(
    env: dict[str, str],
) -> None:
    done = run_cli("families", "list", "--plugins", "mlpilot-clash-family", env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "'rf' from mlpilot-clash-family clashes with the one from mlpilot" in lines[0]


def test_a_plugin_family_is_planned_only_when_named(env: dict[str, str], data: Path) -> None:
    prompt = "train a decision tree to predict y"
    unnamed = run_cli("plan", prompt, "--data", str(data), "--json", env=env)
    assert unnamed.returncode == 0, unnamed.stderr
    models = {s["args"].get("model") for s in json.loads(unnamed.stdout)["steps"]}
    assert "dtree" not in models
    named = run_cli("plan", prompt, "--data", str(data), "--plugins", DEMO, "--json", env=env)
    assert named.returncode == 0, named.stderr
    steps = {s["tool"]: s["args"] for s in json.loads(named.stdout)["steps"]}
    assert steps["train_model"]["model"] == "dtree"
    refused = run_cli(
        "plan", "--template", "hpo-dtree", "--target", "y", "--data", str(data), env=env
    )
    assert refused.returncode != 0 and "hpo-dtree" in refused.stderr


@pytest.mark.slow
def test_a_plugin_family_is_searched_in_the_pipeline_process(
    env: dict[str, str], data: Path, tmp_path: Path
) -> None:
    prompt = "tune a decision tree for 3 trials to predict y"
    done = run_cli(
        "run", prompt, "--data", str(data), "--plugins", DEMO, "--json", env=env, cwd=tmp_path
    )
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "SUCCEEDED", done.stderr[-2000:]
    steps = {s["tool"]: s["args"] for s in outcome["plan"]["steps"]}
    assert steps["optimize_model"]["model"] == "dtree"
    assert outcome["plan"]["template"] == "hpo-dtree"  # generated from the registry
    assert outcome["metrics"]["test_roc_auc"] > 0.8
