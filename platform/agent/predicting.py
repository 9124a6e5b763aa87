"""``mlpilot predict``: raw rows in, predictions out, with any MLflow model URI.

Registered models are addressed by alias (``models:/NAME@champion``) or version
(``models:/NAME/3``); ``NAME@ALIAS`` without the scheme works too. Logged models
(``models:/m-…``) and ``runs:/RUN_ID/model`` load the same way.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

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
        folder = _local_copy(model_uri, run_dir, trust_local)
    else:
        folder = _verified_copy(settings, model_uri, run_dir, trust_unverified)
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
                protocol.ENV_STORE_MODELS: json.dumps({model_uri: folder}),
                protocol.ENV_PROBA: "1" if proba else "",
            },
            track=False,  # logs nothing: the job only predicts
        )
        .finish()
    )
    if not leg.ok:
        failure = leg.failure()
        raise MlpilotError(str(failure.get("message") or "prediction failed"))
    # no file can be larger than the child's file-size limit: the same cap for reading it
    limit = int(settings.max_file_mb * 2**20)
    return _deliver(run_dir, out, int(leg.result.predictions["rows"]), limit)


def _verified_copy(settings: Any, model_uri: str, run_dir: Path, trust_unverified: bool) -> str:
    """The model fetched from the store and checked against its digests here, into a
    read-only folder of the job's run folder: the contained job loads it from there and
    never reaches the store itself (DESIGN §8)."""
    from mlpilot.platform.agent.launching import read_only
    from mlpilot.platform.ml import protocol
    from mlpilot.tracking.mlflow_store import make_client
    from mlpilot.tracking.trust import fetch_verified

    dest = run_dir / protocol.STORE_MODELS_DIR / "0"
    local = fetch_verified(
        make_client(settings), model_uri, dest, trust_unverified=trust_unverified
    )
    read_only(dest)
    return local.relative_to(run_dir).as_posix()


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
    return copy.name


def _deliver(run_dir: Path, out: str | None, rows: int, limit: int) -> tuple[str, int]:
    """The job's predictions to ``out`` or stdout, read without following links (the job
    could have left a link to a file only root may read)."""
    from mlpilot.platform.ml.protocol import PREDICTIONS_FILE
    from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

    try:
        with RunFolder(run_dir) as folder:
            if out:
                Path(out).expanduser().parent.mkdir(parents=True, exist_ok=True)
                found = folder.copy_out(PREDICTIONS_FILE, Path(out).expanduser(), limit)
            else:
                text = folder.read_text(PREDICTIONS_FILE, limit)
                found = text is not None
    except UnsafeFile as exc:
        raise MlpilotError(f"the predictions are not delivered: {exc.message}") from None
    if not found:
        raise MlpilotError(f"the prediction job wrote no {PREDICTIONS_FILE}")
    if not out:
        sys.stdout.write(text or "")
    return out or "-", rows
