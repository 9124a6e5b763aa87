"""The whole process tree of a pipeline is contained (DESIGN §8, tier 1; issue 24 item 4).

Each test starts a hostile script exactly as mlpilot starts a pipeline — through the
executor, its launcher, its namespaces, Landlock and seccomp — and checks from outside
what the attack achieved: daemons that try to outlive their run, Unix sockets of the host,
writes past the disk cap outside the run folder, privileged system calls, and one run
going after another. They need root (namespaces, a uid per run) and skip without it,
except the ones that also hold for an unprivileged mlpilot.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.execution import Executor, LegResult, StartedLeg

pytestmark = [pytest.mark.integration]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="mlpilot is not root here: no namespaces")


def start(tmp_path: Path, code: str, name: str = "r1", **settings: str) -> StartedLeg:
    """Start ``code`` as a pipeline of the home under ``tmp_path`` (run folder ``name``)."""
    env = {"MLPILOT_HOME": str(tmp_path / "home"), **settings}
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    return Executor(Settings.from_env(env)).start_leg(
        script=script,
        run_dir=tmp_path / "home" / "runs" / name,
        engine="cpu",
        data_path=None,
        mlflow_run_id=f"run-{name}",
    )


def run(tmp_path: Path, code: str, name: str = "r1", **settings: str) -> tuple[LegResult, str]:
    leg = start(tmp_path, code, name, **settings).finish()
    out = leg.child.stdout_path.read_text() if leg.child.stdout_path else ""
    return leg, out


def processes_with(text: str) -> list[int]:
    """Live processes of this host whose command line holds ``text`` (zombies aside)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


# -- no process outlives its run --------------------------------------------------------------
DAEMONS = """
    import os, subprocess, sys, time
    mark = {mark!r}
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)", mark]

    def setsid_daemon():
        if os.fork() == 0:
            os.setsid()
            os.execv(sys.executable, sleeper + ["setsid"])

    def double_fork():
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, sleeper + ["double-fork"])
            os._exit(0)

    def new_group():
        if os.fork() == 0:
            os.setpgid(0, 0)
            os.execv(sys.executable, sleeper + ["setpgid"])

    def nohup_popen():
        subprocess.Popen(sleeper + ["popen"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    for start in (setsid_daemon, double_fork, new_group, nohup_popen):
        start()
    time.sleep(1.5)  # they are running now (the test sees them from outside)
    open("daemons.started", "w").write("4")
    time.sleep(2)  # while the test looks
    {end}
"""


@needs_root
@pytest.mark.parametrize("end", ["pass", "time.sleep(60)"], ids=["exits", "timed-out"])
def test_no_daemon_outlives_its_run(tmp_path: Path, end: str) -> None:
    mark = f"mlpilot-daemon-{uuid.uuid4().hex[:8]}"
    timeout = "8" if end != "pass" else "60"
    leg = start(tmp_path, DAEMONS.format(mark=mark, end=end), MLPILOT_RUN_TIMEOUT=timeout)
    started = leg.run_dir / "daemons.started"
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    seen = processes_with(mark)
    result = leg.finish()
    assert started.exists() and len(seen) >= 4, seen  # each kind really ran
    assert result.child.timed_out == (end != "pass")
    assert processes_with(mark) == [], "a daemon outlived its run"
    assert result.containment is not None and result.containment.tree.startswith("own PID")


@needs_root
def test_the_pipeline_sees_only_its_own_processes(tmp_path: Path) -> None:
    code = """
        import os
        print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), os.getppid())
    """
    leg, out = run(tmp_path, code)
    pids, parent = out.rsplit(maxsplit=1)
    assert leg.child.ok and json.loads(pids) == [1, 2] and parent == "1"


@needs_root
def test_exit_status_and_signals_are_reported_as_before(tmp_path: Path) -> None:
    leg, _ = run(tmp_path, "import sys; sys.exit(3)")
    assert leg.child.returncode == 3 and leg.child.signal_name is None
    leg, _ = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "r2")
    assert leg.child.returncode == -11 and leg.child.signal_name == "SIGSEGV"
    assert "killed by SIGSEGV" in leg.failure()["message"]
    leg, _ = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "r3")
    assert leg.child.returncode == -9 and leg.child.signal_name == "SIGKILL"


@needs_root
def test_cancel_ends_the_whole_tree(tmp_path: Path) -> None:
    mark = f"mlpilot-cancel-{uuid.uuid4().hex[:8]}"
    leg = start(tmp_path, DAEMONS.format(mark=mark, end="time.sleep(60)"))
    cancel = threading.Event()
    started = leg.run_dir / "daemons.started"
    threading.Thread(target=lambda: (_wait_for(started), cancel.set()), daemon=True).start()
    begun = time.monotonic()
    result = leg.finish(cancel=cancel)
    assert result.child.cancelled and time.monotonic() - begun < 30
    assert processes_with(mark) == []


