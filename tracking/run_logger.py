"""Logging to one MLflow run through an explicit client and run id (no fluent state).

``MlflowRunLogger`` is what pipelines and the orchestrator write through; metrics, params
and tags go out in batches (``log_batch``). A nested run from ``child()`` holds its
params, metrics and tags until it ends and then writes them in one batch — a trial is
three calls (create, batch, terminate) rather than one per value. ``NullRunLogger`` logs
nothing (``pipeline.py --no-track``).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mlflow import MlflowClient

F = TypeVar("F", bound=Callable[..., Any])
MAX_PARAM_CHARS = 6000
MAX_TAG_CHARS = 8000
#: MLflow's limits for one log_batch request
BATCH_METRICS = 1000
BATCH_PARAMS = 100
BATCH_TAGS = 100
BATCH_TOTAL = 1000
#: modules a logged scikit-learn Pipeline always needs to load
BASE_MODULES = ("sklearn", "numpy", "pandas", "scipy", "cloudpickle")


def _unreachable_as_tracking_error(method: F) -> F:
    """An MLflow server that stops answering mid-run becomes a one-line ``TrackingError``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        from mlflow.exceptions import MlflowException

        try:
            return method(self, *args, **kwargs)
        except MlflowException as exc:
            text = str(exc)
            if "API request to" not in text or "failed with exception" not in text:
                raise
            from mlpilot.platform.errors import TrackingError
            from mlpilot.tracking.mlflow_store import redact_uri

            raise TrackingError(
                f"MLflow tracking server at {redact_uri(self.tracking_uri)} stopped answering "
                f"({method.__name__})",
                hint="check the server; mlpilot doctor --repair reconciles the stores afterwards",
            ) from None

    return wrapper  # type: ignore[return-value]


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 1] + "…"


def batches(metrics: list, params: list, tags: list) -> list[tuple[list, list, list]]:
    """Split entities into ``log_batch`` calls that respect MLflow's per-request limits."""
    out: list[tuple[list, list, list]] = []
    metrics, params, tags = list(metrics), list(params), list(tags)
    while metrics or params or tags:
        p, params = params[:BATCH_PARAMS], params[BATCH_PARAMS:]
        t, tags = tags[:BATCH_TAGS], tags[BATCH_TAGS:]
        room = min(BATCH_METRICS, BATCH_TOTAL - len(p) - len(t))
        m, metrics = metrics[:room], metrics[room:]
        out.append((m, p, t))
    return out


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
        self,
        *,
        name: str,
        source: str,
        digest: str,
        rows: int,
        columns: list[tuple[str, str]],
        targets: str | None = None,
    ) -> None: ...

    def log_model(
        self, model: Any, *, signature: Any = None, input_example: Any = None
    ) -> str | None:
        return None

    def child(
        self, name: str, tags: dict[str, str] | None = None, *, start_ms: int | None = None
    ) -> NullRunLogger:
        return NullRunLogger()

    def flush(self) -> None: ...

    def end(self, status: str = "FINISHED", *, end_ms: int | None = None) -> None: ...


