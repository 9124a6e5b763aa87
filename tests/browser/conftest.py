"""A seeded MLPILOT_HOME, a running dashboard, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, REPO, free_port, run_cli, seed_studies, wait_for_port

CHROMIUM = os.environ.get("MLPILOT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
SCRIPT_PROMPT = "train a model on <script>alert('owned')</script> please"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        "MLPILOT_HOME": str(home),
        "MLPILOT_LLM": "offline",
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
        "MLPILOT_DASH_USER": "",
        "MLPILOT_DASH_PASSWORD": "",
    }
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def seeded_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Real runs on the embedded defaults: trained, tuned, compared, registered, failed."""
    from mlpilot.platform.datasets import make_sales, write_table

    base = tmp_path_factory.mktemp("dash")
    home = base / "home"
    data = write_table(make_sales(600, seed=5), base / "sales.csv")
    env = _env(home)
    runs: dict[str, Any] = {"home": home, "data": data, "base": base}
    for key, args in {
        "trained": ["run", "train a random forest to predict sales", "--data", str(data)],
        "tuned": ["run", "tune xgboost for 6 trials to predict sales", "--data", str(data)],
        "compared": [
            "run",
            "compare cpu and gpu for a random forest on sales",
            "--data",
            str(data),
        ],
        "registered": ["run", "register the best model as sales-model with alias champion"],
    }.items():
        done = run_cli(*args, "--json", env=env, cwd=base)
        assert done.returncode == 0, f"{key}: {done.stderr[-1500:]}"
        runs[key] = json.loads(done.stdout)
    failed = run_cli(
        "run",
        SCRIPT_PROMPT,
        "--data",
        str(data),
        "--target",
        "no_such_column",
        "--json",
        env=env,
        cwd=base,
    )
    assert failed.returncode != 0
    runs["failed"] = json.loads(failed.stdout) if failed.stdout.strip() else None
    # beside the search's own study: a mixed-family one with pruned and failed trials (the
    # busiest, so the Studies page opens on it) and one of another metric
    from mlpilot.platform.config import Settings

    storage = Settings.from_env({"MLPILOT_HOME": str(home)}).optuna_storage
    runs["studies"] = seed_studies(Path(storage))
    return runs


class Dashboard:
    def __init__(self, home: Path, **extra_env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [MLPILOT, "dashboard", "--port", str(self.port)],
            env={**os.environ, **_env(home, **extra_env)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_for_port(self.port, timeout=60)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def dashboard(seeded_home: dict[str, Any]) -> Iterator[Dashboard]:
    server = Dashboard(seeded_home["home"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser(playwright: Any) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)"
        )
    chromium = playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
    )
    yield chromium
    chromium.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.dialogs = []  # type: ignore[attr-defined]
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    blocked: list[str] = []  # what the content security policy refused
    page.on(
        "console",
        lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None,
    )
    yield page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not blocked, f"the dashboard's own page broke its content security policy: {blocked}"


def get_status(url: str, auth: tuple[str, str] | None = None) -> int:
    request = urllib.request.Request(url)
    if auth:
        import base64

        request.add_header(
            "Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def wait_until(predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("condition not met in time")


__all__ = ["SCRIPT_PROMPT", "Dashboard", "get_status", "shutil", "wait_until"]
