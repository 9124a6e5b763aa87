"""Helpers for tests: the CLI as a user runs it, free ports, real servers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MLPILOT = str(BIN / "mlpilot")


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``mlpilot`` command as a user would."""
    return subprocess.run(
        [MLPILOT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")


class NxServer:
    """A real MongoDB-wire-protocol server (nx-27017) on a free local port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}"

    def start(self) -> None:
        exe = shutil.which("nx-27017", path=str(BIN)) or shutil.which("nx-27017")
        assert exe, "nx-27017 is not installed (it is in the dev extra)"
        self.proc = subprocess.Popen(
            [
                exe,
                "--db",
                str(self.workdir / "nx.db"),
                "--host",
                "127.0.0.1",
                "-p",
                str(self.port),
                "--log-file",
                str(self.workdir / "nx.log"),
                "--pid-file",
                str(self.workdir / "nx.pid"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


class MlflowServer:
    """A real ``mlflow server`` (sqlite backend, proxied artifacts) on a free local port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        import urllib.error
        import urllib.request

        exe = shutil.which("mlflow", path=str(BIN)) or shutil.which("mlflow")
        assert exe, "mlflow is not installed"
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID"):
            env.pop(name, None)
        self.log = (self.workdir / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [
                exe,
                "server",
                "--backend-store-uri",
                f"sqlite:///{self.workdir / 'mlflow.db'}",
                "--artifacts-destination",
                str(self.workdir / "artifacts"),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                "1",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.workdir,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: see {self.workdir / 'server.log'}")
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"mlflow server did not answer /health within {timeout} s")

    def stop(self) -> None:
        import signal

        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server and its uvicorn worker
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()


def local_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for ``mlpilot`` with embedded stores under ``home`` and the offline
    planner (empty = unset for mlpilot: the developer's own settings stay out)."""
    return {
        "MLPILOT_HOME": str(home),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
        **extra,
    }


def tracking_env(home: Path, mlflow_uri: str, mongo_uri: str, **extra: str) -> dict[str, str]:
    """Environment for ``mlpilot`` against a tracking server and a MongoDB-protocol server."""
    return {
        "MLPILOT_HOME": str(home),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": mlflow_uri,
        "MLPILOT_MONGO_URI": mongo_uri,
        "MLPILOT_ENGINE": "cpu",
        "NVIDIA_API_KEY": "",
        "OPENAI_API_KEY": "",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "COLUMNS": "200",
        **extra,
    }


def invoke_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run an ``mlpilot`` command in this process (no interpreter start-up): for the many
    quick queries of a test. ``run`` itself is better started as a real process."""
    from typer.testing import CliRunner

    from mlpilot.platform.cli.main import app

    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["mlpilot", *args], result.exit_code, result.stdout, result.stderr
    )


def loaded_run(tmp_path: Path, frame: Any, target: str = "y", seed: int = 0) -> Any:
    """A ``PipelineRun`` (nothing tracked) that has loaded ``frame`` from a CSV in
    ``tmp_path``: the starting point of step-level unit tests."""
    from mlpilot.platform.ml import steps
    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.tracking.run_logger import NullRunLogger

    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    run = PipelineRun(
        plan={}, seed=seed, data_path=str(path), run_dir=tmp_path, logger=NullRunLogger()
    )
    steps.load_data(run, path=str(path), target=target)
    return run


def seed_studies(storage_path: Path) -> dict[str, str]:
    """Two real Optuna studies in a journal file, as the Studies page meets them.

    ``mixed``: an AutoML-style study across two families (parameters prefixed by family,
    a categorical among them), reporting one value per fold, with pruned and failed trials
    and one outlier (a log axis needs one). ``single``: a maximising study of another
    metric (r2), for normalisation. Returns both names.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the planted failures are expected
    storage_path.parent.mkdir(parents=True, exist_ok=True)
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(storage_path))
    )

    def mixed_objective(trial: optuna.Trial) -> float:
        family = trial.suggest_categorical("family", ["rf", "xgb"])
        if family == "rf":
            n = trial.suggest_int("rf.n_estimators", 10, 500)
            score = 3.0 - n / 400 + trial.suggest_float("rf.max_features", 0.1, 1.0)
        else:
            rate = trial.suggest_float("xgb.learning_rate", 1e-3, 0.3, log=True)
            depth = trial.suggest_int("xgb.max_depth", 2, 10)
            booster = trial.suggest_categorical("xgb.booster", ["gbtree", "dart"])
            score = 1.0 + abs(rate - 0.05) * 10 + depth / 20 + (booster == "dart") * 0.3
        if trial.number == 0:
            score = 5_000.0  # the outlier that squashes a linear axis
        for fold in range(3):
            trial.report(score + (2 - fold) * 0.1, 10_000 + fold)
            if trial.number % 5 == 3 and fold == 1:
                raise optuna.TrialPruned()
        if trial.number % 7 == 6:
            trial.set_user_attr("mlpilot.fail_reason", "ValueError: a planted failure")
            raise ValueError("a planted failure")
        return score

    mixed = optuna.create_study(
        study_name="sales-auto-mixed",
        storage=storage,
        direction="minimize",
        sampler=optuna.samplers.RandomSampler(seed=3),
    )
    mixed.set_user_attr("mlpilot", {"metric": "rmse"})
    mixed.optimize(mixed_objective, n_trials=40, catch=(ValueError,))
    single = optuna.create_study(
        study_name="sales-rf-r2",
        storage=storage,
        direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=4),
    )
    single.set_user_attr("mlpilot", {"metric": "r2"})
    single.optimize(lambda t: 0.9 - abs(t.suggest_int("max_depth", 2, 20) - 8) / 40, n_trials=12)
    return {"mixed": mixed.study_name, "single": single.study_name}