class MlflowRunLogger:
    """Writes to ``run_id`` through ``client``; never touches ``mlflow.active_run()``.

    With ``deferred=True`` params, metrics and tags are kept until ``flush()`` or
    ``end()`` (or the next artifact call) and then sent in as few batches as possible.
    """

    def __init__(
        self,
        client: MlflowClient,
        run_id: str,
        experiment_id: str | None = None,
        *,
        deferred: bool = False,
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id or client.get_run(run_id).info.experiment_id
        self.tracking_uri = client.tracking_uri
        self.deferred = deferred
        self._logged_params: dict[str, str] = {}
        self._pending_metrics: list[Any] = []
        self._pending_params: list[Any] = []
        self._pending_tags: dict[str, str] = {}
        self.model_digests: dict[str, str] | None = None

    # -- values, in batches ---------------------------------------------------------------
    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        fresh = {}
        for key, value in params.items():
            if key in self._logged_params:  # MLflow params are write-once: keep the first
                continue
            fresh[key] = _param_value(value)
        self._logged_params.update(fresh)
        self._pending_params += [Param(k, v) for k, v in fresh.items()]
        if not self.deferred:
            self.flush()

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending_metrics += [
            Metric(key, float(value), now, step)
            for key, value in metrics.items()
            if value is not None and value == value  # skip NaN
        ]
        if not self.deferred:
            self.flush()

    def set_tags(self, tags: dict[str, Any]) -> None:
        self._pending_tags.update(
            {k: str(v)[:MAX_TAG_CHARS] for k, v in tags.items() if v is not None}
        )
        if not self.deferred:
            self.flush()

    @_unreachable_as_tracking_error
    def flush(self) -> None:
        """Send whatever is pending in as few ``log_batch`` calls as MLflow allows."""
        if not (self._pending_metrics or self._pending_params or self._pending_tags):
            return
        from mlflow.entities import RunTag

        tags = [RunTag(k, v) for k, v in self._pending_tags.items()]
        metrics, params = self._pending_metrics, self._pending_params
        self._pending_metrics, self._pending_params, self._pending_tags = [], [], {}
        for m, p, t in batches(metrics, params, tags):
            self.client.log_batch(self.run_id, metrics=m, params=p, tags=t)

    # -- artifacts ------------------------------------------------------------------------
    @_unreachable_as_tracking_error
    def log_text(self, text: str, artifact_file: str) -> None:
        self.flush()
        self.client.log_text(self.run_id, text, artifact_file)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.log_text(json.dumps(data, indent=2, default=str, ensure_ascii=False), artifact_file)

    @_unreachable_as_tracking_error
    def log_file(self, local_path: str | Path, artifact_dir: str | None = None) -> None:
        self.flush()
        self.client.log_artifact(self.run_id, str(local_path), artifact_dir)

    @_unreachable_as_tracking_error
    def log_figure(self, figure: Any, artifact_file: str) -> None:
        self.flush()
        self.client.log_figure(self.run_id, figure, artifact_file)

    @_unreachable_as_tracking_error
    def log_input(
        self,
        *,
        name: str,
        source: str,
        digest: str,
        rows: int,
        columns: list[tuple[str, str]],
        targets: str | None = None,
    ) -> None:
        """Record the training data set (``mlflow.log_input``) from what the pipeline knows.

        ``columns`` are (name, MLflow type) pairs. Building the entity directly avoids
        ``mlflow.data.from_pandas``, which infers a schema value by value (seconds on a
        large frame) and would count only the sample it was given.
        """
        from mlflow.entities import Dataset, DatasetInput, InputTag

        self.flush()
        schema = {
            "mlflow_colspec": [
                {"type": kind, "name": col, "required": True} for col, kind in columns
            ]
        }
        profile = {"num_rows": rows, "num_elements": rows * len(columns)}
        dataset = Dataset(
            name=name,
            digest=digest[:8],
            source_type="local",
            source=json.dumps({"uri": source}),
            schema=json.dumps(schema),
            profile=json.dumps(profile),
        )
        tags = [InputTag(key="mlflow.data.context", value="training")]
        if targets:
            tags.append(InputTag(key="mlflow.data.targets", value=targets))
        self.client.log_inputs(self.run_id, datasets=[DatasetInput(dataset, tags)])

    @_unreachable_as_tracking_error
    def log_model(
        self, model: Any, *, signature: Any = None, input_example: Any = None
    ) -> str | None:
        """Log the whole scikit-learn Pipeline as ``name="model"``; returns ``models:/m-…``."""
        import logging

        import mlflow
        import mlflow.sklearn

        from mlpilot.platform.config import get_settings
        from mlpilot.tracking.packages import seed_mlflow
        from mlpilot.tracking.trust import record_digests

        self.flush()
        seed_mlflow(get_settings().home)  # saves MLflow a scan of every installed package
        # cloudpickle is deliberate: the Pipeline holds mlpilot's own transformers
        logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
        # log_model resolves the run through the process-wide URI: point it at our store
        mlflow.set_tracking_uri(self.tracking_uri)
        # ... and the LoggedModel goes to the active experiment: make it the run's own
        mlflow.set_experiment(experiment_id=self.experiment_id)
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            signature=signature,
            input_example=input_example,
            run_id=self.run_id,
            serialization_format="cloudpickle",
            # listing them saves MLflow's seconds-long inference in a subprocess
            pip_requirements=model_requirements(model),
        )
        # what every later load checks the files against (tracking/trust.py)
        self.model_digests = record_digests(self.client, info.model_uri, self.run_id)
        return info.model_uri

    # -- runs -----------------------------------------------------------------------------
    @_unreachable_as_tracking_error
    def child(
        self, name: str, tags: dict[str, str] | None = None, *, start_ms: int | None = None
    ) -> MlflowRunLogger:
        """A nested run under this one (``mlflow.parentRunId``), written when it ends."""
        run = self.client.create_run(
            self.experiment_id,
            start_time=start_ms,
            run_name=name,
            tags={"mlflow.parentRunId": self.run_id, **(tags or {})},
        )
        return MlflowRunLogger(self.client, run.info.run_id, self.experiment_id, deferred=True)

    @_unreachable_as_tracking_error
    def end(self, status: str = "FINISHED", *, end_ms: int | None = None) -> None:
        self.flush()
        self.client.set_terminated(self.run_id, status=status, end_time=end_ms)


