"""The pipeline process's own containment (DESIGN §8, tier 1), payload by payload.

Each test starts a hostile script exactly as mlpilot starts a pipeline — through the
executor, its launcher and its limits — and checks that the innermost layer stops it and
that the parent survives to say why. They run as the real user of this machine; the tests
that need root to mean anything skip, saying so, when mlpilot is not root.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.execution import Executor, LegResult

pytestmark = [pytest.mark.integration]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="mlpilot is not root here: no user to drop")


def run_script(tmp_path: Path, code: str, **settings: str) -> tuple[LegResult, str]:
    """Run ``code`` as a pipeline of a fresh home; return the leg and what it printed."""
    env = {"MLPILOT_HOME": str(tmp_path / "home"), **settings}
    script = tmp_path / "hostile.py"
    script.write_text(textwrap.dedent(code))
    executor = Executor(Settings.from_env(env))
    leg = executor.start_leg(
        script=script,
        run_dir=tmp_path / "home" / "runs" / "r1",
        engine="cpu",
        data_path=None,
        mlflow_run_id="run-1",
    ).finish()
    out = leg.child.stdout_path.read_text() if leg.child.stdout_path else ""
    return leg, out


@needs_root
def test_the_pipeline_runs_unprivileged_and_says_so(tmp_path: Path) -> None:
    leg, out = run_script(tmp_path, "import os; print(os.geteuid(), os.getegid(), os.getgroups())")
    uid, gid, groups = out.split(maxsplit=2)
    # the run's own uid and gid, and no group: it shares no store with anyone
    assert leg.child.ok and int(uid) != 0 and int(gid) != 0 and groups.strip() == "[]"
    assert leg.containment is not None and f"uid {uid}" in leg.containment.user


@needs_root
@pytest.mark.parametrize(
    "target",
    ["/etc/shadow", "/root/.ssh/id_rsa", "/root/.bash_history", "/root/.mlpilot-secret"],
)
def test_secrets_of_root_stay_unreadable(tmp_path: Path, target: str) -> None:
    code = f"""
        try:
            open({target!r}).read(); print("READ")
        except (PermissionError, FileNotFoundError) as exc:
            print(type(exc).__name__)
    """
    leg, out = run_script(tmp_path, code)
    assert leg.child.ok and out.strip() != "READ"
    if target.startswith("/root/"):
        # /root is closed to the pipeline (0700), or (as root: a mount namespace) an empty
        # folder but for what the run needs: the interpreter, the stores
        listing = run_script(
            tmp_path,
            "import os\ntry: print(os.listdir('/root'))\nexcept PermissionError: print('denied')",
        )[1]
        assert listing.strip() == "denied" or repr(target.split("/")[2]) not in listing, listing


@needs_root
@pytest.mark.parametrize("target", ["/etc/mlpilot-escape", "/root/mlpilot-escape", "/usr/lib/x"])
def test_writing_outside_the_run_folder_fails(tmp_path: Path, target: str) -> None:
    code = f"""
        try:
            open({target!r}, "w").write("x"); print("WROTE")
        except (PermissionError, FileNotFoundError) as exc:
            print(type(exc).__name__)
        open("inside.txt", "w").write("ok")
    """
    leg, out = run_script(tmp_path, code)
    assert leg.child.ok and out.strip() != "WROTE" and not Path(target).exists()
    assert (tmp_path / "home" / "runs" / "r1" / "inside.txt").read_text() == "ok"


@needs_root
def test_the_network_is_closed_when_the_stores_are_local_files(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=3); print("CONNECTED")
            except OSError as exc:
                print("refused", type(exc).__name__)
            with socket.socket() as own:  # its own loopback works
                own.bind(("127.0.0.1", 0)); print("loopback")
        """
        leg, out = run_script(tmp_path, code)
    assert leg.child.ok and "CONNECTED" not in out and "loopback" in out
    assert leg.containment is not None and leg.containment.network.startswith("isolated")


