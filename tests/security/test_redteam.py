"""The red-team suite: each payload delivered every way it could reach mlpilot.

Payloads (``payloads.py``) arrive as a plugin step and as a validly logged model with
matching digests (both reach the pipeline child's own containment), as a tampered model, a
saved plan, an LLM reply from the scripted server and a data file. Every run must end
blocked or with one clear line, recorded in both stores, never ``RUNNING``; the parent
always survives. ``README.md`` beside this file tabulates what these tests observe.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, invoke_cli, local_env, run_cli

pytestmark = [pytest.mark.integration]
PAYLOADS = Path(__file__).with_name("payloads.py")
ROOT = os.geteuid() == 0
KEY_FILE = Path("/root/.ssh/mlpilot-redteam-key")


# -- fixtures -----------------------------------------------------------------------------
class Listener:
    """A TCP server of the test: any connection a payload makes is recorded here."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(100))


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.sock.close()


@pytest.fixture(scope="module")
def planted() -> Iterator[None]:
    """A private key of root's for the payloads to go after."""
    if not ROOT:
        yield
        return
    created = not KEY_FILE.parent.exists()
    KEY_FILE.parent.mkdir(mode=0o700, exist_ok=True)
    KEY_FILE.write_text("-----BEGIN OPENSSH PRIVATE KEY----- redteam")
    KEY_FILE.chmod(0o600)
    yield
    KEY_FILE.unlink(missing_ok=True)
    if created:
        shutil.rmtree(KEY_FILE.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, listener: Listener, planted: None) -> Path:
    """A folder with a home, the sales data and the red-team plugin module."""
    from mlpilot.platform.datasets import make_sales, write_table

    base = tmp_path_factory.mktemp("redteam")
    write_table(make_sales(300, seed=3), base / "sales.csv")
    plugins = base / "plugins"
    plugins.mkdir()
    shutil.copy(PAYLOADS, plugins / "redteam_payloads.py")
    (plugins / "redteam.py").write_text(_plugin_source(base / "home", listener.port))
    return base


def _plugin_source(home: Path, port: int) -> str:
    return textwrap.dedent(
        f'''
        import json

        from mlpilot.platform.tools import tool

        import redteam_payloads as payloads


        @tool(kind="pipeline", stage="train", runtime="redteam:run_probe")
        def redteam_probe() -> None:
            """Try every payload that leaves the process alive."""


        @tool(kind="pipeline", stage="train", runtime="redteam:run_fatal")
        def redteam_fatal(payload: str) -> None:
            """Run one payload that does not come back.

            Args:
                payload: Which payload.
            """


        def run_probe(run) -> None:
            report = payloads.probe({str(home)!r}, {port})
            (run.run_dir / "redteam.json").write_text(json.dumps(report))


        def run_fatal(run, payload: str) -> None:
            payloads.fatal(payload, str(run.run_dir))
        '''
    )


def _env(home: Path, **extra: str) -> dict[str, str]:
    # the keys are what a payload goes after: the child must never see them
    keys = {"OPENAI_API_KEY": "sk-redteam", "NVIDIA_API_KEY": "nvapi-redteam"}
    return local_env(home, **{**keys, **extra})


def _plugin_argv(lab: Path, step: dict[str, Any]) -> list[str]:
    """``mlpilot run`` of a saved plan: load the sales data, then ``step`` of the plugin."""
    plan = lab / f"plan-{uuid.uuid4().hex[:6]}.json"
    load = {"tool": "load_data", "args": {"path": str(lab / "sales.csv"), "target": "sales"}}
    plan.write_text(json.dumps({"steps": [load, step]}))
    return [
        MLPILOT, "run", "red team", "--plan", str(plan), "--data", str(lab / "sales.csv"),
        "--plugins", "redteam", "--json",
    ]  # fmt: skip


def _both_stores(home: Path, run_id: str) -> tuple[str, dict[str, Any]]:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    run = MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(run_id)
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(home)})).get_run(run_id)
    return run.info.status, doc


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return errors[0]


