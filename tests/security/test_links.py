"""Links and files a pipeline plants in its run folder for the root parent to follow.

Each attack is a real ``--plugins`` pipeline step of a contained run (as in
``test_redteam.py``): the step plants a link (``stdout.txt`` → a root-only file, the run-id
names → a root-only file, ``cancel-requested`` → a path outside, ``result.json`` →
``/etc/shadow``), a FIFO or a huge sparse file, or rewrites ``pipeline.py``. The parent
must follow none of them: the secret reaches no MLflow artifact and no store record, the
root-only file is unchanged, nothing is created outside, and the run ends in one clear
line with a terminal state in both stores.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, invoke_cli, local_env

pytestmark = [pytest.mark.integration]
ROOT = os.geteuid() == 0
SECRET = "mlpilot-links-secret-7f3a"
MARKER = "mlpilot-links-marker"
#: larger than anything the parent reads of a pipeline's files, sparse (no disk used)
HUGE = 1536 * 2**20


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the sales data, a root-only secret and the plugin module."""
    from mlpilot.platform.datasets import make_sales, write_table

    if not ROOT:
        pytest.skip("mlpilot is not root here: the user drop (and so these attacks) do not apply")
    base = tmp_path_factory.mktemp("links")
    write_table(make_sales(200, seed=5), base / "sales.csv")
    secret = base / "secret.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    plugins = base / "plugins"
    plugins.mkdir()
    (plugins / "links.py").write_text(_plugin_source(secret, base / "outside"))
    return base


def _plugin_source(secret: Path, outside: Path) -> str:
    return textwrap.dedent(
        f'''
        import json
        import os
        import sys
        import time

        from mlpilot.platform.tools import tool

        SECRET, OUTSIDE = {str(secret)!r}, {str(outside)!r}


        @tool(kind="pipeline", stage="train", runtime="links:run_attack")
        def links_attack(attack: str) -> None:
            """Plant links and files in the run folder for the parent to follow.

            Args:
                attack: Which attack.
            """


        def _try(report, what, action):
            try:
                action()
                report[what] = "done"
            except Exception as exc:
                report[what] = f"refused: {{type(exc).__name__}}"


        def _replace(path, make):
            if os.path.lexists(path):
                os.unlink(path)
            make(path)


        def _link(target):
            return lambda path: os.symlink(target, path)


        def _huge(path):
            with open(path, "wb") as fh:
                fh.truncate({HUGE})


        def plant(run, report):
            folder = str(run.run_dir)
            print("{MARKER} stdout", flush=True)
            print("{MARKER} stderr", file=sys.stderr, flush=True)
            for name in ("stdout.txt", "stderr.txt", "mlflow_run_id", "mlflow_run_id.tmp"):
                _try(report, name, lambda: _replace(f"{{folder}}/{{name}}", _link(SECRET)))
            script = f"{{folder}}/pipeline.py"
            injected = "import os; os.system('id > /tmp/mlpilot-links-pwned')\\n"

            def rewrite():
                with open(script, "a") as fh:
                    fh.write(injected)

            def swap():
                os.rename(script, script + ".old")

            def chmod():
                os.chmod(script, 0o666)

            for what, action in (("pipeline.py write", rewrite), ("pipeline.py rename", swap),
                                 ("pipeline.py chmod", chmod)):
                _try(report, what, action)


        def run_attack(run, attack):
            report = {{}}
            folder = str(run.run_dir)
            if attack == "plant":
                plant(run, report)
            elif attack == "cancel":
                _replace(f"{{folder}}/cancel-requested", _link(OUTSIDE))
            elif attack == "result-link":
                _replace(f"{{folder}}/result.json", _link("/etc/shadow"))
            elif attack == "huge":
                _replace(f"{{folder}}/events.jsonl", _huge)
                _replace(f"{{folder}}/result.json", _huge)
            elif attack == "fifo":
                _replace(f"{{folder}}/events.jsonl", os.mkfifo)
                _replace(f"{{folder}}/result.json", os.mkfifo)
            with open(f"{{folder}}/links.json", "w") as fh:
                json.dump(report, fh)
            if attack == "cancel":
                time.sleep(120)  # the parent stops it
            elif attack != "plant":
                os._exit(0)  # no result of its own: the planted one is all the parent finds
        '''
    )