def _wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


# -- the host's sockets and /tmp ----------------------------------------------------------------
class UnixListener:
    """A Unix socket of the test's (anyone may connect): what reached it is recorded."""

    def __init__(self, address: str) -> None:
        self.address, self.received = address, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        if not address.startswith("\0"):
            os.chmod(address, 0o777)
        self.sock.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(100) or b"connected")

    def close(self) -> None:
        self.sock.close()
        if not self.address.startswith("\0"):
            Path(self.address).unlink(missing_ok=True)


@pytest.fixture
def unix_listeners() -> Iterator[dict[str, UnixListener]]:
    tag = uuid.uuid4().hex[:8]
    listeners = {
        "tmp": UnixListener(f"/tmp/mlpilot-test-{tag}.sock"),
        "run": UnixListener(f"/run/mlpilot-test-{tag}.sock"),
        "abstract": UnixListener(f"\0mlpilot-test-{tag}"),
    }
    yield listeners
    for listener in listeners.values():
        listener.close()


CONNECT = """
    import os, socket
    for name, address in {addresses!r}.items():
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(address)
                sock.sendall(b"escaped")
            print(name, "CONNECTED")
        except OSError as exc:
            print(name, "refused", type(exc).__name__)
    print("visible", os.path.exists({planted!r}))
    with open("/tmp/from-the-pipeline-{tag}", "w") as fh:
        fh.write("x")
"""


