"""Trust anchors out of the pipelines' reach (DESIGN §8).

Model digests and the digests of generated scripts are checked against the home's
owner-only ``private/anchors`` store, never against what a pipeline can write (MLflow's
tags, artifacts, run folders). The attacks are delivered as REAL contained plugin steps of
another run (as root, every home's pipelines share the ``mlpilot-run`` account): rewrite a
logged model's pickle and its digest tags, plant an anchor in another home, rewrite an
earlier run's ``pipeline.py``. Where a pipeline can no longer reach the file at all, the
test does the rewrite itself, as the attacker, and the anchor must still catch it.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, invoke_cli, local_env, run_cli

pytestmark = [pytest.mark.integration]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the user drop applies only as root")


class _Boom:
    """A pickle that runs a shell command when it is loaded."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (self.command,)


ATTACK = '''
import json
import os
import sqlite3
from pathlib import Path

from mlpilot.platform.tools import tool
from mlpilot.tracking.trust import digest_folder

TARGET = json.loads({target!r})


@tool(kind="pipeline", stage="train", runtime="anchor_attack:run_attack")
def anchor_attack() -> None:
    """Rewrite another home's model, its digest tags, its anchors and its script."""


def _try(report, name, action):
    try:
        action()
        report[name] = "done"
    except Exception as exc:
        report[name] = f"refused: {{type(exc).__name__}}"


def _tags(digests):
    value = json.dumps(digests, sort_keys=True)
    with sqlite3.connect(TARGET["db"]) as db:
        db.execute(
            "UPDATE logged_model_tags SET tag_value = ? WHERE model_id = ? AND tag_key = ?",
            (value, TARGET["model_id"], "mlpilot.model.sha256"),
        )
        db.execute(
            "UPDATE tags SET value = ? WHERE run_uuid = ? AND key = ?",
            (value, TARGET["run_id"], "mlpilot.model.sha256"),
        )


def _script():
    script = Path(TARGET["script"])
    text = script.read_text().replace("    return run.exit_code", TARGET["injected"], 1)
    fresh = script.with_name(".pipeline.py.new")
    fresh.write_text(text)
    fresh.replace(script)


def run_attack(run) -> None:
    report = {{}}
    _try(report, "pickle", lambda: Path(TARGET["pickle"]).write_bytes(bytes.fromhex(TARGET["boom"])))
    _try(report, "tags", lambda: _tags(digest_folder(Path(TARGET["pickle"]).parent)))
    for name in ("anchors", "anchors/models"):
        folder = Path(TARGET["private"]) / name
        _try(report, f"list {{name}}", lambda folder=folder: os.listdir(folder))
    forged = Path(TARGET["private"]) / "anchors" / "models" / "forged.json"
    _try(report, "plant anchor", lambda: forged.write_text("{{}}"))
    _try(report, "script", _script)
    (run.run_dir / "attack.json").write_text(json.dumps(report))
'''


def _plan(lab: Path, *steps: dict[str, Any]) -> Path:
    plan = lab / f"plan-{uuid.uuid4().hex[:6]}.json"
    load = {"tool": "load_data", "args": {"path": str(lab / "sales.csv"), "target": "sales"}}
    plan.write_text(json.dumps({"steps": [load, *steps]}))
    return plan