# -- the probe: survivable payloads -------------------------------------------------------
def _assert_contained(report: dict[str, str], home: Path, listener: Listener) -> None:
    """What every survivable payload achieved, from inside the child."""
    assert report["environment"] == "has ", report["environment"]
    if not ROOT:
        pytest.skip("mlpilot is not root here: the user drop and the namespace are not applied")
    assert report["socket"].startswith("refused") and listener.received == []
    assert not report["whoami"].startswith("uid 0"), report["whoami"]
    for path in ("/etc/shadow", str(KEY_FILE), "$HOME/private/metadata.db"):
        # root's home and /tmp (where test homes live) are hidden by the pipeline's own
        # mounts: not even there for it, or refused by the permissions
        assert report[f"read {path}"].startswith(
            ("refused: PermissionError", "refused: FileNotFoundError")
        ), report
    for path in ("/etc/mlpilot-redteam", "/root/mlpilot-redteam"):
        assert report[f"write {path}"].startswith("refused: PermissionError")
        assert not Path(path).exists()
    # the MLflow store is the parent's alone; an early-started pipeline may even run before
    # the parent has created it (then there is nothing to remove yet)
    removal = report["remove $HOME/mlflow.db"]
    assert removal.startswith(("refused: PermissionError", "refused: FileNotFoundError")), report
    assert (home / "mlflow.db").is_file()
    for way in ("os.system", "__subclasses__"):
        assert "exit status 0" not in report[way] and "exit status" in report[way], report[way]
    assert "Permission denied" in report["subprocess"] and not report["subprocess"].startswith(
        "done: exit 0"
    )


def test_a_plugin_step_is_contained(lab: Path, listener: Listener) -> None:
    home = lab / "home"
    argv = _plugin_argv(lab, {"tool": "redteam_probe", "args": {}})
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300,
        env={**os.environ, **_env(home, PYTHONPATH=str(lab / "plugins"))},
    )  # fmt: skip
    outcome = json.loads(done.stdout)
    report = json.loads((Path(outcome["run_dir"]) / "redteam.json").read_text())
    _write_observed("plugin step", report)
    with _planted_settings(home):
        # as root, the home is not the pipeline account's to write (the MLflow store is no
        # longer shared: the parent logs for it), so no settings file can be planted there
        assert done.returncode == 0, done.stderr[-2000:]
        if ROOT:
            assert report["write $HOME/mlpilot.toml"].startswith("refused: PermissionError")
            assert not (home / "mlpilot.toml").exists()
    status, doc = _both_stores(home, outcome["run_id"])
    assert (status, doc["status"]) == ("FINISHED", "SUCCEEDED")
    _assert_contained(report, home, listener)


@contextlib.contextmanager
def _planted_settings(home: Path) -> Iterator[None]:
    """Remove the settings file a payload planted, whatever the assertions say."""
    try:
        yield
    finally:
        (home / "mlpilot.toml").unlink(missing_ok=True)


#: payload → the limit that must stop it, and the settings of its run
FATAL = {
    "infinite loop": ("MLPILOT_RUN_TIMEOUT", {"MLPILOT_RUN_TIMEOUT": "6"}),
    "10**10**8": ("MLPILOT_RUN_TIMEOUT", {"MLPILOT_RUN_TIMEOUT": "6"}),
    "10 GB write": ("MLPILOT_MAX_FILE_MB", {"MLPILOT_MAX_FILE_MB": "16"}),
    "fork bomb": ("MLPILOT_MAX_PROCESSES", {"MLPILOT_MAX_PROCESSES": "64"}),
}


def test_fatal_payloads_end_failed_in_one_line(lab: Path) -> None:
    """Each payload that never comes back: the run FAILED in both stores, saying which limit."""
    # the process limit counts every process of the run's own uid, so the fork bomb runs
    # beside the others, and only where there is such a uid (as root): elsewhere it would
    # be a real one
    batches = [("infinite loop", "10**10**8", "10 GB write") + ("fork bomb",) * ROOT]
    for batch in batches:
        started = {}
        for payload in batch:
            home = lab / f"home-{payload.split()[0].replace('*', '')}"
            argv = _plugin_argv(lab, {"tool": "redteam_fatal", "args": {"payload": payload}})
            limits = FATAL[payload][1]
            env = {**os.environ, **_env(home, PYTHONPATH=str(lab / "plugins"), **limits)}
            started[payload] = (home, subprocess.Popen(argv, text=True, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE))  # fmt: skip
        for payload, (home, proc) in started.items():
            stdout, stderr = proc.communicate(timeout=240)
            line = _one_line(stderr)
            outcome = json.loads(stdout)
            _write_observed(f"plugin step: {payload}", {"outcome": line})
            assert proc.returncode == 1 and outcome["status"] == "FAILED"
            assert FATAL[payload][0] in line, line
            status, doc = _both_stores(home, outcome["run_id"])
            assert status == "FAILED" and doc["status"] == "FAILED"
            _assert_no_process_left(home)


