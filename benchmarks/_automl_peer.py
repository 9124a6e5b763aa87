"""One peer AutoML fit for ``benchmarks/automl.py``, run by the peers' own interpreter.

    python _automl_peer.py TASK_JSON

TASK_JSON holds: tool (flaml | autogluon), train, test (CSV paths; the test file has no
target), target, task (binary | multiclass | regression), budget_s, started_at (the
parent's wall clock when it launched this process: the budget counts from there, imports
included), out (JSON path). The fit gets what is left of the budget once the libraries
are imported, less a margin for predicting; the JSON gets the predictions, each class's
probability, and when the fit ended. Imports nothing of mlpilot: it runs in
``benchmarks/.peers-venv``, whose pins are the peers' own.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from typing import Any

#: seconds kept after the fit for predicting and writing (inside the budget)
PREDICT_MARGIN_S = 2.0
#: tree models only (no torch): what both peers search
FLAML_ESTIMATORS = ["lgbm", "rf", "xgboost", "extra_tree", "xgb_limitdepth"]
AUTOGLUON_MODELS: dict[str, Any] = {"GBM": {}, "CAT": {}, "XGB": {}, "RF": {}, "XT": {}}
METRICS = {
    "flaml": {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"},
    "autogluon": {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"},
}


def _left(task: dict[str, Any]) -> float:
    return task["budget_s"] - (time.time() - task["started_at"]) - PREDICT_MARGIN_S


def run_flaml(task: dict[str, Any], train: Any, test: Any) -> dict[str, Any]:
    from flaml import AutoML

    y = train.pop(task["target"])
    automl = AutoML()
    automl.fit(
        train,
        y,
        task="regression" if task["task"] == "regression" else "classification",
        metric=METRICS["flaml"][task["task"]],
        time_budget=max(_left(task), 1.0),
        estimator_list=FLAML_ESTIMATORS,
        n_jobs=-1,
        seed=42,
        verbose=0,
    )
    fit_end = time.time()
    out: dict[str, Any] = {"fit_end": fit_end, "prediction": automl.predict(test).tolist()}
    if task["task"] != "regression":
        proba = automl.predict_proba(test)
        out["classes"] = [str(c) for c in automl.classes_]
        out["proba"] = proba.tolist()
    out["best"] = str(automl.best_estimator)
    return out


def run_autogluon(task: dict[str, Any], train: Any, test: Any) -> dict[str, Any]:
    from autogluon.tabular import TabularPredictor

    kind = {"binary": "binary", "multiclass": "multiclass", "regression": "regression"}
    with tempfile.TemporaryDirectory(prefix="ag-") as path:
        predictor = TabularPredictor(
            label=task["target"],
            problem_type=kind[task["task"]],
            eval_metric=METRICS["autogluon"][task["task"]],
            path=path,
            verbosity=0,
        )
        predictor.fit(
            train,
            time_limit=max(_left(task), 1.0),
            presets="medium_quality",
            hyperparameters=AUTOGLUON_MODELS,
        )
        fit_end = time.time()
        out: dict[str, Any] = {
            "fit_end": fit_end,
            "prediction": predictor.predict(test).tolist(),
            "best": str(predictor.model_best),
        }
        if task["task"] != "regression":
            proba = predictor.predict_proba(test)
            out["classes"] = [str(c) for c in proba.columns]
            out["proba"] = proba.to_numpy().tolist()
    return out


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        task = json.load(fh)
    import pandas as pd

    train = pd.read_csv(task["train"])
    test = pd.read_csv(task["test"])
    runner = run_flaml if task["tool"] == "flaml" else run_autogluon
    out = runner(task, train, test)
    out["prediction"] = [str(p) if task["task"] != "regression" else p for p in out["prediction"]]
    with open(task["out"], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
