"""The model as an MLflow artifact, the registry, and predictions on new files."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.devices import observe_model
from mlpilot.platform.ml.io import read_table, readable_path
from mlpilot.tracking import vocab


# -- model logging, registry and prediction ---------------------------------------------------------------
def log_model(run: PipelineRun) -> str | None:
    """Log the whole Pipeline with a signature over the raw input columns."""
    from mlpilot.tracking.run_logger import NullRunLogger

    if isinstance(run.opened_logger(), NullRunLogger):  # --no-track: nothing to log it to
        return None
    from mlflow.models import ModelSignature
    from mlflow.models.signature import infer_signature
    from mlflow.types import ColSpec, Schema
    from mlflow.types.schema import AnyType

    example = run.data.raw_example
    # Raw files vary (ints in one file, floats or blanks in the next); SchemaCoercer
    # parses every column, so the signature names the columns and accepts any type.
    inputs = Schema([ColSpec(AnyType(), str(c)) for c in example.columns])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inferred *input* schema is replaced below
        outputs = infer_signature(example, run.model.pipeline.predict(example)).outputs
    run.model.uri = run.logger.log_model(
        run.model.pipeline,
        signature=ModelSignature(inputs=inputs, outputs=outputs),
        input_example=example,
    )
    run.model.logged = True
    run.result.model_digests = getattr(run.opened_logger(), "model_digests", None)
    if run.model.uri:
        run.event("progress", stage="log_model", message=f"model logged: {run.model.uri}")
    return run.model.uri


def register_model(
    run: PipelineRun,
    name: str,
    alias: str | None = None,
    run_id: str | None = None,
    metric: str | None = None,
) -> None:
    from mlpilot.tracking import registry

    with run.stage("register"):
        if getattr(run.logger, "relayed", False):
            # under mlpilot the parent registers, checking the request against the plan
            if run_id is None and run.model.pipeline is not None and not run.model.logged:
                log_model(run)
            run.logger.register(
                name,
                alias=alias,
                source_run=run_id,
                metric=metric or run.model.main_metric,
                lineage=_lineage(run),
            )
            return
        client = getattr(run.logger, "client", None)
        if client is None:
            raise MlpilotError(
                "register_model needs MLflow tracking", hint="run without --no-track"
            )
        if run_id is None and run.model.pipeline is not None:
            if not run.model.logged:
                log_model(run)
            source_run, model_uri = run.logger.run_id, run.model.uri
        else:
            source_run, model_uri = registry.resolve_source(
                client, run.logger.experiment_id, run_id, metric or run.model.main_metric
            )
        version = registry.register(
            client,
            model_uri=model_uri,
            name=name,
            alias=alias,
            source_run_id=source_run,
            lineage=_lineage(run),
        )
        run.result.registered = version
        run.note(
            f"registered {name} version {version['version']}" + (f" as @{alias}" if alias else "")
        )


def _lineage(run: PipelineRun) -> dict[str, str]:
    lineage = {vocab.TAG_TARGET: run.data.target or "", vocab.TAG_TASK: run.data.task or ""}
    if run.model.main_metric and f"test_{run.model.main_metric}" in run.metrics:
        lineage[vocab.TAG_METRIC] = run.model.main_metric
        lineage[vocab.TAG_METRIC_VALUE] = f"{run.metrics[f'test_{run.model.main_metric}']:.6g}"
    return lineage


def _inside_run_dir(run: PipelineRun, name: str) -> Path:
    """Where a plan's output goes: inside the run folder, whatever the plan says."""
    folder = run.run_dir.resolve()
    out = (folder / name).resolve()
    if not out.is_relative_to(folder):
        raise MlpilotError(
            f"predict: output_path {name!r} leaves the run folder", hint="give a relative name"
        )
    return out


def _store_model(run: PipelineRun, model_uri: str | None) -> object:
    """A model from the store, as the parent fetched and verified it before the start."""
    import json
    import os

    import mlflow.pyfunc

    from mlpilot.platform.ml import protocol

    provided = json.loads(os.environ.get(protocol.ENV_STORE_MODELS) or "{}")
    folder = provided.get(model_uri or "")
    if not folder:
        raise MlpilotError(
            f"predict: no verified copy of {model_uri or 'the best model'} was provided",
            hint="mlpilot fetches store models before the pipeline starts; see the run's notes",
        )
    return mlflow.pyfunc.load_model(str(run.run_dir / folder))


def predict(
    run: PipelineRun, data_path: str, output_path: str | None = None, model_uri: str | None = None
) -> None:
    with run.stage("predict"):
        frame = read_table(readable_path(data_path))
        if model_uri is None and run.model.pipeline is not None:
            model, source = run.model.pipeline, "this run's model"
        elif getattr(run.logger, "relayed", False):
            model, source = _store_model(run, model_uri), model_uri or "the experiment's best model"
        else:
            from mlpilot.tracking import registry

            client = getattr(run.logger, "client", None)
            if model_uri is None:
                if client is None:
                    raise MlpilotError("predict needs a model_uri when tracking is off")
                _, model_uri = registry.resolve_source(client, run.logger.experiment_id, None, None)
            from mlpilot.tracking.trust import load_verified

            # a model from the store: its files are checked against their digests first
            model = load_verified(client, model_uri, run.run_dir / "model-verified")
            source = model_uri
        # a pyfunc wrapper shows its sklearn model through the flavour's raw model
        observe_model(getattr(model, "_model_impl", None) or model)
        predictions = model.predict(frame)
        out = _inside_run_dir(run, output_path or "predictions.csv")
        result = frame.copy()
        result["prediction"] = (
            np.asarray(predictions).ravel()
            if not isinstance(predictions, pd.DataFrame)
            else predictions.iloc[:, 0].to_numpy()
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(out, index=False)
        if out.stat().st_size < 50 * 2**20:
            run.logger.log_file(out, "predictions")
        run.result.predictions = {"path": str(out), "rows": len(result), "model": source}
        run.note(f"wrote {len(result)} predictions to {out}")