def _run(lab: Path, home: Path, plan: Path, *extra: str) -> dict[str, Any]:
    argv = [MLPILOT, "run", "anchors", "--plan", str(plan), "--data", str(lab / "sales.csv")]
    env = {**os.environ, **local_env(home, PYTHONPATH=str(lab / "plugins"))}
    done = subprocess.run(
        [*argv, *extra, "--json"], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return errors[0]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mlpilot.platform.datasets import make_sales, write_table

    base = tmp_path_factory.mktemp("anchors")
    write_table(make_sales(200, seed=5), base / "sales.csv")
    (base / "plugins").mkdir()
    (base / "rows.csv").write_text(
        (base / "sales.csv").read_text().splitlines()[0] + "\n"
        + "\n".join((base / "sales.csv").read_text().splitlines()[1:4]) + "\n"
    )  # fmt: skip
    return base


@pytest.fixture(scope="module")
def victim(lab: Path) -> dict[str, Any]:
    """Home A's run: a logged model, anchored by the parent, and its ``pipeline.py``."""
    home = lab / "home-a"
    outcome = _run(lab, home, _plan(lab, {"tool": "train_model", "args": {"model": "linear"}}))
    assert outcome["status"] == "SUCCEEDED" and outcome["model_uri"].startswith("models:/m-")
    script = Path(outcome["run_dir"]) / "pipeline.py"
    return {
        "home": home,
        "outcome": outcome,
        "model_id": outcome["model_uri"].removeprefix("models:/"),
        "script": script,
        "original": script.read_text(),
    }


@pytest.fixture(scope="module")
def attacked(lab: Path, victim: dict[str, Any]) -> dict[str, Any]:
    """Home B's run whose plugin step goes after home A (every home's pipelines share one
    account): A's model pickle and digest tags, A's private store, A's pipeline.py."""
    home = victim["home"]
    pickles = [p for p in (home / "artifacts").rglob("model.pkl") if victim["model_id"] in str(p)]
    assert len(pickles) == 1, pickles
    marker = lab / f"loaded-{uuid.uuid4().hex[:6]}"
    ran = lab / f"ran-{uuid.uuid4().hex[:6]}"
    target = {
        "db": str(home / "mlflow.db"),
        "model_id": victim["model_id"],
        "run_id": victim["outcome"]["run_id"],
        "pickle": str(pickles[0]),
        "boom": pickle.dumps(_Boom(f"touch {marker}")).hex(),
        "private": str(home / "private"),
        "script": str(victim["script"]),
        "injected": f"    open({str(ran)!r}, 'w').close()\n    return run.exit_code",
    }
    (lab / "plugins" / "anchor_attack.py").write_text(
        textwrap.dedent(ATTACK).format(target=json.dumps(target))
    )
    plan = _plan(lab, {"tool": "anchor_attack", "args": {}})
    outcome = _run(lab, lab / "home-b", plan, "--plugins", "anchor_attack")
    report = json.loads((Path(outcome["run_dir"]) / "attack.json").read_text())
    if os.environ.get("MLPILOT_REDTEAM_LOG"):  # what the attack achieved (README.md)
        with open(os.environ["MLPILOT_REDTEAM_LOG"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"delivery": "plugin step of another home", **report}) + "\n")
    # what the pipeline could not do itself, the test does as the attacker: the anchor
    # must catch the rewrite however it came about
    if report["pickle"] != "done":
        pickles[0].write_bytes(bytes.fromhex(target["boom"]))
    if report["script"] != "done":
        text = victim["original"].replace("    return run.exit_code", target["injected"], 1)
        victim["script"].write_text(text)
    return {**victim, "report": report, "marker": marker, "ran": ran}


def _env(home: Path, **extra: str) -> dict[str, str]:
    return local_env(home, **extra)


@pytest.fixture(scope="module")
def linkable(lab: Path) -> dict[str, Any]:
    """One more run whose files the link tests swap: its model (one test), its script
    (the other): each test plants its link in a different file."""
    home = lab / "home-link"
    outcome = _run(lab, home, _plan(lab, {"tool": "train_model", "args": {"model": "linear"}}))
    return {"home": home, "outcome": outcome}