def test_server_stores_keep_no_pipeline_on_the_network(tmp_path: Path) -> None:
    # the pipeline talks to no store (the parent logs to MLflow for it and serves its study
    # through the proxy): neither a tracking nor an Optuna server keeps it on the network
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    leg, _ = run_script(tmp_path / "a", "pass", MLFLOW_TRACKING_URI="http://127.0.0.1:9")
    assert leg.containment is not None
    assert leg.containment.network.startswith("isolated" if ROOT else "not isolated")
    storage = "postgresql://mlpilot@127.0.0.1:9/optuna"
    leg, _ = run_script(tmp_path / "b", "pass", MLPILOT_OPTUNA_STORAGE=storage)
    assert leg.containment is not None
    assert leg.containment.network.startswith("isolated" if ROOT else "not isolated")


@needs_root
def test_a_fork_bomb_hits_the_process_limit(tmp_path: Path) -> None:
    code = """
        import os, sys, time
        children = 0
        try:
            while children < 10_000:
                if os.fork() == 0:
                    time.sleep(5)
                    os._exit(0)
                children += 1
        except (BlockingIOError, OSError):
            print("stopped after", children, flush=True)
    """
    leg, out = run_script(tmp_path, code, MLPILOT_MAX_PROCESSES="64", MLPILOT_RUN_TIMEOUT="60")
    assert "stopped after" in out and int(out.split()[-1]) < 64
    assert leg.containment is not None and leg.containment.limits["processes"] == "64"


def test_a_file_past_the_size_limit_is_refused(tmp_path: Path) -> None:
    code = """
        try:
            with open("big.bin", "wb") as fh:
                fh.write(b"x" * (3 * 2**20))
            print("WROTE")
        except OSError as exc:
            print("refused", exc.errno)
    """
    _, out = run_script(tmp_path, code, MLPILOT_MAX_FILE_MB="1")
    assert out.strip() == "refused 27"  # EFBIG
    assert (tmp_path / "home" / "runs" / "r1" / "big.bin").stat().st_size <= 2**20


def test_a_run_folder_past_its_disk_cap_is_stopped(tmp_path: Path) -> None:
    code = """
        import time
        for i in range(200):
            with open(f"part{i}.bin", "wb") as fh:
                fh.write(b"x" * 2**20)
            time.sleep(0.05)
        print("FINISHED")
    """
    leg, out = run_script(tmp_path, code, MLPILOT_MAX_RUN_DISK_MB="20")
    assert "FINISHED" not in out and leg.child.disk_exceeded and not leg.ok
    assert "MLPILOT_MAX_RUN_DISK_MB" in leg.failure()["message"]


def test_allocating_past_the_address_space_limit_is_a_memory_error(tmp_path: Path) -> None:
    code = """
        try:
            block = bytearray(12 * 2**30)
            print("ALLOCATED")
        except MemoryError:
            print("MemoryError")
    """
    leg, out = run_script(tmp_path, code, MLPILOT_MEMORY_BUDGET_MB="256")
    assert out.strip() == "MemoryError"
    assert leg.containment is not None and "address space" in leg.containment.limits


def test_the_environment_holds_no_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("MLPILOT_MONGO_URI", "mongodb://user:pw@db/x")
    leg, out = run_script(tmp_path, "import os; print(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in out and "MLPILOT_MONGO_URI" not in out and leg.child.ok


def test_an_infinite_loop_ends_at_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    leg, _ = run_script(tmp_path, "while True: pass", MLPILOT_RUN_TIMEOUT="2")
    assert leg.child.timed_out and time.monotonic() - start < 15
    assert "limit" in leg.failure()["message"]


def test_the_pipeline_dies_with_its_parent(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL: no handler runs) takes its pipeline with it."""
    marker = tmp_path / "run" / "child.pid"  # the pipeline writes only inside its folder
    parent = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from mlpilot.platform.config import Settings
        from mlpilot.platform.execution import Executor
        script = Path({str(tmp_path / "sleeper.py")!r})
        script.write_text("import os, time\\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\\ntime.sleep(120)")
        Executor(Settings.from_env({{"MLPILOT_HOME": {str(tmp_path / "home")!r}}})).start_leg(
            script=script, run_dir=Path({str(tmp_path / "run")!r}), engine="cpu",
            data_path=None, mlflow_run_id="x")
        time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    # its pid inside its own PID namespace means nothing here: find it as this host sees it
    pids = _pids_running(str(tmp_path / "sleeper.py"))
    assert pids and marker.exists()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, pids))


def _pids_running(script: str) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if script in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"
