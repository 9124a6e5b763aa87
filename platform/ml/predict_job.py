"""``mlpilot predict``'s work, in a contained pipeline process (never in mlpilot itself).

Loading a model runs the code its pickle holds: mlpilot fetches the model and checks its
files against their recorded digests (``tracking/trust.py``) into a read-only folder of
this job's run folder; this process loads that verified copy, predicts the rows and writes ``predictions.csv`` into its run folder, which mlpilot then
hands to the user. It reports through the same protocol as a pipeline.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.entry import exit_process
from mlpilot.platform.ml.io import read_table, readable_path
from mlpilot.tracking.run_logger import NullRunLogger


def main() -> int:
    import json

    import mlflow.pyfunc

    from mlpilot.platform.config.logs import configure_logging

    configure_logging()
    run_dir = Path(os.environ[protocol.ENV_RUN_DIR])
    data = os.environ[protocol.ENV_DATA]
    uri = os.environ[protocol.ENV_MODEL_URI]
    run = PipelineRun(plan={}, seed=0, data_path=data, run_dir=run_dir, logger=NullRunLogger())
    with run, run.stage("predict"):
        # fetched and verified by mlpilot into the run folder: this process never reaches
        # the tracking store (DESIGN §8)
        folder = json.loads(os.environ[protocol.ENV_STORE_MODELS])[uri]
        model = mlflow.pyfunc.load_model(str(run_dir / folder))
        frame = read_table(readable_path(data))
        predicted = model.predict(frame)
        frame["prediction"] = (
            predicted.iloc[:, 0].to_numpy()
            if isinstance(predicted, pd.DataFrame)
            else np.asarray(predicted).ravel()
        )
        if os.environ.get(protocol.ENV_PROBA) == "1":
            frame = add_probabilities(frame, model)
        frame.to_csv(run_dir / protocol.PREDICTIONS_FILE, index=False)
        run.result.predictions = {"rows": len(frame), "model": os.environ[protocol.ENV_MODEL_URI]}
    return run.exit_code


def add_probabilities(frame: pd.DataFrame, model: Any) -> pd.DataFrame:
    """``frame`` with a ``proba_<class>`` column per class, when the model is a classifier
    with probabilities (the pyfunc's scikit-learn model); unchanged otherwise."""
    from mlpilot.platform.errors import MlpilotError

    inner = getattr(getattr(model, "_model_impl", None), "sklearn_model", None)
    if inner is None or not hasattr(inner, "predict_proba"):
        raise MlpilotError(
            "--proba needs a scikit-learn classifier with probabilities; this model has none"
        )
    raw = frame.drop(columns=["prediction"])
    scores = np.asarray(inner.predict_proba(raw))
    classes = list(getattr(inner, "classes_", range(scores.shape[1])))
    extra = pd.DataFrame(
        scores, columns=[f"{protocol.PROBA_PREFIX}{c}" for c in classes], index=frame.index
    )
    return pd.concat([frame, extra], axis=1)


if __name__ == "__main__":
    exit_process(main())
