"""How fast the dashboard renders on a large history, against the MLflow UI and
optuna-dashboard on the same stores, measured in a real browser.

Seeds an MLPILOT_HOME with 10,000 runs (run documents in the metadata store and MLflow
runs in its sqlite store: 100 logged through MLflow, the rest copies of them), a
20,000-trial Optuna study and 10 studies of 2,000 trials (several experiments, mixed
metrics) in the journal storage. Then times in Debian's Chromium (Playwright), from
navigation until rows and plot paths are in the DOM, medians of ``--repeat``:

- the Runs page on a cold first visit (the first request after the server starts; the
  server is restarted for each) and warm, against the MLflow UI's runs list;
- the Compare page with 100 runs, against the MLflow UI's compare-runs view;
- the Studies page on the 20,000-trial study, against optuna-dashboard's study page;
- the Studies page overlaying the 10 studies of 2,000 trials (optuna-dashboard has no
  overlay: no peer figure).

optuna-dashboard is installed into ``benchmarks/.peers-venv`` (never a project
dependency). Prints a table (goal < 2 s) and exits 0: it is a benchmark, not a test.

    .venv/bin/python benchmarks/dashboard.py [--runs 10000] [--trials 20000]
        [--studies 10] [--study-trials 2000] [--compare 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
PEERS_VENV = REPO / "benchmarks" / ".peers-venv"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
EXPERIMENTS = ("sales", "churn", "prices", "default-bench")
#: the overlaid studies' metrics: mixed directions and scales, as across experiments
STUDY_METRICS = (("rmse", "minimize"), ("r2", "maximize"), ("pr_auc", "maximize"))
GOAL_S = 2.0


@dataclass
class Seeded:
    home: Path
    run_ids: list[str] = field(default_factory=list)
    experiment_ids: dict[str, str] = field(default_factory=dict)  # name -> MLflow id
    run_experiment: dict[str, str] = field(default_factory=dict)  # run id -> name
    big_study: str = "big-study"
    studies: list[str] = field(default_factory=list)
    study_ids: dict[str, int] = field(default_factory=dict)


# -- seeding -------------------------------------------------------------------------------------
def settings_of(home: Path) -> Any:
    from mlpilot.platform.config import Settings

    return Settings.from_env({"MLPILOT_HOME": str(home)})


def seed_mlflow(seeded: Seeded, n_runs: int, n_logged: int) -> None:
    """``n_logged`` MLflow runs with metrics and parameters through the client, then
    copies of them, row for row in sqlite, up to ``n_runs`` (logging 10,000 runs through
    the client takes many minutes on 2 cores; the UI reads the same rows either way)."""
    from mlpilot.tracking.mlflow_store import make_client

    client = make_client(settings_of(seeded.home))
    for name in EXPERIMENTS:
        seeded.experiment_ids[name] = client.create_experiment(name)
    rng = random.Random(2)
    logged: list[str] = []
    for i in range(min(n_logged, n_runs)):
        name = EXPERIMENTS[i % len(EXPERIMENTS)]
        run = client.create_run(seeded.experiment_ids[name], run_name=f"bench-{i}")
        run_id = run.info.run_id
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        metrics = {
            "test_rmse": rng.uniform(5, 30),
            "test_r2": rng.uniform(0.5, 0.95),
            "test_mae": rng.uniform(3, 20),
            "time_train_s": rng.uniform(1, 60),
        }
        params = {
            "model.family": rng.choice(["xgboost", "lightgbm", "random_forest"]),
            "n_estimators": str(rng.randint(50, 800)),
            "max_depth": str(rng.randint(3, 10)),
            "learning_rate": f"{10 ** rng.uniform(-2, -0.5):.4f}",
        }
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
            params=[Param(k, v) for k, v in params.items()],
        )
        client.set_terminated(run_id, "FINISHED")
        logged.append(run_id)
        seeded.run_experiment[run_id] = name
    seeded.run_ids = logged + _copy_runs(seeded, logged, n_runs - len(logged))


def _copy_runs(seeded: Seeded, templates: list[str], n: int) -> list[str]:
    """``n`` new runs, each a copy of a template's rows in every table keyed by run."""
    db = seeded.home / "mlflow.db"
    con = sqlite3.connect(db)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    keyed = {
        t: [c[1] for c in con.execute(f"PRAGMA table_info({t})")]
        for t in tables
        if "run_uuid" in [c[1] for c in con.execute(f"PRAGMA table_info({t})")]
    }
    rows = {
        (t, rid): con.execute(f"SELECT * FROM {t} WHERE run_uuid = ?", (rid,)).fetchall()
        for t in keyed
        for rid in templates
    }
    new_ids = []
    for i in range(n):
        template = templates[i % len(templates)]
        new_id = uuid.uuid4().hex
        for table, columns in keyed.items():
            marks = ", ".join("?" * len(columns))
            copies = [
                tuple(new_id if v == template else _swap(v, template, new_id) for v in row)
                for row in rows[(table, template)]
            ]
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", copies)
        new_ids.append(new_id)
        seeded.run_experiment[new_id] = seeded.run_experiment[template]
    con.commit()
    con.close()
    return new_ids


