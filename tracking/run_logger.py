"""Logging to one MLflow run through an explicit client and run id (no fluent state).

``MlflowRunLogger`` is what pipelines and the orchestrator write through; metrics and
params go out in batches. ``NullRunLogger`` logs nothing (``pipeline.py --no-track``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow import MlflowClient

MAX_PARAM_CHARS = 6000
_BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 1] + "…"


class NullRunLogger:
    """Accepts every call and records nothing."""

    run_id: str | None = None
    tracking_uri: str | None = None

    def log_params(self, params: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None: ...
    def set_tags(self, tags: dict[str, Any]) -> None: ...
    def log_text(self, text: str, artifact_file: str) -> None: ...
    def log_dict(self, data: Any, artifact_file: str) -> None: ...
    def log_file(self, local_path: str | Path, artifact_dir: str | None = None) -> None: ...
    def log_figure(self, figure: Any, artifact_file: str) -> None: ...
    def log_input(
        self, frame: Any, *, source: str, name: str, targets: str | None = None
    ) -> None: ...

    def log_model(
        self, model: Any, *, signature: Any = None, input_example: Any = None
    ) -> str | None:
        return None

    def child(self, name: str, tags: dict[str, str] | None = None) -> NullRunLogger:
        return NullRunLogger()

    def end(self, status: str = "FINISHED") -> None: ...


class MlflowRunLogger:
    """Writes to ``run_id`` through ``client``; never touches ``mlflow.active_run()``."""

    def __init__(self, client: MlflowClient, run_id: str, experiment_id: str | None = None) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id or client.get_run(run_id).info.experiment_id
        self.tracking_uri = client.tracking_uri
        self._logged_params: dict[str, str] = {}

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        fresh = {}
        for key, value in params.items():
            text = _param_value(value)
            if self._logged_params.get(key) == text:
                continue
            if key in self._logged_params:  # MLflow params are write-once: keep the first
                continue
            fresh[key] = text
        items = [Param(k, v) for k, v in fresh.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])
        self._logged_params.update(fresh)

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [
            Metric(key, float(value), now, step)
            for key, value in metrics.items()
            if value is not None and value == value  # skip NaN
        ]
        for i in range(0, len(items), _BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + _BATCH])

    def set_tags(self, tags: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:8000]) for k, v in tags.items() if v is not None]
        if items:
            self.client.log_batch(self.run_id, tags=items)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_text(
            self.run_id, json.dumps(data, indent=2, default=str, ensure_ascii=False), artifact_file
        )

    def log_file(self, local_path: str | Path, artifact_dir: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(local_path), artifact_dir)

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        self.client.log_figure(self.run_id, figure, artifact_file)

    def log_input(self, frame: Any, *, source: str, name: str, targets: str | None = None) -> None:
        import warnings

        import mlflow.data
        from mlflow.entities import DatasetInput, InputTag

        sample = frame if len(frame) <= 100_000 else frame.sample(100_000, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MLflow's notes on local sources and integer columns
            dataset = mlflow.data.from_pandas(sample, source=source, name=name, targets=targets)
        tag = InputTag(key="mlflow.data.context", value="training")
        self.client.log_inputs(
            self.run_id, datasets=[DatasetInput(dataset._to_mlflow_entity(), [tag])]
        )

    def log_model(
        self, model: Any, *, signature: Any = None, input_example: Any = None
    ) -> str | None:
        import logging

        import mlflow
        import mlflow.sklearn

        # cloudpickle is deliberate: the Pipeline holds mlpilot's own transformers
        logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
        # log_model resolves the run through the process-wide URI: point it at our store
        mlflow.set_tracking_uri(self.tracking_uri)
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            signature=signature,
            input_example=input_example,
            run_id=self.run_id,
            serialization_format="cloudpickle",
        )
        return info.model_uri

    def child(self, name: str, tags: dict[str, str] | None = None) -> MlflowRunLogger:
        """A nested run under this one (``mlflow.parentRunId``)."""
        run = self.client.create_run(
            self.experiment_id,
            run_name=name,
            tags={"mlflow.parentRunId": self.run_id, **(tags or {})},
        )
        return MlflowRunLogger(self.client, run.info.run_id, self.experiment_id)

    def end(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)