def _start(lab: Path, attack: str, **env: str) -> tuple[Path, subprocess.Popen[str]]:
    home = lab / f"home-{attack}"
    plan = lab / f"plan-{uuid.uuid4().hex[:6]}.json"
    load = {"tool": "load_data", "args": {"path": str(lab / "sales.csv"), "target": "sales"}}
    step = {"tool": "links_attack", "args": {"attack": attack}}
    plan.write_text(json.dumps({"steps": [load, step]}))
    argv = [
        MLPILOT, "run", "links", "--plan", str(plan), "--data", str(lab / "sales.csv"),
        "--plugins", "links", "--json", "--engine", "cpu",
    ]  # fmt: skip
    full = {**os.environ, **local_env(home, PYTHONPATH=str(lab / "plugins"), **env)}
    proc = subprocess.Popen(
        argv, text=True, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    return home, proc


def _both_stores(home: Path, run_id: str) -> tuple[Any, dict[str, Any]]:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    run = MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(run_id)
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(run_id)
    return run, doc


def _artifacts(home: Path, run_id: str) -> dict[str, bytes]:
    """Every artifact of the run, by path, as MLflow returns it."""
    import tempfile

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(client.download_artifacts(run_id, "", tmp))
        return {
            str(p.relative_to(local)): p.read_bytes()
            for p in sorted(local.rglob("*"))
            if p.is_file() and not p.is_symlink()
        }


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return errors[0]


def _assert_secret_nowhere(home: Path, run: Any, doc: dict[str, Any], lab: Path) -> None:
    artifacts = _artifacts(home, run.info.run_id)
    leaked = [name for name, data in artifacts.items() if SECRET.encode() in data]
    assert leaked == [], leaked
    assert SECRET not in json.dumps(doc, default=str)
    assert SECRET not in json.dumps(run.data.tags) + json.dumps(run.data.params)
    assert (lab / "secret.txt").read_text() == SECRET
    assert stat.S_IMODE((lab / "secret.txt").stat().st_mode) == 0o600


def test_planted_links_and_a_rewritten_script_reach_nothing(lab: Path) -> None:
    """stdout/stderr and the run-id names linked to a root-only file; pipeline.py changed."""
    home, proc = _start(lab, "plant")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    outcome = json.loads(stdout)
    run_dir = Path(outcome["run_dir"])
    report = json.loads((run_dir / "links.json").read_text())
    run, doc = _both_stores(home, outcome["run_id"])
    assert (run.info.status, doc["status"]) == ("FINISHED", "SUCCEEDED")
    _assert_secret_nowhere(home, run, doc, lab)
    # the parent's own files stand in the sticky folder: the pipeline could not swap them
    for name in ("stdout.txt", "stderr.txt"):
        assert report[name].startswith("refused: PermissionError"), report
        assert not (run_dir / name).is_symlink()
    # no run id is handed to the pipeline any more (the parent relays its records): the
    # planted names are left as the pipeline made them, never written through
    assert outcome["run_id"] not in (run_dir / "mlflow_run_id").read_text(errors="replace")
    # the logs are what the parent read from the pipes
    artifacts = _artifacts(home, outcome["run_id"])
    assert f"{MARKER} stdout".encode() in artifacts["logs/stdout.txt"]
    assert f"{MARKER} stderr".encode() in artifacts["logs/stderr.txt"]
    # pipeline.py: root's, read-only, unchanged, what MLflow holds; a rerun runs that code
    script = run_dir / "pipeline.py"
    assert all(
        report[f"pipeline.py {how}"].startswith("refused") for how in ("write", "rename", "chmod")
    ), report
    info = script.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode) & 0o222) == (0, 0)
    # while it ran the folder was sticky; once it ends it is sealed: root's alone
    folder = run_dir.stat()
    assert folder.st_uid == 0
    assert stat.S_IMODE(folder.st_mode) & (stat.S_ISVTX | 0o022) in (stat.S_ISVTX, 0)
    assert script.read_bytes() == artifacts["pipeline.py"]
    assert b"mlpilot-links-pwned" not in script.read_bytes()
    assert not Path("/tmp/mlpilot-links-pwned").exists()


#: attack → what the one error line must say
FAILING = {
    "result-link": "result.json in the run folder is a link",
    "huge": "result.json in the run folder is 1610612736 bytes",
    "fifo": "result.json in the run folder is not a regular file",
}


def test_planted_results_and_events_end_failed_in_one_line(lab: Path) -> None:
    """result.json → /etc/shadow, a FIFO, a 1.5 GB file; events.jsonl a FIFO or 1.5 GB."""
    shadow = Path("/etc/shadow").read_bytes() if Path("/etc/shadow").exists() else b""
    started = {attack: _start(lab, attack) for attack in FAILING}
    for attack, (home, proc) in started.items():
        began = time.monotonic()
        stdout, stderr = proc.communicate(timeout=300)
        line = _one_line(stderr)
        assert proc.returncode == 1 and FAILING[attack] in line, (attack, line)
        outcome = json.loads(stdout)
        run, doc = _both_stores(home, outcome["run_id"])
        assert (run.info.status, doc["status"]) == ("FAILED", "FAILED"), attack
        assert FAILING[attack] in doc["error"]["message"]
        _assert_secret_nowhere(home, run, doc, lab)
        for data in _artifacts(home, outcome["run_id"]).values():
            assert not (shadow and shadow.splitlines()[0] in data)
        assert time.monotonic() - began < 300