# -- model digests ------------------------------------------------------------------------
@needs_root
def test_a_pipeline_cannot_reach_another_homes_anchors(attacked: dict[str, Any]) -> None:
    report = attacked["report"]
    for name in ("list anchors", "list anchors/models", "plant anchor"):
        # refused by permissions, or hidden by its own mounts (test homes live in /tmp)
        assert report[name].startswith(
            ("refused: PermissionError", "refused: FileNotFoundError")
        ), report
    assert not list((attacked["home"] / "private").rglob("forged.json"))
    anchors = attacked["home"] / "private" / "anchors"
    entries = [p for p in anchors.rglob("*") if p.is_file()]
    assert entries and all(p.stat().st_mode & 0o777 == 0o600 for p in entries)
    folders = [anchors, *(p for p in anchors.rglob("*") if p.is_dir())]
    assert all(p.stat().st_mode & 0o777 == 0o700 and p.stat().st_uid == 0 for p in folders)


def test_a_rewritten_model_and_its_tags_are_refused(lab: Path, attacked: dict[str, Any]) -> None:
    home, uri = attacked["home"], attacked["outcome"]["model_uri"]
    verify = invoke_cli("models", "verify", uri, env=_env(home))
    assert verify.returncode == 1, verify.stdout
    assert "does not match its recorded digests: changed model.pkl" in " ".join(
        (verify.stdout + verify.stderr).split()
    )
    out = lab / f"preds-{uuid.uuid4().hex[:6]}.csv"
    args = ("--model", uri, "--data", str(lab / "rows.csv"), "--out", str(out))
    done = run_cli("predict", *args, env=_env(home), cwd=lab)
    line = _one_line(done.stderr)
    assert done.returncode == 1 and "does not match its recorded digests" in line, line
    assert not attacked["marker"].exists() and not out.exists()
    # the refused copy is not left in the predict folder for the next pipeline to read
    assert not list(home.glob("runs/predict-*/model-verified/**/model.pkl"))


def test_another_home_cannot_vouch_for_a_model(lab: Path, attacked: dict[str, Any]) -> None:
    """Home B's owner records the rewritten model against A's store: only B trusts it."""
    home_a, uri = attacked["home"], attacked["outcome"]["model_uri"]
    other = _env(lab / "home-b", MLFLOW_TRACKING_URI=f"sqlite:///{home_a / 'mlflow.db'}")
    recorded = invoke_cli("models", "verify", uri, "--record", env=other)
    assert recorded.returncode == 0 and "this home's private store" in recorded.stdout
    assert invoke_cli("models", "verify", uri, env=other).returncode == 0
    verify = invoke_cli("models", "verify", uri, env=_env(home_a))
    assert verify.returncode == 1 and "changed model.pkl" in verify.stdout + verify.stderr


def test_digests_only_in_tags_are_not_trusted(lab: Path) -> None:
    """A model from before the anchor store: its tags name its digests, but tags are
    writable by pipelines, so it is unverified until its owner records it."""
    home = lab / "home-legacy"
    outcome = _run(lab, home, _plan(lab, {"tool": "train_model", "args": {"model": "linear"}}))
    shutil.rmtree(home / "private" / "anchors" / "models")  # as a home made before it
    uri = outcome["model_uri"]
    out = lab / f"preds-{uuid.uuid4().hex[:6]}.csv"
    predict = ("predict", "--model", uri, "--data", str(lab / "rows.csv"), "--out", str(out))
    done = run_cli(*predict, env=_env(home), cwd=lab)
    line = _one_line(done.stderr)
    assert done.returncode == 1 and "only MLflow tags" in line and "--record" in line, line
    assert invoke_cli("models", "verify", uri, "--record", env=_env(home)).returncode == 0
    again = run_cli(*predict, env=_env(home), cwd=lab)
    assert again.returncode == 0, again.stderr[-2000:]
    assert out.is_file()


