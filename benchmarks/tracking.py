"""What tracking costs a run: MLflow logging time, and MongoDB writes per run.

1. Logging cost. A parent run with N trials (default 100) of M metrics each (default 20,
   plus 5 params and the trial tags), logged as pipelines log them: nested runs of three
   calls each (create, one ``log_batch`` of params, metrics and tags, terminate — a
   deferred ``MlflowRunLogger``), in groups of 10, plus the parent's end-of-run metrics.
   Pipelines do this from a background thread, so the figure is logging work that overlaps
   the trials' compute: an upper bound on what it delays a run. For comparison, one call per value (``log_metric``/``log_param``),
   timed on 10 trials and scaled. Reported in milliseconds and as a share of a run whose
   trials compute for about one second each: share = cost / (N × 1 s + cost) — computed,
   not slept (goal ≤ 3 %). Against the default sqlite store, and with ``--server`` also
   against a local ``mlflow server`` the benchmark starts (or ``--server URI``).
2. MongoDB writes per run. Real small runs through the orchestrator in this process (the
   pipeline still runs in its contained child), with a counting wrapper around the
   metadata store: logical writes (create_run, update_run, save_session, …) and the
   collection operations they cost (writes and reads), for a quick baseline and a
   20-trial tuning run. Embedded store by default; ``--mongo URI`` for a server.

    .venv/bin/python benchmarks/tracking.py [--trials 100] [--metrics 20] [--server [URI]]
        [--mongo URI] [--repeat 3] [--skip-runs]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
TRIAL_SECONDS = 1.0
FLUSH_EVERY = 10  # the pipeline's TrialLogger logs trials in groups of 10
NAIVE_TRIALS = 10
PLANS = {
    "quick baseline": "quick baseline with ridge regression to predict sales",
    "tuning, 20 trials": "tune ridge regression for 20 trials to predict sales",
}


# -- 1. logging cost ------------------------------------------------------------------------------
def _trial_values(i: int, metrics: int) -> tuple[dict[str, Any], dict[str, float]]:
    params = {
        "alpha": 10 ** (i % 7 - 3),
        "fit_intercept": i % 2 == 0,
        "solver": "auto",
        "seed": i,
        "family": "linear",
    }
    values = {f"metric_{k:02d}": (i * 31 + k) % 97 / 97 for k in range(metrics - 3)}
    values.update(trial_number=i, value=(i % 13) / 13, duration_s=TRIAL_SECONDS)
    return params, values


def log_hpo_run(client: Any, experiment_id: str, trials: int, metrics: int) -> tuple[float, float]:
    """(wall, CPU) seconds spent logging a tuning run the way mlpilot pipelines do."""
    from mlpilot.tracking.run_logger import MlflowRunLogger

    started, cpu = time.perf_counter(), time.process_time()
    parent = MlflowRunLogger(client, client.create_run(experiment_id).info.run_id, experiment_id)
    pending: list[int] = []
    for i in range(trials):
        pending.append(i)  # the trial computes here
        if len(pending) == FLUSH_EVERY or i == trials - 1:
            for number in pending:
                params, values = _trial_values(number, metrics)
                child = parent.child(
                    f"trial-{number}",
                    tags={"mlpilot.kind": "trial", "mlpilot.trial_state": "COMPLETE"},
                )
                child.log_params(params)
                child.log_metrics(values)
                child.end("FINISHED")
            pending.clear()
    parent.log_metrics(
        {"hpo_best_value": 0.5, "hpo_trials": trials, "test_rmse": 1.0, "time_total_s": 100.0}
    )
    parent.end("FINISHED")
    return time.perf_counter() - started, time.process_time() - cpu


def log_per_value(
    client: Any, experiment_id: str, trials: int, metrics: int
) -> tuple[float, float]:
    """(wall, CPU) seconds for the naive way: one call per param and per metric."""
    started, cpu = time.perf_counter(), time.process_time()
    parent = client.create_run(experiment_id).info.run_id
    for i in range(trials):
        params, values = _trial_values(i, metrics)
        child = client.create_run(
            experiment_id, tags={"mlflow.parentRunId": parent, "mlpilot.kind": "trial"}
        ).info.run_id
        for key, value in params.items():
            client.log_param(child, key, value)
        for key, value in values.items():
            client.log_metric(child, key, value)
        client.set_terminated(child)
    client.set_terminated(parent)
    return time.perf_counter() - started, time.process_time() - cpu


def logging_rows(
    name: str, uri: str, trials: int, metrics: int, repeat: int
) -> list[dict[str, Any]]:
    import logging

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.mlflow_store import make_client

    # the client exactly as mlpilot makes it (timeouts; the sqlite store in WAL mode)
    settings = Settings.from_env(
        {"MLPILOT_HOME": tempfile.gettempdir(), "MLFLOW_TRACKING_URI": uri}
    )
    client = make_client(settings)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    stamp = time.strftime("%H%M%S")
    log_hpo_run(client, client.create_experiment(f"warm-up-{stamp}"), 2, metrics)
    timings = [
        log_hpo_run(client, client.create_experiment(f"bench-{stamp}-{i}"), trials, metrics)
        for i in range(repeat)
    ]
    wall, cpu = sorted(timings)[len(timings) // 2]
    naive_wall, naive_cpu = log_per_value(
        client, client.create_experiment(f"naive-{stamp}"), NAIVE_TRIALS, metrics
    )
    scale = trials / NAIVE_TRIALS
    return [
        {
            "store": name,
            "method": f"mlpilot: 3 calls a trial (median of {repeat})",
            "seconds": wall,
            "cpu": cpu,
            "trials": trials,
        },
        {
            "store": name,
            "method": f"one call per value (×{scale:.0f} from {NAIVE_TRIALS} trials)",
            "seconds": naive_wall * scale,
            "cpu": naive_cpu * scale,
            "trials": trials,
        },
    ]


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen(
        [
            str(BIN / "mlflow"),
            "server",
            "--backend-store-uri",
            f"sqlite:///{workdir / 'mlflow.db'}",
            "--artifacts-destination",
            str(workdir / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2):
                return proc, uri
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGTERM)
    raise RuntimeError("mlflow server did not start")


# -- 2. MongoDB writes per run --------------------------------------------------------------------
class CountingCollection:
    WRITES = (
        "update_one",
        "update_many",
        "insert_one",
        "insert_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "find_one_and_update",
        "bulk_write",
    )
    READS = ("find_one", "find", "count_documents", "aggregate")

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self.inner = inner
        self.counts = counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in self.WRITES:
            self.counts["collection writes"] += 1
        elif name in self.READS:
            self.counts["collection reads"] += 1
        return attr


def count_store(store: Any, counts: Counter[str]) -> Any:
    """Wrap ``store`` so each logical write and each collection operation is counted."""
    collection = store.collection
    store.collection = lambda name: CountingCollection(collection(name), counts)
    for method in ("create_run", "update_run", "save_session", "save_benchmark"):
        original = getattr(store, method)

        def counted(
            *args: Any, _original: Any = original, _name: str = method, **kwargs: Any
        ) -> Any:
            counts["store writes"] += 1
            counts[f"  {_name}"] += 1
            return _original(*args, **kwargs)

        setattr(store, method, counted)
    return store


def mongo_rows(mongo_uri: str | None) -> list[dict[str, Any]]:
    import mlpilot.tracking.metadata as metadata
    from mlpilot.platform.agent.orchestrator import Orchestrator
    from mlpilot.platform.agent.request import RunRequest
    from mlpilot.platform.config import Settings
    from mlpilot.platform.datasets import make_sales, write_table

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = write_table(make_sales(400, seed=3), Path(tmp) / "sales.csv")
        environ = {
            "MLPILOT_HOME": str(Path(tmp) / "home"),
            "MLPILOT_LLM": "offline",
            "MLPILOT_ENGINE": "cpu",
            "PATH": os.environ.get("PATH", ""),
        }
        if mongo_uri:
            environ["MLPILOT_MONGO_URI"] = mongo_uri
        settings = Settings.from_env(environ)
        connect = metadata.connect
        for label, prompt in PLANS.items():
            counts: Counter[str] = Counter()
            metadata.connect = lambda s, _counts=counts: count_store(connect(s), _counts)
            try:
                started = time.perf_counter()
                outcome = Orchestrator.default(settings).run(
                    RunRequest(prompt=prompt, data_path=str(data))
                )
                seconds = time.perf_counter() - started
            finally:
                metadata.connect = connect
            rows.append(
                {"run": label, "status": outcome.status, "seconds": seconds, "counts": counts}
            )
    return rows


# -- report -----------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument(
        "--server",
        nargs="?",
        const="start",
        default=None,
        help="also a tracking server: a URI, or none to start one",
    )
    parser.add_argument(
        "--mongo", default=None, help="MongoDB URI for the writes count (default: embedded store)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="median of this many timings")
    parser.add_argument("--skip-runs", action="store_true", help="only the logging cost")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")

    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=max(Console().width, 130))
    with tempfile.TemporaryDirectory() as tmp:
        stores = [("sqlite (default)", f"sqlite:///{Path(tmp) / 'mlflow.db'}")]
        server = None
        if args.server == "start":
            server, uri = start_server(Path(tmp) / "server")
            stores.append(("mlflow server", uri))
        elif args.server:
            stores.append(("mlflow server", args.server))
        try:
            results = [
                row
                for name, uri in stores
                for row in logging_rows(name, uri, args.trials, args.metrics, args.repeat)
            ]
        finally:
            if server is not None:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(15)
    compute = args.trials * TRIAL_SECONDS
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    table = Table(
        title=f"MLflow logging cost: {args.trials} trials × {args.metrics} metrics (+5 params), "
        f"trials of {TRIAL_SECONDS:.0f} s (load {load:.1f} on {os.cpu_count()} cores)"
    )
    for column in (
        "store",
        "method",
        "ms total",
        "ms / trial",
        "client CPU ms",
        "share of run",
        "goal ≤ 3 %",
    ):
        table.add_column(
            column, justify="right" if column.startswith(("ms", "share", "client")) else "left"
        )
    for row in results:
        share = row["seconds"] / (compute + row["seconds"])
        table.add_row(
            row["store"],
            row["method"],
            f"{row['seconds'] * 1000:,.0f}",
            f"{row['seconds'] * 1000 / row['trials']:.1f}",
            f"{row['cpu'] * 1000:,.0f}",
            f"{share:.2%}",
            "yes" if share <= 0.03 else "no",
        )
    console.print(table)
    console.print(
        "share = logging time / (trials × 1 s + logging time). This is the work of logging; "
        "pipelines write trials from a background thread (platform/ml/hpo/trial_log.py), so "
        "it overlaps the trials' compute and bounds, rather than equals, the delay to a run.",
        markup=False,
    )

    if args.skip_runs:
        return
    runs = mongo_rows(args.mongo)
    operations = sorted({k for r in runs for k in r["counts"] if k.startswith("  ")})
    keys = ["store writes", *operations, "collection writes", "collection reads"]
    table = Table(
        title=f"Metadata store operations per run ({'MongoDB ' + args.mongo if args.mongo else 'embedded store'})"
    )
    table.add_column("")
    for r in runs:
        table.add_column(f"{r['run']} ({r['status']}, {r['seconds']:.0f} s)", justify="right")
    for key in keys:
        table.add_row(key, *[str(r["counts"].get(key, 0)) for r in runs])
    console.print(table)


if __name__ == "__main__":
    main()
