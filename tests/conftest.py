"""Shared fixtures: an isolated MLPILOT_HOME, sample data, and real servers for integration tests."""

from __future__ import annotations

import os

#: One thread per pipeline, set before NumPy's BLAS loads and inherited by every ``mlpilot``
#: the tests start. ``make test`` runs two groups side by side on the CI's two cores, and
#: LightGBM's OpenMP threads spin-wait on each other across processes: on 2 cores one fit
#: of 20,000 rows took 1.2 s alone and 18–20 s each with three at once on two threads, 2.4 s
#: with two at once on one. ``OMP_NUM_THREADS`` is mlpilot's own thread setting (Settings.
#: threads), so the runs pass ``n_jobs=1`` to every family; a value already set is kept.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import shutil  # noqa: E402 (after the thread variables)
import tempfile  # noqa: E402 (after the thread variables)
from collections.abc import Iterator  # noqa: E402 (after the thread variables)
from pathlib import Path  # noqa: E402 (after the thread variables)

import pytest  # noqa: E402 (after the thread variables)
from helpers import MlflowServer, NxServer  # noqa: E402 (after the thread variables)

_OWN_BASETEMP: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """A base folder of this session's own, not pytest's shared /tmp/pytest-of-USER.

    Each pytest session chmods that shared folder to 0700 when it starts, which also
    clears the ACL entries through which mlpilot's unprivileged pipeline account reaches
    homes below it (DESIGN §8): a second session would cut off the first one's pipelines.
    """
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="mlpilot-tests-")
        _OWN_BASETEMP.append(config.option.basetemp)


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _OWN_BASETEMP:
        shutil.rmtree(folder, ignore_errors=True)


_SCRUBBED = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_RUN_ID",
    "MLPILOT_MONGO_URI",
    "MLPILOT_OPTUNA_STORAGE",
    "MLPILOT_ENGINE",
    "MLPILOT_EXPERIMENT",
    "NVIDIA_API_KEY",
    "OPENAI_API_KEY",
    "MLPILOT_LLM_BASE_URL",
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh MLPILOT_HOME with the embedded defaults and the offline planner."""
    path = tmp_path / "home"
    for name in _SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLPILOT_HOME", str(path))
    monkeypatch.setenv("MLPILOT_LLM", "offline")
    monkeypatch.chdir(tmp_path)
    return path


@pytest.fixture(scope="session")
def sales_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mlpilot.platform.datasets import make_sales, write_table

    return write_table(make_sales(2000, seed=11), tmp_path_factory.mktemp("data") / "sales.csv")


@pytest.fixture(scope="session")
def nx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NxServer]:
    server = NxServer(tmp_path_factory.mktemp("nx"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A real ``mlflow server`` for the session (sqlite backend, artifacts served by it)."""
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def playwright() -> Iterator[object]:
    """One Playwright for the session: a second ``sync_playwright()`` while one is open
    refuses to start ("Sync API inside the asyncio loop"), so every browser test shares it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p
