"""Warm start against cold start (issue 29): best holdout score after 5, 10, 20, 50 trials.

On the twelve sets of ``../shared/eval/bench-datasets.tsv`` (none of them in the prior's
training list: the script refuses a prior that saw one, by item name), for one fixed
family per search (LightGBM, then random forest), each seed's study runs the same number
of trials twice, without and with the prior, on at most 5,000 training rows. After each
prefix of n trials, the best trial by cross-validated score is refitted on the training
split and scored on the run's holdout split. Reported per set and family (mean over
seeds): the cold and warm holdout score at each n, the trials warm needs to come within
0.5 % (relative) of cold at 50, and whether warm at 50 is worse than cold by more than the
tie margin (0.005).

    .venv/bin/python benchmarks/warm_start.py [--prior PATH] [--seeds 3] [--trials 50]
        [--families lgbm,rf] [--sets Default,mpg] [--rf-trees 0.25]

``--rf-trees F`` (the cut that makes the benchmark fit its time here) scales random
forests' ``n_estimators`` by F in both legs alike: the search range (50–400 trees becomes
12–100 at 0.25) and the prior's configurations, so that warm and cold search the same
smaller space.

``--prior`` reads a prior from a file (default: the one the package ships). Not part of
``make bench``; estimators run single-threaded (OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from automl import BenchSet, read_sets  # noqa: E402
from hpo import prepared_run  # noqa: E402

SETS = HERE.parent.parent / "shared" / "eval" / "bench-datasets.tsv"
PREFIXES = (5, 10, 20, 50)
MAX_ROWS = 5000
CLOSE = 0.005  # 0.5 % relative
TIE = 0.005


def use_prior(path: str | None, sets: list[BenchSet]) -> Any:
    """The prior to test, after checking it saw none of the evaluated sets."""
    from mlpilot.platform.ml import prior as P

    prior = P.Prior(json.loads(Path(path).read_text())) if path else P.Prior.shipped()
    if prior is None:
        raise SystemExit("no prior: build one (benchmarks/build_prior.py) or pass --prior")
    seen = {s["name"].split("/")[-1].lower() for s in prior.sets}
    overlap = sorted(b.item for b in sets if b.item.split("/")[-1].lower() in seen)
    if overlap:
        raise SystemExit(f"the prior was built from evaluated sets: {', '.join(overlap)}")
    P.Prior.shipped = classmethod(lambda cls: prior)  # type: ignore[method-assign]
    return prior


def scale_forests(prior: Any, factor: float) -> None:
    """Random forests of ``factor`` times the trees, in the search space and the prior."""
    import dataclasses

    from mlpilot.platform.ml import families as F

    if factor == 1.0:
        return
    family = type(F.registry().get("rf"))

    def scaled(n: float) -> int:
        return max(1, round(n * factor))

    family.params = tuple(
        dataclasses.replace(p, low=scaled(p.low), high=scaled(p.high))
        if p.name == "n_estimators"
        else p
        for p in family.params
    )
    for by_family in prior.candidates.values():
        for params in by_family.get("rf", []):
            if "n_estimators" in params:
                params["n_estimators"] = scaled(params["n_estimators"])


def one_search(bench: BenchSet, family: str, seed: int, warm: bool, work: Path, trials: int):
    """The holdout score of the best trial after each prefix of the study."""
    import optuna

    from mlpilot.platform.ml import metrics as M
    from mlpilot.platform.ml.hpo import open_storage
    from mlpilot.platform.ml.hpo.optimize import optimize
    from mlpilot.platform.ml.hpo.spaces import model_params

    frame = bench.load()
    if len(frame) > MAX_ROWS / 0.8:
        frame = frame.sample(int(MAX_ROWS / 0.8), random_state=seed)
    folder = work / f"{bench.item.replace('/', '-')}-{family}-{seed}-{warm}"
    folder.mkdir(parents=True)
    data = folder / "data.csv"
    frame.to_csv(data, index=False)
    run = prepared_run(data, bench.target, folder / "run")
    run.seed = seed
    storage = str(folder / "journal.log")
    optimize(
        run, model=family, trials=trials, metric=None, timeout_s=None, early_stopping=False,
        warm_start=warm, study_name="s", storage=storage, plots=False,
    )  # fmt: skip
    metric = run.model.main_metric
    study = optuna.load_study(study_name="s", storage=open_storage(storage))
    ordered = sorted(study.trials, key=lambda t: t.number)
    sign = 1.0 if M.direction(metric) == "maximize" else -1.0
    scorer = _scorer(run, metric)
    out, cache = {}, {}
    for n in PREFIXES:
        if len(ordered) < n:
            break  # a shorter study (--trials) has no score after n trials
        done = [t for t in ordered[:n] if t.state.name == "COMPLETE"]
        if not done:
            continue
        best = max(done, key=lambda t: sign * t.value)
        if best.number not in cache:
            fitted = run.build_pipeline(family, model_params(best.params)).fit(*run.data.train())
            cache[best.number] = float(scorer(fitted, *run.data.test()))
        out[n] = cache[best.number]
    return out, metric


def _scorer(run: Any, metric: str) -> Any:
    from sklearn.metrics import get_scorer

    from mlpilot.platform.ml import metrics as M

    name = M.sklearn_scorer(metric, run.data.task, run.data.classes, run.data.positive_class)
    return get_scorer(name) if isinstance(name, str) else name


def reached(cold50: float, warm: dict[int, float]) -> int | None:
    """The fewest trials after which warm is within ``CLOSE`` of cold at 50 (None: never)."""
    for n in PREFIXES:
        value = warm.get(n)
        if value is not None and value >= cold50 - CLOSE * abs(cold50):
            return n
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prior", default=None)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=max(PREFIXES))
    parser.add_argument("--families", default="lgbm,rf")
    parser.add_argument("--sets", default="", help="comma-separated item names (default: all)")
    parser.add_argument("--rf-trees", type=float, default=1.0, help="scale forests' trees")
    args = parser.parse_args(argv)
    sets = read_sets(SETS)
    if args.sets:
        wanted = {s.strip() for s in args.sets.split(",")}
        sets = [b for b in sets if b.item.split("/")[-1] in wanted or b.item in wanted]
    scale_forests(use_prior(args.prior, sets), args.rf_trees)
    rows, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families.split(","):
            for bench in sets:
                rows.append(_row(bench, family, args, Path(tmp)))
                print(_line(rows[-1]), flush=True)
    _summary(rows, time.perf_counter() - started)
    return 0


def _row(bench: BenchSet, family: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    legs: dict[bool, list[dict[int, float]]] = {False: [], True: []}
    metric = ""
    for seed in range(args.seeds):
        for warm in (False, True):
            scores, metric = one_search(bench, family, seed, warm, work, args.trials)
            legs[warm].append(scores)

    def mean(leg: list[dict[int, float]]) -> dict[int, float]:
        return {n: statistics.mean(s[n] for s in leg) for n in PREFIXES if all(n in s for s in leg)}

    # holdout scores come from scikit-learn scorers: greater is better (a loss is negated)
    return {
        "set": bench.item,
        "family": family,
        "metric": metric,
        "cold": mean(legs[False]),
        "warm": mean(legs[True]),
    }


def _line(row: dict[str, Any]) -> str:
    cells = " ".join(
        f"{row['cold'].get(n, float('nan')):.4g}/{row['warm'].get(n, float('nan')):.4g}"
        for n in PREFIXES
    )
    return f"{row['set']:<28} {row['family']:<5} {row['metric']:<8} cold/warm @5,10,20,50: {cells}"


def _summary(rows: list[dict[str, Any]], seconds: float) -> None:
    needed, worse = [], []
    for row in rows:
        last = max(PREFIXES)
        if last not in row["cold"] or last not in row["warm"]:
            continue
        n = reached(row["cold"][last], row["warm"])
        needed.append(n if n is not None else 2 * last)
        if row["warm"][last] < row["cold"][last] - TIE:
            worse.append(f"{row['set']} ({row['family']})")
    mean_needed = statistics.mean(needed) if needed else float("nan")
    print(
        f"\ntrials warm needs to reach cold@50 within 0.5 %: mean {mean_needed:.1f} (never = 100)"
    )
    print(f"warm@50 worse than cold@50 by more than {TIE}: {', '.join(worse) or 'none'}")
    print(f"wall time {seconds / 60:.1f} min")


if __name__ == "__main__":
    sys.exit(main())