def _swap(value: Any, old: str, new: str) -> Any:
    # the artifact URI names the run: a copy gets its own
    return value.replace(old, new) if isinstance(value, str) else value


def seed_documents(seeded: Seeded) -> float:
    """A run document per MLflow run (same id and experiment), some of them the runs of
    the seeded studies, so the Studies page attributes them to experiments."""
    from mlpilot.tracking.metadata import RUNS, connect

    store = connect(settings_of(seeded.home))
    rng = random.Random(0)
    start = time.perf_counter()
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    study_of = {i: name for i, name in enumerate([seeded.big_study, *seeded.studies])}
    docs = [
        _document(i, run_id, seeded, base, rng, study_of) for i, run_id in enumerate(seeded.run_ids)
    ]
    collection = store.collection(RUNS)
    for i in range(0, len(docs), 1000):
        collection.insert_many(docs[i : i + 1000])
    return time.perf_counter() - start


def _document(
    i: int,
    run_id: str,
    seeded: Seeded,
    base: datetime,
    rng: random.Random,
    study_of: dict[int, str],
) -> dict[str, Any]:
    status = rng.choices(["SUCCEEDED", "FAILED", "CANCELLED"], [0.85, 0.12, 0.03])[0]
    created = base + timedelta(minutes=i)
    experiment = seeded.run_experiment[run_id]
    doc: dict[str, Any] = {
        "_id": run_id,
        "session_id": f"s{i // 20:05d}",
        "experiment": experiment,
        "experiment_id": seeded.experiment_ids[experiment],
        "prompt": rng.choice(
            [
                "train a random forest to predict sales",
                "tune xgboost for 50 trials",
                "quick baseline for churn",
                "找出影响销售额的关键特征",
            ]
        ),
        "status": status,
        "planner": "offline",
        "plan": {"template": rng.choice(["train-evaluate", "hpo-xgb", "quick-baseline"])},
        "engine": {"requested": "auto", "used": "cpu"},
        "main_metric": "rmse",
        "metrics": {
            "test_rmse": rng.uniform(5, 30),
            "test_r2": rng.uniform(0.5, 0.95),
            "test_mae": rng.uniform(3, 20),
        },
        "timings": {"train": rng.uniform(1, 60), "load": rng.uniform(0.1, 2)},
        "events": [{"id": f"e{i}", "at": created, "state": status, "message": ""}],
        "created_at": created,
        "updated_at": created,
        "rev": 1,
    }
    if i in study_of:  # the search run that made each study
        name = study_of[i]
        doc["study"] = {"name": name, "metric": _metric_of(seeded, name)[0]}
    return doc


def _metric_of(seeded: Seeded, name: str) -> tuple[str, str]:
    if name == seeded.big_study:
        return STUDY_METRICS[0]
    return STUDY_METRICS[seeded.studies.index(name) % len(STUDY_METRICS)]


def seed_studies(seeded: Seeded, big_trials: int, n_studies: int, per_study: int) -> float:
    import optuna

    from mlpilot.platform.ml.hpo import open_storage
    from mlpilot.tracking import vocab

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.perf_counter()
    storage = open_storage(settings_of(seeded.home).optuna_storage)
    seeded.studies = [f"study-{i:02d}" for i in range(n_studies)]
    for name, n in [(seeded.big_study, big_trials)] + [(s, per_study) for s in seeded.studies]:
        metric, direction = _metric_of(seeded, name)
        study = optuna.create_study(study_name=name, storage=storage, direction=direction)
        study.set_user_attr(vocab.ATTR_SPEC, {"metric": metric})
        study.add_trials(_trials(n, metric, random.Random(name)))
        seeded.study_ids[name] = study._study_id
    return time.perf_counter() - start


