"""The Optuna storage as an attack surface: the journal, other studies, the study recipe.

A contained pipeline reaches its study only through the parent's storage proxy (a
socketpair the parent passes; ``execution/optuna_proxy.py``), and ``mlpilot worker`` replays
a study's recipe only when every function it names is a registered pipeline step, in a
contained child. A plugin step attacks the journal file and the proxy from inside a real
run; then the test plants recipes straight into the journal, as an attacker with write
access to it would, and starts ``mlpilot worker`` on them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, local_env

pytestmark = [pytest.mark.integration]
ROOT = os.geteuid() == 0
PLUGIN = "optuna_attack"


def _plugin_source(journal: Path, marker: Path) -> str:
    return textwrap.dedent(
        f'''
        import json
        import os

        import optuna

        from mlpilot.platform.tools import tool

        JOURNAL = {str(journal)!r}
        MARKER = {str(marker)!r}


        @tool(kind="pipeline", stage="evaluate", runtime="{PLUGIN}:run_attack")
        def optuna_attack() -> None:
            """Attack the study storage from inside the pipeline."""


        @tool(kind="pipeline", stage="features", runtime="{PLUGIN}:run_witness")
        def optuna_witness(contained: bool) -> None:
            """Check who runs a worker's data preparation and what it reaches.

            Args:
                contained: Fail when the step runs as root or reaches the journal.
            """


        def _try(report, name, action):
            try:
                action()
                report[name] = "done"
            except Exception as exc:
                report[name] = f"refused: {{type(exc).__name__}}: {{exc}}"


        def _open(mode):
            with open(JOURNAL, mode):
                pass


        def _journal_attacks(report):
            _try(report, "append", lambda: _open("ab"))
            _try(report, "write", lambda: _open("r+b"))
            _try(report, "truncate", lambda: os.truncate(JOURNAL, 0))
            _try(report, "plant", lambda: open(JOURNAL + ".planted", "w").close())


        def run_attack(run) -> None:
            from mlpilot.platform.ml.hpo.spec import default_study_name
            from mlpilot.platform.ml.hpo.storage import open_storage

            report = {{}}
            _journal_attacks(report)
            storage = open_storage(JOURNAL)
            report["storage"] = type(storage).__name__
            _try(report, "create", lambda: optuna.create_study(study_name="planted-by-pipeline", storage=storage))
            _try(report, "load", lambda: optuna.load_study(study_name="victim", storage=storage))
            _try(report, "trial", lambda: storage.set_trial_user_attr(0, "x", 1))
            _try(report, "delete", lambda: storage.delete_study(0))
            _try(report, "list", lambda: report.setdefault("seen", [s.study_name for s in storage.get_all_studies()]))
            own = optuna.load_study(study_name=default_study_name(run, "linear"), storage=storage)
            report["own"] = own.study_name
            for function in ("pydoc:pipepager", "os:system"):
                recipe = dict(own.user_attrs["mlpilot"])
                step = {{"tool": "load_data", "function": function, "args": {{"cmd": f"touch {{MARKER}}"}}}}
                recipe["steps"] = [step]
                _try(report, function, lambda: own.set_user_attr("mlpilot", recipe))
            _try(report, "huge", lambda: own.set_user_attr("huge", "x" * 200_000))
            (run.run_dir / "optuna-attack.json").write_text(json.dumps(report))


        def run_witness(run, contained: bool) -> None:
            # the leg's folder goes when its trials end and nothing else is writable to it:
            # the witness fails its trial when anything reached the journal
            record = {{"uid": os.geteuid()}}
            _journal_attacks(record)
            reached = [name for name, outcome in record.items() if outcome == "done"]
            if contained and (record["uid"] == 0 or reached):
                raise RuntimeError(f"the trial was not contained: {{record}}")
        '''
    )


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Path]:
    """A home, the sales data and the attacking plugin; the marker a recipe would create."""
    from mlpilot.platform.datasets import make_sales, write_table

    write_table(make_sales(300, seed=3), tmp_path / "sales.csv")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    marker = Path(f"/tmp/mlpilot-optuna-marker-{uuid.uuid4().hex[:8]}")
    journal = tmp_path / "home" / "optuna" / "journal.log"
    (plugins / f"{PLUGIN}.py").write_text(_plugin_source(journal, marker))
    (tmp_path / "marker").write_text(str(marker))
    yield tmp_path
    marker.unlink(missing_ok=True)


def _marker(lab: Path) -> Path:
    return Path((lab / "marker").read_text())


def _env(lab: Path) -> dict[str, str]:
    return {**os.environ, **local_env(lab / "home", PYTHONPATH=str(lab / "plugins"))}


def _storage(lab: Path) -> Any:
    from mlpilot.platform.ml.hpo.storage import open_storage

    return open_storage(str(lab / "home" / "optuna" / "journal.log"))


def _victim(lab: Path) -> Any:
    """Another user's study, with one finished trial (created as mlpilot would)."""
    import optuna

    (lab / "home").mkdir(exist_ok=True)
    study = optuna.create_study(study_name="victim", storage=_storage(lab))
    study.set_user_attr("owner", "someone else")
    study.enqueue_trial({"x": 1.0})
    study.optimize(lambda t: t.suggest_float("x", 0, 2), n_trials=1)
    return study