@needs_root
def test_a_link_planted_in_the_artifact_store_is_not_followed(
    lab: Path, linkable: dict[str, Any]
) -> None:
    """A model file swapped for a link to a root-only file: mlpilot (root) copies the
    model without following it, so the file is missing, the load refused, and nothing
    of the link's target lands where a pipeline could read it."""
    home, outcome = linkable["home"], linkable["outcome"]
    model_id = outcome["model_uri"].removeprefix("models:/")
    (pkl,) = [p for p in (home / "artifacts").rglob("model.pkl") if model_id in str(p)]
    pkl.unlink()
    pkl.symlink_to("/etc/shadow")
    verify = invoke_cli("models", "verify", outcome["model_uri"], env=_env(home))
    assert verify.returncode == 1 and "missing model.pkl" in verify.stdout + verify.stderr
    args = ("--model", outcome["model_uri"], "--data", str(lab / "rows.csv"))
    done = run_cli("predict", *args, env=_env(home), cwd=lab)
    assert done.returncode == 1 and "missing model.pkl" in _one_line(done.stderr)
    shadow = Path("/etc/shadow").read_bytes()
    copies = [p for p in home.glob("runs/predict-*/**/*") if p.is_file()]
    assert not [p for p in copies if p.read_bytes() == shadow], copies


# -- script digests -----------------------------------------------------------------------
def _by_hand(script: Path, lab: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """``python pipeline.py`` as the README suggests, as the home's owner."""
    env = {**os.environ, **local_env(home)}
    env.pop("MLPILOT_LAUNCHED_AT", None)
    argv = [sys.executable, str(script), "--data", str(lab / "sales.csv"), "--no-track"]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env=env, cwd=script.parent
    )


def test_an_untouched_script_reruns_without_a_word(lab: Path) -> None:
    other = lab / "home-untouched"
    outcome = _run(lab, other, _plan(lab, {"tool": "train_model", "args": {"model": "linear"}}))
    done = _by_hand(Path(outcome["run_dir"]) / "pipeline.py", lab, other)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warning:" not in done.stderr and "error:" not in done.stderr, done.stderr[-2000:]


def test_a_rewritten_script_is_refused_against_its_home(
    lab: Path, attacked: dict[str, Any]
) -> None:
    script = attacked["script"]
    assert "open(" in script.read_text()  # the rewrite is there
    done = _by_hand(script, lab, attacked["home"])
    line = _one_line(done.stderr)
    assert done.returncode == 1 and str(script) in line and "not run" in line, line
    assert not attacked["ran"].exists()


def test_a_copy_elsewhere_warns_and_runs(
    lab: Path, attacked: dict[str, Any], tmp_path: Path
) -> None:
    copy = tmp_path / "pipeline.py"
    copy.write_text(attacked["original"])
    done = _by_hand(copy, lab, attacked["home"])
    assert done.returncode == 0, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "digest was not checked" in warnings[0], done.stderr[-2000:]


def test_a_script_linked_out_of_its_folder_is_refused(
    lab: Path, linkable: dict[str, Any], tmp_path: Path
) -> None:
    """A ``pipeline.py`` swapped for a link: the check reads no link, and refuses."""
    other, outcome = linkable["home"], linkable["outcome"]
    script = Path(outcome["run_dir"]) / "pipeline.py"
    elsewhere = tmp_path / "evil.py"
    elsewhere.write_text(script.read_text())
    script.unlink()
    script.symlink_to(elsewhere)
    done = _by_hand(script, lab, other)
    assert done.returncode == 1 and "not run" in _one_line(done.stderr)


# -- the settings file ----------------------------------------------------------------------
def test_a_refused_settings_file_is_never_to_be_trusted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    planted = home / "mlpilot.toml"
    planted.write_text('MLPILOT_CHILD_USER = "none"\n')
    if ROOT:
        os.chown(planted, 65534, 65534)  # as a pipeline's account leaves it
    else:
        planted.chmod(0o666)
    done = run_cli("runs", "list", env=_env(home))
    line = _one_line(done.stderr)
    assert done.returncode == 1 and "another account could have written it" in line, line
    assert "chown" not in line and "chmod" not in line, line
    assert f"delete {planted}" in line and "write your own" in line, line