def _trials(n: int, metric: str, rng: random.Random) -> list[Any]:
    """Complete trials (every 10th pruned, with intermediate values), a minute apart."""
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution

    dists = {
        "n_estimators": IntDistribution(50, 800),
        "learning_rate": FloatDistribution(0.01, 0.3, log=True),
        "max_depth": IntDistribution(3, 10),
    }
    base = datetime(2026, 1, 1)
    out = []
    for i in range(n):
        params = {
            "n_estimators": rng.randint(50, 800),
            "learning_rate": 10 ** rng.uniform(-2, -0.53),
            "max_depth": rng.randint(3, 10),
        }
        loss = 5 * params["learning_rate"] + abs(params["max_depth"] - 6) / 6 + rng.random()
        value = 10 + 10 * loss if metric == "rmse" else max(0.0, 1 - loss / 3)
        pruned = i % 10 == 9
        out.append(
            optuna.trial.create_trial(
                params=params,
                distributions=dists,
                value=None if pruned else value,
                state=optuna.trial.TrialState.PRUNED
                if pruned
                else optuna.trial.TrialState.COMPLETE,
                intermediate_values={1: value * 1.1, 2: value} if pruned else None,
            )
        )
        # create_trial stamps now: spread them out, so the elapsed-time axis has a span
        out[-1].datetime_start = base + timedelta(minutes=i)
        out[-1].datetime_complete = base + timedelta(minutes=i, seconds=50)
    return out


# -- servers -------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float = 120.0) -> None:
    """Until ``url`` answers at all (any status): the server is listening and serving."""
    import urllib.error
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout:.0f} s")


@contextmanager
def serving(command: list[str], env: dict[str, str], probe: str) -> Iterator[float]:
    """A server process for the block; ``probe`` (a path such as /health) tells when it
    listens without rendering any page (the first page visit must stay cold). Yields the
    seconds the server took to answer."""
    # its own process group: `mlflow server` runs uvicorn and a job runner as children,
    # which outlive a signal to it alone (and would serve the next "cold" start warm)
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        started = time.perf_counter()
        wait_http(probe)
        yield time.perf_counter() - started
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(1)  # the group's children exit and free the port
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def clean_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "MLPILOT_HOME": str(home), "MLPILOT_LLM": "offline"}
    for key in ("MLFLOW_TRACKING_URI", "MLPILOT_MONGO_URI", "MLPILOT_DASH_USER"):
        env.pop(key, None)
    env.pop("MLPILOT_DASH_PASSWORD", None)
    return env


@dataclass
class Server:
    name: str
    command: list[str]
    base: str
    probe: str


def servers(seeded: Seeded) -> dict[str, Server]:
    settings = settings_of(seeded.home)
    ports = {k: free_port() for k in ("mlpilot", "mlflow", "optuna")}
    return {
        "mlpilot": Server(
            "mlpilot",
            [str(BIN / "mlpilot"), "dashboard", "--port", str(ports["mlpilot"])],
            f"http://127.0.0.1:{ports['mlpilot']}",
            f"http://127.0.0.1:{ports['mlpilot']}/_favicon.ico",
        ),
        "mlflow": Server(
            "MLflow UI",
            [
                str(BIN / "mlflow"),
                "server",
                "--backend-store-uri",
                settings.tracking_uri,
                "--host",
                "127.0.0.1",
                "--port",
                str(ports["mlflow"]),
                "--workers",
                "1",
            ],
            f"http://127.0.0.1:{ports['mlflow']}",
            f"http://127.0.0.1:{ports['mlflow']}/health",
        ),
        "optuna": Server(
            "optuna-dashboard",
            [
                str(PEERS_VENV / "bin" / "optuna-dashboard"),
                settings.optuna_storage,
                "--host",
                "127.0.0.1",
                "--port",
                str(ports["optuna"]),
            ],
            f"http://127.0.0.1:{ports['optuna']}",
            f"http://127.0.0.1:{ports['optuna']}/api/meta",
        ),
    }


