"""Tier-1 containment: scrubbed environment, limits, a timeout that kills the whole group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mlpilot.platform.execution import Limits, scrubbed_env
from mlpilot.platform.execution.sandbox import run_child


def test_environment_allow_list_drops_secrets() -> None:
    source = {
        "PATH": "/bin",
        "NVIDIA_API_KEY": "nvapi-secret",
        "OPENAI_API_KEY": "sk-secret",
        "MLPILOT_MONGO_URI": "mongodb://user:pw@db",
        "AWS_SECRET_ACCESS_KEY": "for-artifacts",
        "MLFLOW_TRACKING_TOKEN": "t",
        "RANDOM_VAR": "x",
        "LC_ALL": "C.UTF-8",
    }
    env = scrubbed_env({"MLFLOW_RUN_ID": "abc", "OPENAI_API_KEY": "again"}, source)
    assert env == {
        "PATH": "/bin",
        "AWS_SECRET_ACCESS_KEY": "for-artifacts",
        "MLFLOW_TRACKING_TOKEN": "t",
        "LC_ALL": "C.UTF-8",
        "MLFLOW_RUN_ID": "abc",
    }


def test_child_sees_only_the_scrubbed_environment(tmp_path: Path) -> None:
    env = scrubbed_env({"PATH": os.environ["PATH"]}, {"NVIDIA_API_KEY": "secret"})
    code = "import os, resource; print(sorted(os.environ)); print(resource.getrlimit(resource.RLIMIT_CORE)[0])"
    result = run_child(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, limits=Limits(timeout_s=30)
    )
    out = result.stdout_path.read_text()
    assert result.ok and "NVIDIA_API_KEY" not in out and out.splitlines()[1] == "0"


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('grandchild.pid', 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    result = run_child(
        [sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), limits=Limits(timeout_s=2)
    )
    assert result.timed_out and not result.ok and time.monotonic() - start < 20
    pid = int((tmp_path / "grandchild.pid").read_text())
    time.sleep(0.5)
    try:
        os.kill(pid, 0)
        alive = Path(f"/proc/{pid}/status").read_text().find("zombie") == -1
    except ProcessLookupError:
        alive = False
    assert not alive, "the grandchild survived the timeout"


def test_output_is_capped(tmp_path: Path) -> None:
    code = "import sys\nfor _ in range(2000): sys.stdout.write('x' * 1000 + '\\n')"
    result = run_child(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=dict(os.environ),
        limits=Limits(timeout_s=30, output_mb=0.1),
    )
    assert result.ok and "stdout" in result.truncated
    assert result.stdout_path.stat().st_size < 120_000


def test_a_leg_never_learns_an_mlflow_run_id(tmp_path: Path, monkeypatch: object) -> None:
    """The pipeline logs through its run folder: no MLFLOW_RUN_ID reaches it (not even one
    inherited from mlpilot's own caller), and handing the run over writes nothing there."""
    import json

    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution import Executor

    monkeypatch.setenv("MLFLOW_RUN_ID", "outer-run")  # type: ignore[attr-defined]
    script = tmp_path / "show_env.py"
    script.write_text(
        "import json, os, pathlib\n"
        "keys = ('MLFLOW_RUN_ID', 'MLPILOT_RELAY')\n"
        "seen = {k: os.environ.get(k) for k in keys}\n"
        "pathlib.Path('seen.json').write_text(json.dumps(seen))\n"
    )
    executor = Executor(Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home")}))
    leg = executor.start_leg(
        script=script, run_dir=tmp_path / "run", engine="cpu", data_path=None, mlflow_run_id=None
    )
    leg.hand_over_run("the-run")
    done = leg.finish()
    assert done.child.ok, done.child.stderr_path.read_text()  # type: ignore[union-attr]
    seen = json.loads((tmp_path / "run" / "seen.json").read_text())
    assert seen == {"MLFLOW_RUN_ID": None, "MLPILOT_RELAY": "1"}
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.name != ".shared-v1") == [
        "seen.json",
        "stderr.txt",
        "stdout.txt",
    ]


def test_mlpilots_own_folders_stay_in_sight_of_a_contained_pipeline() -> None:
    """A checkout (editable install) under /tmp or /home: the private mounts cover it, so
    the pipeline would not find ``mlpilot.platform`` unless its folders are bound back."""
    import mlpilot.platform.execution.containment as containment
    import mlpilot.tracking

    kept = containment._interpreter_paths()
    here = Path(containment.__file__).resolve().parents[1]  # the platform package's folder
    assert here in kept and Path(mlpilot.tracking.__file__).resolve().parent in kept
    assert here.parent not in kept or here.parent == Path(sys.prefix)  # not the checkout
