"""``mlpilot predict``: raw rows in, predictions out, with any MLflow model URI.

Registered models are addressed by alias (``models:/NAME@champion``) or version
(``models:/NAME/3``); ``NAME@ALIAS`` without the scheme works too. Logged models
(``models:/m-…``) and ``runs:/RUN_ID/model`` load the same way.
"""

from __future__ import annotations

import re
import secrets
import shutil
import sys
from datetime import datetime
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


def predict_file(
    model_uri: str,
    data_path: str,
    out: str | None,
    *,
    trust_unverified: bool = False,
    trust_local: bool = False,
    proba: bool = False,
) -> tuple[str, int]:
    """Predict ``data_path`` with ``model_uri`` in a contained child; write to ``out`` (the
    user's own path: the one write outside a run folder) or print to stdout."""
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.execution import Executor
    from mlpilot.platform.ml import predict_job, protocol
    from mlpilot.tracking.mlflow_store import check_reachable

    settings = get_settings()
    model_uri = normalize_model_uri(model_uri)
    check_reachable(settings.tracking_uri)
    run_dir = settings.runs_dir / f"predict-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    run_dir.mkdir(parents=True)
    if not model_uri.startswith(("models:/", "runs:/")):
        model_uri = _local_copy(model_uri, run_dir, trust_local)
    else:
        # checked here, against the private store the pipeline's account cannot read; the
        # child loads that verified copy (DESIGN §8)
        model_uri, trust_local = _verified_copy(model_uri, run_dir, trust_unverified), True
    trust = [name for name, on in (("unverified", trust_unverified), ("local", trust_local)) if on]
    leg = (
        Executor(settings)
        .start_leg(
            script=Path(predict_job.__file__),
            run_dir=run_dir,
            engine="cpu",
            data_path=str(Path(data_path).expanduser().resolve()),
            mlflow_run_id=None,
            extra_env={
                protocol.ENV_MODEL_URI: model_uri,
                protocol.ENV_TRUST: ",".join(trust),
                protocol.ENV_PROBA: "1" if proba else "",
            },
        )
        .finish()
    )
    if not leg.ok:
        failure = leg.failure()
        raise MlpilotError(str(failure.get("message") or "prediction failed"))
    return _deliver(run_dir / protocol.PREDICTIONS_FILE, out, int(leg.result.predictions["rows"]))


def _verified_copy(model_uri: str, run_dir: Path, trust_unverified: bool) -> str:
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.mlflow_store import make_client
    from mlpilot.tracking.trust import fetch_verified

    client = make_client(get_settings())
    dest = run_dir / "model-verified"
    return str(fetch_verified(client, model_uri, dest, trust_unverified=trust_unverified))


def _local_copy(folder: str, run_dir: Path, trust_local: bool) -> str:
    """A model folder on disk: loaded only when the user vouches for it, from a copy the
    contained process may read."""
    if not trust_local:
        raise MlpilotError(
            f"{folder} is a local folder: its files were never verified",
            hint="load models from the tracking store (models:/NAME@ALIAS), or pass --trust-local-model",
        )
    source = Path(folder).expanduser()
    if not (source / "MLmodel").is_file():
        raise MlpilotError(f"{folder} is not an MLflow model folder (no MLmodel file)")
    copy = run_dir / "model-local"
    shutil.copytree(source, copy)
    return str(copy)


def _deliver(predictions: Path, out: str | None, rows: int) -> tuple[str, int]:
    if out:
        Path(out).expanduser().parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(predictions, Path(out).expanduser())
        return out, rows
    sys.stdout.write(predictions.read_text(encoding="utf-8"))
    return "-", rows