@needs_root
# no store keeps a pipeline on the host network any more (the parent reaches them for it)
@pytest.mark.parametrize("network", ["isolated"])
def test_host_unix_sockets_and_tmp_are_out_of_reach(
    tmp_path: Path, unix_listeners: dict[str, UnixListener], network: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    planted = Path(f"/tmp/mlpilot-planted-{tag}")
    planted.write_text("host")
    addresses = {name: listener.address for name, listener in unix_listeners.items()}
    # a tracking server keeps the host's network (and so its abstract sockets) in reach
    settings = {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"} if network != "isolated" else {}
    try:
        leg, out = run(
            tmp_path, CONNECT.format(addresses=addresses, planted=str(planted), tag=tag), **settings
        )
    finally:
        planted.unlink()
    assert leg.child.ok, leg.child.stderr_path.read_text() if leg.child.stderr_path else ""
    assert "CONNECTED" not in out and out.count("refused") == 3, out
    assert all(listener.received == [] for listener in unix_listeners.values())
    assert "visible False" in out  # the host's /tmp is not the pipeline's
    assert not Path(f"/tmp/from-the-pipeline-{tag}").exists()  # nor the other way round
    assert leg.containment is not None and leg.containment.network.startswith(network)


# -- the disk cap counts every write -----------------------------------------------------------
FILL = """
    import os, time
    target = {target!r}.replace("$MLPILOT_HOME", os.environ["MLPILOT_HOME"])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    written = 0
    try:
        with open(target, "wb") as fh:
            for _ in range(400):
                fh.write(b"x" * 2**20)
                fh.flush()
                written += 1
                time.sleep(0.03)
    except OSError as exc:
        print("refused", exc.errno, written, flush=True)
    time.sleep({linger})  # the parent's next look finds it over the cap
    print("FINISHED", written)
"""


@needs_root
@pytest.mark.parametrize(
    "target",
    ["/tmp/fill.bin", "/dev/shm/fill.bin", "/var/tmp/fill.bin"],
)
def test_the_disk_cap_counts_writes_outside_the_run_folder(tmp_path: Path, target: str) -> None:
    home = tmp_path / "home"
    leg, out = run(tmp_path, FILL.format(target=target, linger=10), MLPILOT_MAX_RUN_DISK_MB="50")
    assert leg.child.disk_exceeded and not leg.ok and "FINISHED" not in out, out
    assert "MLPILOT_MAX_RUN_DISK_MB" in leg.failure()["message"]
    assert not (home / "fill.bin").exists()


@needs_root
def test_the_home_takes_no_write_at_all(tmp_path: Path) -> None:
    """$MLPILOT_HOME is the parent's: the first write is refused, nothing lands there."""
    # refused at once: there is no cap to wait for
    _leg, out = run(tmp_path, FILL.format(target="$MLPILOT_HOME/fill.bin", linger=0))
    assert "refused" in out and " 0\n" in out.split("FINISHED")[0], out
    assert not (tmp_path / "home" / "fill.bin").exists()


@needs_root
def test_writes_outside_the_allowed_folders_are_refused(tmp_path: Path) -> None:
    """Landlock: even where the file modes would allow it (a world-writable folder)."""
    open_dir = tmp_path / "world-writable"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    code = f"""
        for path in ({str(open_dir / "x")!r}, "/var/lib/mlpilot-escape", "/dev/mlpilot-escape"):
            try:
                open(path, "w").write("x"); print("WROTE", path)
            except OSError as exc:
                print("refused", type(exc).__name__)
        open("mine.txt", "w").write("ok")
    """
    leg, out = run(tmp_path, code)
    assert leg.child.ok and "WROTE" not in out and out.count("refused") == 3, out
    assert not (open_dir / "x").exists()
    assert (leg.run_dir / "mine.txt").read_text() == "ok"
    assert leg.containment is not None and "Landlock" in leg.containment.filesystem


# -- privileges ----------------------------------------------------------------------------------
SYSCALLS = """
    import ctypes, errno, os
    libc = ctypes.CDLL(None, use_errno=True)
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
    print("NoNewPrivs", status["NoNewPrivs"].strip(), "Seccomp", status["Seccomp"].strip())

    def call(name, result):
        print(name, "allowed" if result >= 0 else errno.errorcode[ctypes.get_errno()])

    call("unshare", libc.unshare(0x10000000))  # CLONE_NEWUSER
    call("ptrace", libc.ptrace(0, 0, None, None))  # PTRACE_TRACEME
    call("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
    call("keyctl", libc.syscall(250, 0, -1, 0))  # KEYCTL_GET_KEYRING_ID
    call("bpf", libc.syscall(321, 0, None, 0))
    call("perf_event_open", libc.syscall(298, None, 0, -1, -1, 0))
    # what pipelines do need still works: threads, forked workers, numpy
    import threading, multiprocessing, numpy
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print("pool", sum(pool.map(abs, [-1, -2])), "numpy", int(numpy.arange(4).sum()))
"""


@needs_root
def test_no_new_privs_and_the_seccomp_filter(tmp_path: Path) -> None:
    leg, out = run(tmp_path, SYSCALLS)
    assert leg.child.ok, leg.child.stderr_path.read_text() if leg.child.stderr_path else ""
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert lines["NoNewPrivs"] == "1 Seccomp 2"
    for call in ("unshare", "ptrace", "mount", "keyctl", "bpf", "perf_event_open"):
        assert lines[call] == "EPERM", (call, out)
    assert lines["pool"] == "3 numpy 6"
    assert leg.containment is not None and "seccomp filter" in leg.containment.privileges


def test_no_new_privs_holds_without_root_too(tmp_path: Path) -> None:
    leg, out = run(tmp_path, "print(open('/proc/self/status').read())")
    assert leg.child.ok and "NoNewPrivs:\t1" in out
    assert leg.containment is not None and "no_new_privs" in leg.containment.privileges


# -- runs side by side ------------------------------------------------------------------------------
VICTIM = """
    import os, time
    open("victim.started", "w").write(str(os.getuid()))
    time.sleep(8)
    print("SURVIVED")
"""
ATTACKER = """
    import os, signal
    print("uid", os.getuid())
    for pid in {pids!r}:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, sig); print("SIGNALLED", pid)
            except OSError as exc:
                print("refused", type(exc).__name__)
    for path in ({cancel!r}, {victim_file!r}):
        try:
            open(path, "w").write("x"); print("WROTE", path)
        except OSError as exc:
            print("refused", type(exc).__name__)
"""


@needs_root
def test_runs_cannot_signal_or_cancel_each_other(tmp_path: Path) -> None:
    victim = start(tmp_path, VICTIM, "victim")
    _wait_for(victim.run_dir / "victim.started")
    pids = processes_with(str(tmp_path / "victim.py"))
    assert pids
    attacker, out = run(
        tmp_path,
        ATTACKER.format(
            pids=pids,
            cancel=str(victim.run_dir / "cancel"),
            victim_file=str(victim.run_dir / "victim.started"),
        ),
        "attacker",
    )
    result = victim.finish()
    assert attacker.child.ok and "SIGNALLED" not in out and "WROTE" not in out, out
    assert result.child.ok and "SURVIVED" in result.child.stdout_path.read_text()
    victim_uid = (victim.run_dir / "victim.started").read_text()
    assert f"uid {victim_uid}" not in out  # each run has a uid of its own


@needs_root
def test_root_files_in_the_run_folder_stay_roots(tmp_path: Path) -> None:
    """And a second leg in the same folder (a CPU fallback) gets the first one's files."""
    run_dir = tmp_path / "home" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text("{}")
    code = """
        import os
        for attempt in (lambda: open("plan.json", "w"), lambda: os.remove("plan.json"),
                        lambda: os.rename("mine.txt", "plan.json")):
            open("mine.txt", "w").write("x")
            try:
                attempt(); print("CHANGED")
            except OSError as exc:
                print("refused", type(exc).__name__)
    """
    leg, out = run(tmp_path, code)
    assert leg.child.ok and "CHANGED" not in out and out.count("refused") == 3, out
    assert (run_dir / "plan.json").read_text() == "{}"
    # after the run nothing in the folder is left to its uid (a later run may get it)
    from mlpilot.platform.execution.containment import SEALED_ID

    assert all(p.lstat().st_uid in (0, SEALED_ID) for p in [run_dir, *run_dir.rglob("*")])
    assert (run_dir / "mine.txt").lstat().st_uid == SEALED_ID
    again, out = run(tmp_path, "open('mine.txt', 'w').write('second leg'); print('rewrote')")
    assert again.child.ok and "rewrote" in out, again.child.stderr_path.read_text()
    assert (run_dir / "mine.txt").read_text() == "second leg"


@needs_root
def test_a_fork_bomb_no_longer_starves_another_run(tmp_path: Path) -> None:
    """The process limit counts one run's uid: a bomb at its limit leaves the others be."""
    bomb = start(
        tmp_path,
        "import os\nwhile True:\n    os.fork()",
        "bomb",
        MLPILOT_MAX_PROCESSES="64",
        MLPILOT_RUN_TIMEOUT="60",
    )
    code = """
        import threading
        threads = [threading.Thread(target=lambda: None) for _ in range(32)]
        for t in threads: t.start()
        for t in threads: t.join()
        print("THREADS OK")
    """
    other, out = run(tmp_path, code, "other", MLPILOT_MAX_PROCESSES="64")
    bombed = bomb.finish()
    assert other.child.ok and "THREADS OK" in out
    assert not bombed.ok and processes_with(str(tmp_path / "bomb.py")) == []


def test_a_step_that_cannot_be_applied_ends_the_launcher_with_one_line(tmp_path: Path) -> None:
    """Nothing runs uncontained by surprise: status 97 and one line, the command never ran."""
    import subprocess
    import sys

    from mlpilot.platform.execution._launch import FAILED_TO_CONTAIN
    from mlpilot.platform.execution.containment import launcher_command

    marker = tmp_path / "ran"
    # a Landlock rule whose folder vanishes is skipped; a working folder that is not there
    # (as root: after the mounts) or limits of an unknown name are not
    spec = {"tree": ROOT, "cwd": str(tmp_path / "gone"), "limits": {"RLIMIT_BOGUS": 1}}
    done = subprocess.run(
        launcher_command(spec, [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == FAILED_TO_CONTAIN and not marker.exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlpilot could not contain the pipeline:")


@needs_root
def test_other_homes_are_hidden(tmp_path: Path) -> None:
    """/home and /root are empty but for what the run needs (the interpreter, its stores)."""
    someone = Path(f"/home/mlpilot-test-{uuid.uuid4().hex[:8]}")
    someone.mkdir(mode=0o755)
    (someone / "notes.txt").write_text("world-readable")
    (someone / "notes.txt").chmod(0o644)
    code = f"""
        import os
        print("home", os.path.exists({str(someone / "notes.txt")!r}))
        print("ssh", os.path.exists("/root/.ssh"))
    """
    try:
        leg, out = run(tmp_path, code)
    finally:
        (someone / "notes.txt").unlink()
        someone.rmdir()
    assert leg.child.ok and "home False" in out and "ssh False" in out, out
    assert leg.containment is not None and "/home and /root hidden" in leg.containment.filesystem


@needs_root
def test_a_uid_is_never_handed_out_twice_nor_while_a_process_of_it_lives(tmp_path: Path) -> None:
    import subprocess

    from mlpilot.platform.execution.containment import claim_ids

    slots = tmp_path / "slots"
    first = claim_ids(tmp_path / "a", folder=str(slots))
    second = claim_ids(tmp_path / "b", folder=str(slots))
    assert first.uid != second.uid and (slots / str(first.slot)).read_text() == str(tmp_path / "a")
    first.release()
    # a leftover process of the released uid (what a vanished run could leave): skipped
    uid = first.uid
    leftover = subprocess.Popen(["sleep", "30"], user=uid, group=uid, extra_groups=[])
    try:
        _wait_until(lambda: f"\t{uid}\t" in Path(f"/proc/{leftover.pid}/status").read_text())
        third = claim_ids(tmp_path / "c", folder=str(slots))
        assert third.uid not in (first.uid, second.uid)
    finally:
        leftover.kill()
        leftover.wait()
    third.release()
    assert claim_ids(tmp_path / "d", folder=str(slots)).uid == first.uid  # free again
    second.release()


def _wait_until(check: object, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
