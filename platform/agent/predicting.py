"""``mlpilot predict``: raw rows in, predictions out, with any MLflow model URI.

Registered models are addressed by alias (``models:/NAME@champion``) or version
(``models:/NAME/3``); ``NAME@ALIAS`` without the scheme works too. Logged models
(``models:/m-…``) and ``runs:/RUN_ID/model`` load the same way.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mlpilot.platform.errors import MlpilotError

_BARE_REGISTRY_REF = re.compile(r"^[^:/@]+(@[\w-]+|/\d+)$")


def normalize_model_uri(model: str) -> str:
    """``NAME@ALIAS`` / ``NAME/VERSION`` → ``models:/…``; anything with a scheme as given."""
    model = model.strip()
    if "://" in model or model.startswith(("models:/", "runs:/")):
        return model
    if _BARE_REGISTRY_REF.match(model):
        return f"models:/{model}"
    return model  # a local path to a saved model


def predict_file(model_uri: str, data_path: str, out: str | None) -> tuple[str, int]:
    import numpy as np
    import pandas as pd

    from mlpilot.platform.config import get_settings
    from mlpilot.platform.ml.io import read_table
    from mlpilot.tracking.mlflow_store import check_reachable, configure_http_timeouts

    settings = get_settings()
    model_uri = normalize_model_uri(model_uri)
    configure_http_timeouts()
    check_reachable(settings.tracking_uri)
    import mlflow
    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException

    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    frame = read_table(data_path)
    try:
        model = mlflow.pyfunc.load_model(model_uri)
    except MlflowException as exc:
        raise MlpilotError(
            f"cannot load model {model_uri}: {str(exc.message).strip().splitlines()[0][:200]}",
            hint="list models and aliases with: mlpilot models list",
        ) from None
    predictions = model.predict(frame)
    result = frame.copy()
    result["prediction"] = (
        predictions.iloc[:, 0].to_numpy()
        if isinstance(predictions, pd.DataFrame)
        else np.asarray(predictions).ravel()
    )
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(out, index=False)
        return out, len(result)
    result.to_csv(sys.stdout, index=False)
    return "-", len(result)