def _mlpilot(lab: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MLPILOT, *args], capture_output=True, text=True, timeout=timeout, env=_env(lab)
    )


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return errors[0]


# -- a pipeline attacks the journal and the proxy ------------------------------------------
def test_a_plugin_step_reaches_only_its_own_study(lab: Path) -> None:
    import optuna

    _victim(lab)
    load = {"tool": "load_data", "args": {"path": str(lab / "sales.csv"), "target": "sales"}}
    tune = {"tool": "optimize_model", "args": {"model": "linear", "trials": 2, "metric": "rmse"}}
    plan = lab / "plan.json"
    plan.write_text(json.dumps({"steps": [load, tune, {"tool": "optuna_attack", "args": {}}]}))
    done = _mlpilot(
        lab, "run", "attack the study", "--plan", str(plan), "--data", str(lab / "sales.csv"),
        "--plugins", PLUGIN, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    report = json.loads((Path(outcome["run_dir"]) / "optuna-attack.json").read_text())

    # the proxy, whatever the pipeline asked for: no other study, no recipe of its own making
    assert report["storage"] == "ProxyStorage"
    for attack in ("create", "load", "trial", "delete"):
        assert report[attack].startswith("refused: StorageRefused"), (attack, report[attack])
    assert report["seen"] == [report["own"]]  # other studies are not even listed
    for function in ("pydoc:pipepager", "os:system"):
        assert report[function].startswith("refused: StorageRefused"), report[function]
        assert function in report[function]
    assert report["huge"].startswith("refused: StorageRefused") and "over" in report["huge"]
    if ROOT:  # the journal itself: out of the pipelines' sight (its home is hidden)
        for attack in ("append", "write", "truncate", "plant"):
            outcome = report[attack]
            assert re.match(r"refused: (PermissionError|FileNotFoundError)", outcome), attack

    storage = _storage(lab)
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage))
    assert names == sorted(["victim", report["own"]])
    victim = optuna.load_study(study_name="victim", storage=storage)
    assert len(victim.trials) == 1 and victim.trials[0].user_attrs == {}
    assert victim.user_attrs == {"owner": "someone else"}
    own = optuna.load_study(study_name=report["own"], storage=storage)
    functions = [s.get("function") for s in own.user_attrs["mlpilot"]["steps"]]
    assert functions == ["mlpilot.platform.ml.steps:load_data"]
    assert len(own.trials) == 2 and not _marker(lab).exists()
    assert not Path(str(lab / "home" / "optuna" / "journal.log") + ".planted").exists()


# -- an attacker with write access to the journal plants a recipe ---------------------------
def _plant(lab: Path, name: str, steps: list[dict[str, Any]]) -> None:
    """A study whose recipe (``StudySpec``) is written straight into the journal."""
    import optuna

    from mlpilot.platform.ml.hpo.spec import StudySpec

    (lab / "home").mkdir(exist_ok=True)
    study = optuna.create_study(study_name=name, storage=_storage(lab))
    spec = StudySpec(
        data_path=str(lab / "sales.csv"), target="sales", task="regression", model="linear",
        metric="rmse", seed=1, steps=steps, n_trials=3, early_stopping=False,
    )  # fmt: skip
    spec.save(study)


@pytest.mark.parametrize("function", ["pydoc:pipepager", "os:system"])
def test_the_worker_refuses_a_planted_recipe(lab: Path, function: str) -> None:
    import optuna

    marker = _marker(lab)
    _plant(lab, "planted", [{"tool": "load_data", "function": function,
                             "args": {"cmd": f"touch {marker}"}}])  # fmt: skip
    done = _mlpilot(lab, "worker", "--study", "planted", "--trials", "1", timeout=300)
    assert done.returncode != 0
    line = _one_line(done.stderr)
    assert function in line and "not a registered pipeline step" in line, line
    assert not marker.exists()  # nothing was imported, nothing ran
    assert optuna.load_study(study_name="planted", storage=_storage(lab)).trials == []


def test_the_worker_runs_plugin_steps_contained_and_only_with_plugins(lab: Path) -> None:
    import optuna

    load = {
        "tool": "load_data",
        "function": "mlpilot.platform.ml.steps:load_data",
        "args": {"path": str(lab / "sales.csv"), "target": "sales", "task": "auto"},
    }
    step = {"tool": "optuna_witness", "function": f"{PLUGIN}:run_witness",
            "args": {"contained": ROOT}}  # fmt: skip
    _plant(lab, "with-plugin", [load, step])
    refused = _mlpilot(lab, "worker", "--study", "with-plugin", "--trials", "1", timeout=300)
    assert refused.returncode != 0 and f"{PLUGIN}:run_witness" in _one_line(refused.stderr)

    done = _mlpilot(
        lab, "worker", "--study", "with-plugin", "--trials", "2", "--plugins", PLUGIN,
        "--json", timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["ran"] == 2
    study = optuna.load_study(study_name="with-plugin", storage=_storage(lab))
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    # both trials completed: the witness in each ran as the pipelines' account and reached
    # nothing of the journal (it fails its trial otherwise)