def test_a_cancel_link_creates_nothing_outside(lab: Path) -> None:
    """``cancel-requested`` → a path outside: the run stops, nothing appears there."""
    outside = lab / "outside"
    home, proc = _start(lab, "cancel")
    stdout, stderr = proc.communicate(timeout=300)
    outcome = json.loads(stdout)
    run, doc = _both_stores(home, outcome["run_id"])
    # the planted entry is a cancel request (an entry of that name counts; none is followed)
    assert (run.info.status, doc["status"]) == ("KILLED", "CANCELLED"), stderr[-2000:]
    assert proc.returncode != 0 and "Traceback" not in stderr
    assert not outside.exists() and not outside.is_symlink()
    # `runs cancel` of an ended run writes nothing either
    done = invoke_cli("runs", "cancel", outcome["run_id"], env={"MLPILOT_HOME": str(home)})
    assert "already ended CANCELLED" in done.stdout + done.stderr
    assert not outside.exists()


def test_runs_cancel_replaces_a_planted_link(tmp_path: Path) -> None:
    """The cancel request through a planted link: the link goes, its target never appears."""
    from mlpilot.platform.agent.cancelling import request_cancel

    run_dir, outside = tmp_path / "run", tmp_path / "outside" / "created"
    run_dir.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(outside, run_dir / "cancel-requested")
    request_cancel(run_dir)
    assert not outside.exists()
    entry = run_dir / "cancel-requested"
    assert not entry.is_symlink() and entry.is_file()


# -- the same links through the executor alone, in a folder without the sticky bit ----------
def _hostile_leg(tmp_path: Path, code: str) -> tuple[Any, Path, Path]:
    """Start ``code`` as a contained pipeline that has no MLflow run yet."""
    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution import Executor

    if not ROOT:
        pytest.skip("mlpilot is not root here: the user drop does not apply")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    script = tmp_path / "hostile.py"
    script.write_text(textwrap.dedent(code.replace("SECRET_PATH", repr(str(secret)))))
    run_dir = tmp_path / "home" / "runs" / "r1"
    executor = Executor(Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home")}))
    leg = executor.start_leg(
        script=script, run_dir=run_dir, engine="cpu", data_path=None, mlflow_run_id=None
    )
    return leg, run_dir, secret


def _wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_handing_over_the_run_writes_nothing_into_the_run_folder(tmp_path: Path) -> None:
    """Both old run-id names linked to a root-only file: the parent tells only its relay
    which MLflow run the leg logs to, so nothing is written through either link."""
    leg, run_dir, secret = _hostile_leg(
        tmp_path,
        """
        import os, time
        for name in ("mlflow_run_id", "mlflow_run_id.tmp"):
            os.symlink(SECRET_PATH, name)
        open("planted", "w").close()
        time.sleep(1)
        print("done")
        """,
    )
    _wait_for(run_dir / "planted")
    leg.hand_over_run("run-123")
    done = leg.finish()
    assert done.child.ok, done.child.stderr[-2000:]
    assert secret.read_text() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert all((run_dir / name).is_symlink() for name in ("mlflow_run_id", "mlflow_run_id.tmp"))
    assert b"run-123" not in b"".join(
        p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()
    )


def test_the_logged_output_is_what_the_parent_read_from_the_pipes(tmp_path: Path) -> None:
    """stdout.txt and stderr.txt swapped for links (no sticky bit here): the captured copy
    the parent logs holds what the pipeline printed, never the link's target."""
    leg, run_dir, secret = _hostile_leg(
        tmp_path,
        f"""
        import os, sys
        for name in ("stdout.txt", "stderr.txt"):
            try:
                os.unlink(name)
                os.symlink(SECRET_PATH, name)
            except PermissionError:  # the run folder is the parent's: stopped a layer earlier
                print("unlink refused", flush=True)
        print("{MARKER} out", flush=True)
        print("{MARKER} err", file=sys.stderr, flush=True)
        """,
    )
    done = leg.finish()
    assert done.child.ok, done.child.stderr[-2000:]
    assert (
        f"{MARKER} out".encode() in done.child.stdout and SECRET.encode() not in done.child.stdout
    )
    assert (
        f"{MARKER} err".encode() in done.child.stderr and SECRET.encode() not in done.child.stderr
    )
    assert secret.read_text() == SECRET
    # the pipeline's own link, never followed — or it could not even plant it
    assert (run_dir / "stdout.txt").is_symlink() or b"unlink refused" in done.child.stdout
