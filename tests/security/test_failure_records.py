"""Failures the red team found (issue 24, "Reliability"), reproduced for real: each ends in
one line and a terminal record in both stores, and leaves nothing half-done.

A full disk is a small tmpfs mounted as ``MLPILOT_HOME`` (root only, as CI runs); a kill
while recording stops the real ``mlpilot run`` the moment it reports RECORDING.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, invoke_cli, local_env, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CSV = "a,b,y\n" + "".join(f"{i},{i * 2 + i % 3},{i % 2}\n" for i in range(60))


def _plan(folder: Path, *steps: dict[str, Any]) -> tuple[Path, Path]:
    """The data file and a saved plan that loads it, fits a linear model, then ``steps``."""
    folder.mkdir(parents=True, exist_ok=True)
    data, plan = folder / "data.csv", folder / "plan.json"
    data.write_text(CSV)
    first = [
        {"tool": "load_data", "args": {"path": str(data), "target": "y"}},
        {"tool": "train_model", "args": {"model": "linear"}},
    ]
    plan.write_text(json.dumps({"steps": first + list(steps)}))
    return data, plan


def _run_args(data: Path, plan: Path) -> list[str]:
    return ["run", "predict y", "--plan", str(plan), "--data", str(data), "--engine", "cpu"]


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _stores(home: Path, run_id: str) -> tuple[str, dict[str, Any]]:
    """The run's MLflow status and its metadata document."""
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    status = MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(run_id).info.status
    store = connect(Settings.from_env({"MLPILOT_HOME": str(home)}))
    try:
        return status, store.get_run(run_id)
    finally:
        store.close()


def _newest_doc(home: Path) -> dict[str, Any]:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    store = connect(Settings.from_env({"MLPILOT_HOME": str(home)}))
    try:
        docs = store.find_runs({}, limit=1)
    finally:
        store.close()
    assert docs, "no run document"
    return docs[0]