def ensure_peers() -> bool:
    """optuna-dashboard in its own venv, installed once (never a project dependency)."""
    exe = PEERS_VENV / "bin" / "optuna-dashboard"
    if exe.exists():
        return True
    if not (PEERS_VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    done = subprocess.run([str(PEERS_VENV / "bin" / "pip"), "install", "-q", "optuna-dashboard"])
    return done.returncode == 0 and exe.exists()


# -- pages ---------------------------------------------------------------------------------------
@dataclass
class Page:
    """One page to time: its URL path on its server and what must be in the DOM."""

    path: str
    ready: tuple[str, ...]


# selectors only: the dashboard's content security policy refuses wait_for_function's eval
def mlpilot_pages(seeded: Seeded, n_compare: int) -> dict[str, Page]:
    compared = ",".join(seeded.run_ids[:n_compare])
    overlay = urllib.parse.quote(",".join(seeded.studies), safe=",")
    return {
        "runs": Page("/", ("#runs-table tr:nth-child(5) td",)),
        "compare": Page(
            f"/compare?runs={compared}",
            (
                f"#compare-legend li:nth-child({n_compare})",
                "#compare-metrics td",
                "#compare-parallel .scatterlayer path",
                "#compare-bars .bars path",
            ),
        ),
        "study": Page(f"/studies?study={seeded.big_study}", _studies_ready()),
        "overlay": Page(f"/studies?studies={overlay}", _studies_ready(len(seeded.studies))),
    }


def _studies_ready(n: int = 1) -> tuple[str, ...]:
    return (
        f"#studies-summary tr:nth-child({n + 1}) td",
        "#studies-history .scatterlayer path",
        "#studies-importances .bars path",
    )


def peer_pages(seeded: Seeded, n_compare: int) -> dict[str, Page]:
    experiment = seeded.experiment_ids[EXPERIMENTS[0]]
    runs = json.dumps(seeded.run_ids[:n_compare])
    experiments = json.dumps(sorted(set(seeded.experiment_ids.values())))
    query = urllib.parse.urlencode({"runs": runs, "experiments": experiments})
    return {
        "runs": Page(
            f"/#/experiments/{experiment}/runs",
            ('.ag-center-cols-container .ag-row[row-index="4"]',),
        ),
        "compare": Page(f"/#/compare-runs?{query}", ("table td", ".js-plotly-plot .main-svg path")),
        "study": Page(
            f"/dashboard/studies/{seeded.study_ids[seeded.big_study]}",
            (".js-plotly-plot .scatterlayer path",),
        ),
    }


def visit(context: Any, url: str, page: Page, timeout_s: float) -> float:
    """Seconds from navigation until every ``page.ready`` selector matches."""
    tab = context.new_page()
    tab.set_default_timeout(timeout_s * 1000)
    try:
        start = time.perf_counter()
        tab.goto(url, wait_until="commit")
        for selector in page.ready:
            tab.wait_for_selector(selector, state="attached")
        return time.perf_counter() - start
    except Exception as exc:  # a peer that never shows its content: reported, not fatal
        print(f"  {url[:100]}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        return float("nan")
    finally:
        tab.close()


def measure(
    browser: Any, server: Server, env: dict[str, str], pages: dict[str, Page], args: Any
) -> dict[str, list[float]]:
    """Per server start: a cold first visit of the runs page, a first (unwarmed) visit of
    every page, then a warm one; ``--repeat`` starts. Keys: cold, first:<page>, <page>."""
    results: dict[str, list[float]] = {"cold": []}
    for _ in range(args.repeat):
        with serving(server.command, env, server.probe) as start_s:
            results.setdefault("start", []).append(start_s)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            results["cold"].append(
                visit(context, server.base + pages["runs"].path, pages["runs"], args.timeout)
            )
            for round_ in ("first:", ""):
                for key, page in pages.items():
                    if round_ == "first:" and key == "runs":
                        continue  # that was the cold visit
                    seconds = visit(context, server.base + page.path, page, args.timeout)
                    results.setdefault(round_ + key, []).append(seconds)
            context.close()
    return results


def median(values: list[float] | None) -> float | None:
    kept = [v for v in values or [] if v == v]  # NaN: the page never showed its content
    return statistics.median(kept) if kept else None


ROWS = (
    ("cold", "runs page, cold first visit", "MLflow UI runs list, cold"),
    ("runs", "runs page, warm", "MLflow UI runs list"),
    ("compare", "compare {compare} runs", "MLflow UI compare-runs"),
    ("study", "studies: {trials}-trial study", "optuna-dashboard study page"),
    ("overlay", "studies: {studies} x {study_trials} overlaid", "(no overlay in optuna-dashboard)"),
)


def report(ours: dict[str, list[float]], peers: dict[str, list[float]], args: Any) -> None:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    print()
    print(f"{'page':<34} | {'mlpilot s':>9} | {'peer s':>7} | {'ratio':>6} | goal < 2 s met | peer")
    print("-" * 110)
    for key, label, peer in ROWS:
        mine, theirs = median(ours.get(key)), median(peers.get(key))
        ratio = f"{mine / theirs:.2f}" if mine is not None and theirs else "-"
        met = "-" if mine is None else ("yes" if mine < GOAL_S else "no")
        name = label.format(**vars(args))
        print(f"{name:<34} | {fmt(mine):>9} | {fmt(theirs):>7} | {ratio:>6} | {met:<14} | {peer}")
    print()
    print("first visit of each page after a server start (its caches empty), median s:")
    firsts = (
        ("start", "server start, until it answers", "MLflow UI"),
        ("compare", "compare page", "MLflow UI"),
        ("study", "big study page", "optuna-dashboard, cold"),
        ("overlay", "overlay page", "-"),
    )
    for key, label, peer in firsts:
        name = key if key == "start" else "first:" + key
        mine, theirs = median(ours.get(name)), median(peers.get(name))
        print(f"  {label:<32} mlpilot {fmt(mine):>6}   peer {fmt(theirs):>6} ({peer})")
    print(f"  optuna-dashboard start          {fmt(median(peers.get('start:optuna'))):>6}")
    print("ratio: mlpilot / peer (below 1: mlpilot is faster)")


def parse_args() -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=20_000, help="trials of the big study")
    parser.add_argument("--studies", type=int, default=10, help="studies overlaid")
    parser.add_argument("--study-trials", type=int, default=2000, help="trials of each")
    parser.add_argument("--compare", type=int, default=100, help="runs compared")
    parser.add_argument("--logged", type=int, default=100, help="MLflow runs logged, not copied")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-peers", action="store_true", help="time mlpilot only")
    parser.add_argument("--timeout", type=float, default=120.0, help="per page, seconds")
    args = parser.parse_args()
    args.logged = max(args.logged, args.compare)  # compared runs are real MLflow runs
    args.runs = max(args.runs, args.logged)
    return args


def main() -> None:
    args = parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        seeded = Seeded(home=Path(tmp) / "home")
        started = time.perf_counter()
        seed_mlflow(seeded, args.runs, args.logged)
        mlflow_s = time.perf_counter() - started
        studies_s = seed_studies(seeded, args.trials, args.studies, args.study_trials)
        docs_s = seed_documents(seeded)
        print(
            f"seeded {args.runs} MLflow runs ({args.logged} logged) in {mlflow_s:.1f} s, their "
            f"documents in {docs_s:.1f} s, a {args.trials}-trial study and {args.studies} of "
            f"{args.study_trials} trials in {studies_s:.1f} s"
        )
        env, by_name = clean_env(seeded.home), servers(seeded)
        peer = peer_pages(seeded, args.compare)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=os.environ.get("MLPILOT_CHROMIUM", "/usr/bin/chromium"),
                args=CHROMIUM_ARGS,
            )
            ours = measure(
                browser, by_name["mlpilot"], env, mlpilot_pages(seeded, args.compare), args
            )
            theirs: dict[str, list[float]] = {}
            if not args.skip_peers:
                theirs = measure(
                    browser, by_name["mlflow"], env, {k: peer[k] for k in ("runs", "compare")}, args
                )
            if not args.skip_peers and ensure_peers():
                optuna = measure(browser, by_name["optuna"], env, {"runs": peer["study"]}, args)
                theirs["study"] = optuna["cold"] + optuna["runs"]  # its page, cold and warm
                theirs["first:study"] = optuna["cold"]
                theirs["start:optuna"] = optuna["start"]
            browser.close()
    report(ours, theirs, args)


if __name__ == "__main__":
    main()
