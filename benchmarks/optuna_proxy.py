"""What the storage proxy costs: a study's trials through it against direct journal access.

A contained pipeline reaches its study only through the parent's proxy (one JSON round
trip per storage call over a socketpair; finished trials are kept on the pipeline's side).
This runs the same TPE study (a cheap two-parameter objective, so storage dominates) with
a journal opened directly and through the proxy, in alternating order, and prints the
wall times and the proxy's round trips.

    .venv/bin/python benchmarks/optuna_proxy.py [--trials 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna

from mlpilot.platform.execution.optuna_proxy import StorageProxy, StudyPolicy
from mlpilot.platform.ml.hpo import proxy as P
from mlpilot.platform.ml.hpo.storage import open_storage

RUN_ID = "abcdef1234567890abcdef1234567890"
NAME = f"sales-rf-{RUN_ID[:8]}"


def _objective(trial: optuna.Trial) -> float:
    return trial.suggest_float("x", -5, 5) ** 2 + trial.suggest_int("y", 0, 10)


def _run(storage: Any, trials: int) -> float:
    study = optuna.create_study(
        study_name=NAME, storage=storage, sampler=optuna.samplers.TPESampler(seed=1)
    )
    started = time.perf_counter()
    study.optimize(_objective, n_trials=trials)
    return time.perf_counter() - started


def _proxied(journal: Path, trials: int) -> tuple[float, int]:
    policy = StudyPolicy(targets=["sales"], models=["rf"], run_id=RUN_ID)
    server = StorageProxy(str(journal), policy).start()
    client = P._make_class()(server.child_fd)
    calls = [0]
    call = client._call

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return call(*args)

    client._call = counted
    try:
        return _run(client, trials), calls[0]
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    times: dict[str, list[float]] = {"direct": [], "proxy": []}
    calls = 0
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            order = ("proxy", "direct") if round_ % 2 == 0 else ("direct", "proxy")
            for kind in order:
                journal = Path(tmp) / f"{round_}-{kind}" / "journal.log"
                if kind == "direct":
                    times[kind].append(_run(open_storage(str(journal)), args.trials))
                else:
                    seconds, calls = _proxied(journal, args.trials)
                    times[kind].append(seconds)
    for kind, values in times.items():
        print(f"{kind:>6}: {', '.join(f'{v:.2f} s' for v in values)} for {args.trials} trials")
    print(f"proxy round trips per study: {calls} ({calls / args.trials:.1f} per trial)")


if __name__ == "__main__":
    main()