def _components(model: Any, seen: set[int] | None = None) -> list[Any]:
    """``model`` and every estimator nested in it (pipeline steps, column transformers…)."""
    seen = seen if seen is not None else set()
    if id(model) in seen:
        return []
    seen.add(id(model))
    found = [model]
    nested: list[Any] = []
    for attr in ("steps", "transformers", "transformers_"):
        for item in getattr(model, attr, None) or []:
            if isinstance(item, tuple) and len(item) >= 2:
                nested.append(item[1])
    get_params = getattr(model, "get_params", None)
    if callable(get_params):
        try:
            nested += list(get_params(deep=False).values())
        except Exception as exc:  # an estimator whose parameters cannot be listed
            logger.debug("parameters of %s not listed: %s", type(model).__name__, exc)
    for value in nested:
        if hasattr(value, "fit") or hasattr(value, "transform"):
            found += _components(value, seen)
    return found


def _module_owners(fallback: Callable[[], Any]) -> Any:
    """Top-level module → distributions; MLflow's own cached map when it has one (it builds
    the same map while saving the model, so sharing it saves a scan of site-packages)."""
    try:
        from mlflow.utils import requirements_utils

        requirements_utils._init_modules_to_packages_map()
        owners = requirements_utils._MODULES_TO_PACKAGES
        if isinstance(owners, dict) and owners:
            return owners
    except Exception as exc:
        logger.debug("no module → distribution map; MLflow builds its own: %s", exc)
        pass
    return fallback()


def model_requirements(model: Any) -> list[str] | None:
    """Pinned pip requirements for loading ``model``: its estimators' packages, scikit-learn,
    cloudpickle, pandas, numpy, scipy and mlpilot. None (let MLflow infer) if unsure."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    try:
        modules = set(BASE_MODULES)
        modules.update(type(obj).__module__.split(".")[0] for obj in _components(model))
        owners = _module_owners(packages_distributions)
        requirements = {}
        for module in sorted(modules):
            if module in ("builtins", "__main__"):
                continue
            if module == "mlpilot":
                dists = ["mlpilot"]
            else:
                dists = owners.get(module) or []
                if not dists:
                    return None  # a module we cannot map: MLflow's inference knows better
            for dist in dists:
                try:
                    requirements[dist.lower()] = f"{dist}=={version(dist)}"
                except PackageNotFoundError:
                    if dist == "mlpilot":
                        continue
                    return None
        return sorted(requirements.values())
    except Exception as exc:
        logger.debug("no pinned requirements; MLflow infers them: %s", exc)
        return None
