"""Predict held-out raw rows with many logged models in one process (one MLflow import).

Usage: python predict_holdout.py JOBS.json — a list of {tracking_uri, model_uri, rows,
out}. Rows are read as ``mlpilot predict`` reads a file; each job's predictions go to its
``out`` CSV, or its error to ``out`` + ".error".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mlflow.pyfunc
import pandas as pd

from mlpilot.platform.ml.io import read_table


def main(jobs_file: str) -> None:
    for job in json.loads(Path(jobs_file).read_text(encoding="utf-8")):
        mlflow.set_tracking_uri(job["tracking_uri"])
        try:
            model = mlflow.pyfunc.load_model(job["model_uri"])
            predicted = pd.DataFrame(model.predict(read_table(job["rows"]))).iloc[:, 0]
            predicted.rename("prediction").to_frame().to_csv(job["out"], index=False)
        except Exception as exc:  # the case's test reports it
            Path(job["out"] + ".error").write_text(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1])