class StoppedAtRecording:
    """``mlpilot run`` in the background, stopped (SIGSTOP) as soon as it prints RECORDING:
    its document then says RECORDING (the state is written before it is shown)."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [MLPILOT, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            cwd=cwd,
        )
        assert self.proc.stderr is not None
        seen = b""
        while b"\xe2\x97\x8f RECORDING" not in seen:  # "● RECORDING"
            byte = os.read(self.proc.stderr.fileno(), 1)
            assert byte, f"the run ended before RECORDING: {seen.decode(errors='replace')}"
            seen += byte
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.seen = seen.decode(errors="replace")

    def resume(self, timeout: float = 300) -> tuple[int, str]:
        os.kill(self.proc.pid, signal.SIGCONT)
        _, rest = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, self.seen + rest.decode(errors="replace")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)  # nothing of mlpilot runs on
        self.proc.communicate(timeout=60)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``mount(size)``: a fresh tmpfs of that size (unmounted afterwards)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root (CI runs as root)")
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _resize(folder: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)


def _fill(folder: Path) -> Path:
    """Write a file until the disk under ``folder`` is full."""
    filler = folder / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as exc:
            assert exc.errno == 28, exc  # ENOSPC
    return filler


def test_a_full_disk_on_a_fresh_home_is_one_line_and_leaves_nothing_half_made(
    small_disk: Callable[[str], Path], tmp_path: Path
) -> None:
    disk = small_disk("300k")
    home = disk / "home"
    data, plan = _plan(tmp_path / "work")
    done = run_cli(*_run_args(data, plan), env=local_env(home), cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = _error_lines(done.stderr)
    assert len(lines) == 1 and "no space left on" in lines[0], done.stderr[-2000:]
    assert not list(home.glob(".mlflow.db.*")), "the store's copy was left behind"
    store = home / "mlflow.db"
    assert not store.exists() or store.stat().st_size == 0  # never a half-made schema
    _resize(disk, "64m")  # space is back: the next command works
    again = run_cli(*_run_args(data, plan), "--json", env=local_env(home), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    outcome = json.loads(again.stdout)
    assert outcome["status"] == "SUCCEEDED"
    status, doc = _stores(home, outcome["run_id"])
    assert status == "FINISHED" and doc["status"] == "SUCCEEDED"


def test_a_full_disk_while_recording_fails_the_run_in_both_stores(
    small_disk: Callable[[str], Path], tmp_path: Path
) -> None:
    disk = small_disk("96m")
    home = disk / "home"
    data, plan = _plan(tmp_path / "work")
    running = StoppedAtRecording(_run_args(data, plan), local_env(home), tmp_path)
    run_id = _newest_doc(home)["_id"]
    filler = _fill(disk)
    code, stderr = running.resume()
    assert code == 1 and "Traceback" not in stderr, stderr[-3000:]
    lines = _error_lines(stderr)
    assert len(lines) == 1 and "no space left on" in lines[0], stderr[-2000:]
    filler.unlink()
    status, doc = _stores(home, run_id)
    assert status == "FAILED" and doc["status"] == "FAILED"  # never left RUNNING
    assert "no space left on" in doc["error"]["message"]
    assert doc["error"]["stage"] == "RECORDING"


@pytest.mark.parametrize("planted", [False, True], ids=["result", "linked-result"])
def test_a_kill_while_recording_is_repaired_from_the_pipelines_result(
    planted: bool, tmp_path: Path
) -> None:
    """SIGKILL while recording a run that succeeded and registered @champion: the repair
    reads the run folder's result and ends it SUCCEEDED, its version kept. A result the
    repair would reach only through a link is not read: that run ends FAILED."""
    from mlflow import MlflowClient

    home = tmp_path / "home"
    register = {"tool": "register_model", "args": {"name": "kept", "alias": "champion"}}
    data, plan = _plan(tmp_path / "work", register)
    running = StoppedAtRecording(_run_args(data, plan), local_env(home), tmp_path)
    doc = _newest_doc(home)
    assert doc["status"] == "RECORDING"
    running.kill()
    run_id, folder = doc["_id"], Path(doc["run_dir"]).resolve()
    if planted:  # the real result elsewhere, a link in its place
        elsewhere = tmp_path / "elsewhere.json"
        (folder / "result.json").replace(elsewhere)
        (folder / "result.json").symlink_to(elsewhere)
    done = invoke_cli("doctor", "--repair", env=local_env(home))
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    status, repaired = _stores(home, run_id)
    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    version = client.get_model_version_by_alias("kept", "champion")
    assert version.run_id == run_id  # the registered version stays, whatever the verdict
    if planted:
        assert status == "FAILED" and repaired["status"] == "FAILED", done.stdout
        return
    assert status == "FINISHED" and repaired["status"] == "SUCCEEDED", done.stdout
    assert repaired["model"]["registered_name"] == "kept"
    assert repaired["model"]["version"] == str(version.version)
    assert repaired["model"]["uri"] and "test_accuracy" in repaired["metrics"]
    assert repaired["events"][-1]["state"] == "SUCCEEDED"


def test_mongodb_credentials_against_a_server_without_scram(nx_server: Any, tmp_path: Path) -> None:
    """nx-27017 has no SCRAM: pymongo's own KeyError('payload') becomes one line."""
    home = tmp_path / "home"
    uri = f"mongodb://someone:s3cret@127.0.0.1:{nx_server.port}/"
    env = local_env(home, MLPILOT_MONGO_URI=uri)
    data, plan = _plan(tmp_path / "work")
    for args in (["runs", "list"], _run_args(data, plan)):
        done = run_cli(*args, env=env, cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
        lines = _error_lines(done.stderr)
        assert len(lines) == 1, done.stderr[-2000:]
        assert f"127.0.0.1:{nx_server.port}" in lines[0] and "SCRAM" in lines[0]
        assert "KeyError" in lines[0] and "s3cret" not in done.stderr + done.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A home with one run that logged a model (and registered nothing)."""
    folder = tmp_path_factory.mktemp("trained")
    home = folder / "home"
    data, plan = _plan(folder / "work")
    done = run_cli(*_run_args(data, plan), "--json", env=local_env(home), cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return home, json.loads(done.stdout)["run_id"]


@pytest.mark.parametrize("alias", ["bad'alias", "v3", "latest"])
def test_a_refused_alias_registers_nothing(alias: str, trained: tuple[Path, str]) -> None:
    home, run_id = trained
    env = local_env(home)
    done = invoke_cli("models", "register", run_id, "--name", "m", "--alias", alias, env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = _error_lines(done.stderr)
    assert len(lines) == 1 and f"alias {alias!r} is refused" in lines[0]
    listed = invoke_cli("models", "list", "--json", env=env)
    assert "m" not in {m["name"] for m in json.loads(listed.stdout)}  # nor any version
    promoted = invoke_cli("models", "promote", "m", "1", "--alias", alias, env=env)
    assert promoted.returncode == 1 and "is refused" in promoted.stderr


def test_a_good_alias_still_registers(trained: tuple[Path, str]) -> None:
    home, run_id = trained
    env = local_env(home)
    done = invoke_cli("models", "register", run_id, "--name", "ok", "--alias", "champion", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = {
        m["name"]: m for m in json.loads(invoke_cli("models", "list", "--json", env=env).stdout)
    }
    assert listed["ok"]["aliases"] == {"champion": "1"}
