"""How fast the dashboard renders on a large history, measured in a real browser.

Seeds an MLPILOT_HOME with 10,000 run documents (metadata store) and one 20,000-trial
Optuna study, starts `mlpilot dashboard`, and times in Debian's Chromium (Playwright) how
long the runs page and the studies page take from navigation until their table and plots
are on screen. Prints a table; goal < 2 s each.

    .venv/bin/python benchmarks/dashboard.py [--runs 10000] [--trials 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

BIN = Path(sys.executable).parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def seed_runs(home: Path, n: int) -> float:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import RUNS, connect

    store = connect(Settings.from_env({"MLPILOT_HOME": str(home)}))
    rng = random.Random(0)
    start = time.perf_counter()
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    docs = []
    for i in range(n):
        status = rng.choices(["SUCCEEDED", "FAILED", "CANCELLED"], [0.85, 0.12, 0.03])[0]
        created = base + timedelta(minutes=i)
        docs.append(
            {
                "_id": f"{i:032x}",
                "session_id": f"s{i // 20:05d}",
                "experiment": rng.choice(["sales", "churn", "default", "prices"]),
                "prompt": rng.choice(
                    [
                        "train a random forest to predict sales",
                        "tune xgboost for 50 trials",
                        "quick baseline for churn",
                        "找出影响销售额的关键特征",
                    ]
                ),
                "status": status,
                "plan": {"template": rng.choice(["train-evaluate", "hpo-xgb", "quick-baseline"])},
                "engine": {"requested": "auto", "used": "cpu"},
                "main_metric": "rmse",
                "metrics": {"test_rmse": rng.uniform(5, 30), "test_r2": rng.uniform(0.5, 0.95)},
                "events": [{"id": f"e{i}", "at": created, "state": status, "message": ""}],
                "created_at": created,
                "updated_at": created,
                "rev": 1,
            }
        )
    collection = store.collection(RUNS)
    for i in range(0, n, 1000):
        collection.insert_many(docs[i : i + 1000])
    return time.perf_counter() - start


def seed_study(home: Path, n: int) -> float:
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution

    from mlpilot.platform.ml.hpo import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.perf_counter()
    storage = open_storage(str(home / "optuna" / "journal.log"))
    study = optuna.create_study(study_name="big-study", storage=storage, direction="minimize")
    rng = random.Random(1)
    dists = {
        "n_estimators": IntDistribution(50, 800),
        "learning_rate": FloatDistribution(0.01, 0.3, log=True),
        "max_depth": IntDistribution(3, 10),
    }
    trials = []
    for _ in range(n):
        params = {
            "n_estimators": rng.randint(50, 800),
            "learning_rate": 10 ** rng.uniform(-2, -0.53),
            "max_depth": rng.randint(3, 10),
        }
        value = 10 + 5 * params["learning_rate"] + abs(params["max_depth"] - 6) + rng.random()
        trials.append(optuna.trial.create_trial(params=params, distributions=dists, value=value))
    study.add_trials(trials)
    return time.perf_counter() - start


KEYS = (
    "runs page, full load",
    "studies page, full load",
    "runs page, via nav bar",
    "studies page, via nav bar",
)
# selectors only: the dashboard's content security policy refuses wait_for_function's eval
RUNS_READY = ("#runs-table tr:nth-child(5) td",)
STUDIES_READY = (
    "#studies-history .main-svg",
    "#studies-importances .main-svg",
    "#studies-parallel .main-svg",
)


def timed(page: object, action: object, ready: tuple[str, ...]) -> float:
    """Seconds from ``action`` until every ``ready`` condition holds on the page."""
    start = time.perf_counter()
    action()  # type: ignore[operator]
    for condition in ready:
        page.wait_for_selector(condition)  # type: ignore[attr-defined]
    return time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        seeded_runs = seed_runs(home, args.runs)
        seeded_trials = seed_study(home, args.trials)
        print(
            f"seeded {args.runs} runs in {seeded_runs:.1f} s and a {args.trials}-trial study in {seeded_trials:.1f} s"
        )
        port = free_port()
        env = {**os.environ, "MLPILOT_HOME": str(home)}
        env.pop("MLFLOW_TRACKING_URI", None)
        env.pop("MLPILOT_MONGO_URI", None)
        server = subprocess.Popen(
            [str(BIN / "mlpilot"), "dashboard", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.2)
            results: dict[str, list[float]] = {key: [] for key in KEYS}
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=os.environ.get("MLPILOT_CHROMIUM", "/usr/bin/chromium"),
                    args=CHROMIUM_ARGS,
                )
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(120_000)
                base = f"http://127.0.0.1:{port}"
                for attempt in range(
                    args.repeat + 1
                ):  # the first round warms caches, reported apart
                    # (a) a full page load, as from a bookmark: the browser fetches and starts the app
                    runs_s = timed(page, lambda: page.goto(base + "/"), RUNS_READY)
                    studies_s = timed(page, lambda: page.goto(base + "/studies"), STUDIES_READY)
                    # (b) moving between pages with the navigation bar, as a user does
                    nav_runs_s = timed(page, lambda: page.click("#nav-runs"), RUNS_READY)
                    nav_studies_s = timed(page, lambda: page.click("#nav-studies"), STUDIES_READY)
                    if attempt == 0:
                        print(
                            f"first (cold) visit: runs page {runs_s:.2f} s, studies page {studies_s:.2f} s"
                        )
                        continue
                    for key, value in zip(
                        KEYS, (runs_s, studies_s, nav_runs_s, nav_studies_s), strict=True
                    ):
                        results[key].append(value)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)
    print()
    print(f"{'page':<26} | {'data':<12} | {'median s':>8} | {'max s':>6} | goal")
    print("-" * 70)
    for name, values in results.items():
        values.sort()
        size = f"{args.runs} runs" if name.startswith("runs") else f"{args.trials} trials"
        median, worst = values[len(values) // 2], values[-1]
        print(f"{name:<26} | {size:<12} | {median:8.2f} | {worst:6.2f} | < 2 s")


if __name__ == "__main__":
    main()
