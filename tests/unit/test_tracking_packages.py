"""The cached module → distribution map that pipelines hand to MLflow before logging a model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlpilot.tracking import packages


@pytest.fixture
def fresh_mlflow_map() -> Iterator[object]:
    """MLflow's module map as a new process has it (unset), restored afterwards."""
    from mlflow.utils import requirements_utils as ru

    saved = ru._MODULES_TO_PACKAGES
    ru._MODULES_TO_PACKAGES = None
    yield ru
    ru._MODULES_TO_PACKAGES = saved


def test_refresh_writes_once_per_environment(tmp_path: Path) -> None:
    assert packages.load(tmp_path) is None
    assert packages.refresh(tmp_path) is True
    cached = packages.load(tmp_path)
    assert cached is not None and cached["sklearn"] == ["scikit-learn"]
    assert packages.refresh(tmp_path) is False  # current: nothing to do


def test_a_cache_from_another_environment_is_ignored(tmp_path: Path) -> None:
    packages.refresh(tmp_path)
    path = tmp_path / packages.CACHE_FILE
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "key": "another-interpreter"}))
    assert packages.load(tmp_path) is None
    assert packages.refresh(tmp_path) is True


def test_seeded_map_is_the_one_mlflow_builds(tmp_path: Path, fresh_mlflow_map: object) -> None:
    ru = fresh_mlflow_map
    assert packages.seed_mlflow(tmp_path) is False  # nothing cached: MLflow builds it
    packages.refresh(tmp_path)
    assert packages.seed_mlflow(tmp_path) is True
    seeded = ru._MODULES_TO_PACKAGES  # type: ignore[attr-defined]
    ru._MODULES_TO_PACKAGES = None  # type: ignore[attr-defined]
    ru._init_modules_to_packages_map()  # type: ignore[attr-defined]
    built = ru._MODULES_TO_PACKAGES  # type: ignore[attr-defined]
    assert {k: list(dict.fromkeys(v)) for k, v in built.items()} == seeded
    assert packages.seed_mlflow(tmp_path) is False  # MLflow has a map: never replaced


def test_the_backport_is_imported_before_the_background_thread(tmp_path: Path) -> None:
    """The orchestrator imports MLflow while the map is built on a thread: importing
    ``importlib_metadata`` on that thread exposes its half-executed finder to the main
    thread's ``importlib.metadata`` lookups (``NameError: PathDistribution``)."""
    import subprocess
    import sys

    script = (
        "import sys, threading\n"
        "from pathlib import Path\n"
        "started = []\n"
        "threading.Thread.start = lambda self: started.append(self.name)\n"
        "from mlpilot.platform.execution import _refresh_package_map\n"
        "assert 'importlib_metadata' not in sys.modules, 'imported too early to tell'\n"
        f"_refresh_package_map(Path({str(tmp_path)!r}))\n"
        "assert started == ['package-map'], started\n"
        "assert 'importlib_metadata' in sys.modules, 'left to the thread'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-1500:]