def _assert_no_process_left(home: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        left = [p for p in Path("/proc").glob("[0-9]*") if str(home) in _cmdline(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == [], f"{len(left)} processes of the run outlived it"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- models: valid and hostile, and tampered -------------------------------------------------
MODEL_SOURCE = '''
import json

import mlflow.pyfunc

import redteam_payloads as payloads


class Hostile(mlflow.pyfunc.PythonModel):
    """A model whose own code is the attack; logged and registered the normal way."""

    def __init__(self, home: str, port: int) -> None:
        self.home, self.port = home, port

    def predict(self, context, model_input, params=None):
        return [json.dumps(payloads.probe(self.home, self.port))] * len(model_input)
'''

LOG_MODEL = """
import sys
from pathlib import Path

import mlflow

sys.path.insert(0, sys.argv[1])
from redteam_model import Hostile

from mlpilot.platform.config import Settings
from mlpilot.tracking.mlflow_store import ensure_experiment, make_client

settings = Settings.from_env({"MLPILOT_HOME": sys.argv[2]})
experiment = ensure_experiment(make_client(settings), "redteam", settings.artifact_root)
mlflow.set_tracking_uri(settings.tracking_uri)
folder = Path(sys.argv[1])
with mlflow.start_run(experiment_id=experiment):
    mlflow.pyfunc.log_model(
        name="model",
        python_model=Hostile(sys.argv[2], int(sys.argv[3])),
        code_paths=[str(folder / "redteam_model.py"), str(folder / "redteam_payloads.py")],
        registered_model_name="redteam",
    )
"""


@pytest.fixture(scope="module")
def hostile_model(lab: Path, listener: Listener) -> Path:
    """``models:/redteam/1`` in a home of its own: valid, registered, its code hostile."""
    home = lab / "model-home"
    code = lab / "model-code"
    code.mkdir()
    shutil.copy(PAYLOADS, code / "redteam_payloads.py")
    (code / "redteam_model.py").write_text(MODEL_SOURCE)
    done = subprocess.run(
        [sys.executable, "-c", LOG_MODEL, str(code), str(home), str(listener.port)],
        capture_output=True, text=True, timeout=300, cwd=lab,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    invoke_cli("runs", "list", env=_env(home))  # the metadata store a payload goes after
    assert (home / "private" / "metadata.db").is_file()
    (lab / "rows.csv").write_text("x\n1\n2\n")
    return home


def _predict(lab: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    out = lab / f"preds-{uuid.uuid4().hex[:6]}.csv"
    args = ("predict", "--model", "models:/redteam/1", "--data", str(lab / "rows.csv"))
    return run_cli(*args, "--out", str(out), *extra, env=_env(home), cwd=lab)


def test_a_valid_hostile_model_is_contained(
    lab: Path, hostile_model: Path, listener: Listener
) -> None:
    home = hostile_model
    refused = _predict(lab, home)  # logged outside mlpilot: no digests yet
    assert refused.returncode == 1 and "--trust-unverified" in _one_line(refused.stderr)
    recorded = invoke_cli("models", "verify", "redteam/1", "--record", env=_env(home))
    assert recorded.returncode == 0 and "recorded the digests" in recorded.stdout
    done = _predict(lab, home)
    assert done.returncode == 0, done.stderr[-2000:]
    with _planted_settings(home):
        if ROOT:  # the home is not the pipeline account's to write: nothing was planted
            assert not (home / "mlpilot.toml").exists()
            after = run_cli("runs", "list", env=_env(home))
            assert after.returncode == 0 and "error:" not in after.stderr, after.stderr
    preds = max(home.glob("runs/predict-*/predictions.csv"), key=lambda p: p.stat().st_mtime)
    import pandas as pd

    report = json.loads(pd.read_csv(preds)["prediction"].iloc[0])
    _write_observed("valid hostile model", report)
    _assert_contained(report, home, listener)


def test_a_tampered_model_is_refused_before_it_loads(lab: Path, hostile_model: Path) -> None:
    home = hostile_model
    invoke_cli("models", "verify", "redteam/1", "--record", env=_env(home))
    marker = Path(f"/tmp/mlpilot-redteam-{uuid.uuid4().hex[:8]}")
    pickles = list((home / "artifacts").rglob("python_model.pkl"))
    assert len(pickles) == 1, pickles
    pickles[0].write_bytes(pickle.dumps(_Boom(f"touch {marker}")))
    verify = invoke_cli("models", "verify", "redteam/1", env=_env(home))
    assert verify.returncode == 1
    assert "does not match its recorded digests" in verify.stdout + verify.stderr
    done = _predict(lab, home)
    line = _one_line(done.stderr)
    _write_observed("tampered model", {"outcome": line})
    assert done.returncode == 1 and "python_model.pkl" in line, line
    assert not marker.exists()


class _Boom:
    """A pickle that runs a shell command when it is loaded."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (self.command,)


# -- plans, LLM replies and data files: stopped before any code runs ------------------------
@pytest.mark.parametrize(
    ("step", "needle"),
    [
        ({"tool": "__import__('os').system('id')", "args": {}}, "unknown tool"),
        ({"tool": "train_model", "args": {"model": "rf", "params": {"n_estimators": "os.system"}}},
         "n_estimators"),
        ({"tool": "predict", "args": {"model_uri": "/tmp/evil/model.pkl", "data_path": "{data}"}},
         "model_uri"),
        ({"tool": "predict", "args": {"data_path": "/etc/shadow"}}, "/etc/shadow"),
    ],
    ids=["code-as-tool", "code-as-parameter", "foreign-pickle", "secret-read"],
)  # fmt: skip
def test_a_hostile_saved_plan_stops_at_validation(
    lab: Path, step: dict[str, Any], needle: str
) -> None:
    home = lab / "home"
    step = json.loads(json.dumps(step).replace("{data}", str(lab / "sales.csv")))
    plan = lab / f"plan-{uuid.uuid4().hex[:6]}.json"
    load = {"tool": "load_data", "args": {"path": str(lab / "sales.csv"), "target": "sales"}}
    train = {"tool": "train_model", "args": {"model": "linear"}}
    plan.write_text(json.dumps({"steps": [load, train, step]}))
    done = run_cli(
        "run", "--plan", str(plan), "--data", str(lab / "sales.csv"), "--json",
        env=_env(home), cwd=lab,
    )  # fmt: skip
    line = _one_line(done.stderr)
    _write_observed(f"saved plan: {step['tool'][:20]}", {"outcome": line})
    outcome = json.loads(done.stdout)
    # the file is checked as it is read (PLANNING), its paths against policy at VALIDATING
    assert outcome["status"] == "FAILED"
    assert outcome["error"]["stage"] in ("PLANNING", "VALIDATING")
    assert needle in line, line
    status, doc = _both_stores(home, outcome["run_id"])
    assert status == "FAILED" and doc["status"] == "FAILED"


def test_a_hostile_llm_reply_is_refused(lab: Path) -> None:
    from integration.llm_stub import LLMStub, text, tool_calls

    escape = Path(f"/tmp/mlpilot-redteam-{uuid.uuid4().hex[:8]}.csv")
    hostile = tool_calls(
        ("load_data", {"path": "/etc/shadow", "target": "sales"}),
        ("train_model", {"model": "linear"}),
        ("predict", {"data_path": "/root/.ssh/id_rsa", "output_path": str(escape)}),
    )
    home = lab / "home"
    with LLMStub() as stub:
        stub.script(hostile, text("done"), hostile, text("done"), hostile, text("done"))
        env = _env(home, MLPILOT_LLM="openai", MLPILOT_LLM_BASE_URL=stub.base_url)
        env |= {"MLPILOT_LLM_MODEL": "stub/redteam", "MLPILOT_LLM_REASONING": ""}
        done = run_cli(
            "run", "predict sales", "--data", str(lab / "sales.csv"), "--json", env=env, cwd=lab
        )
    line = _one_line(done.stderr)
    _write_observed("LLM reply", {"outcome": line})
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "FAILED" and "is refused" in line, line
    assert not escape.exists()
    assert _both_stores(home, outcome["run_id"])[0] == "FAILED"


def test_code_in_a_data_file_stays_data(lab: Path) -> None:
    import pandas as pd

    marker = Path(f"/tmp/mlpilot-redteam-{uuid.uuid4().hex[:8]}")
    code = f"__import__('os').system('touch {marker}')"
    quote_break = f'x"); import os; os.system("touch {marker}"); ("'
    frame = pd.read_csv(lab / "sales.csv").head(200)
    frame = frame.rename(columns={"sales": quote_break})
    frame[code] = [f"=cmd|' /C touch {marker}'!A0", "{{ 7*7 }}", "${HOME}", code] * 50
    frame["{{ config }}"] = range(len(frame))
    path = lab / "hostile.csv"
    frame.to_csv(path, index=False)
    plan = lab / "hostile-plan.json"
    steps = [
        {"tool": "load_data", "args": {"path": str(path)}},
        {"tool": "train_model", "args": {}},
    ]
    plan.write_text(json.dumps({"steps": steps}))
    done = run_cli(
        "run", "--plan", str(plan), "--data", str(path), "--target", quote_break, "--json",
        env=_env(lab / "home"), cwd=lab,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    _write_observed("data file", {"outcome": outcome["status"]})
    assert outcome["status"] == "SUCCEEDED" and not marker.exists()
    script = (Path(outcome["run_dir"]) / "pipeline.py").read_text()
    import ast

    strings = {n.value for n in ast.walk(ast.parse(script)) if isinstance(n, ast.Constant)}
    assert quote_break in strings  # the name is a string in the script, never code


# -- what was observed, for README.md ------------------------------------------------------
def _write_observed(delivery: str, report: dict[str, str]) -> None:
    """With MLPILOT_REDTEAM_LOG set, append what a payload achieved (README.md's table)."""
    target = os.environ.get("MLPILOT_REDTEAM_LOG")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"delivery": delivery, **report}) + "\n")
