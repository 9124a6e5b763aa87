"""MLflow tracing of the planner's LLM calls (``mlflow.openai.autolog``), never fatal.

MLflow is imported here, inside ``plan()``, never when the planner module is imported:
the CLI must start fast. Tracing is a record, not a requirement: any failure (optional
dependency missing, store unreachable) is reported in the transcript and planning goes on.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

logger = logging.getLogger(__name__)

_URI_VARIABLE = "MLFLOW_TRACKING_URI"
_autologged = False  # autolog patches the openai client class: once per process


def enable_tracing(settings: Settings, experiment: str) -> dict[str, Any]:
    """Send traces of ``openai`` calls to ``experiment`` in the configured store.

    Only what autolog needs is set globally: MLflow's tracking URI (the span exporter is
    built from it) and the trace destination. ``mlflow.set_tracking_uri`` also exports
    ``MLFLOW_TRACKING_URI`` to the environment; that is undone, because a later
    ``Settings.from_env()`` in the same process (chat, dashboard) would read it as a user
    setting and lose the embedded store's artifact root. The experiment is created the way
    the orchestrator creates it, and no active experiment or run is set.
    """
    global _autologged
    try:
        import mlflow
        import mlflow.openai

        from mlpilot.tracking.mlflow_store import ensure_experiment, make_client

        client = make_client(settings)  # also quiets MLflow's INFO chatter on the CLI
        experiment_id = ensure_experiment(client, experiment, settings.artifact_root)
        previous = os.environ.get(_URI_VARIABLE)
        try:
            mlflow.set_tracking_uri(settings.tracking_uri)
            mlflow.tracing.set_destination(experiment_destination(experiment_id))
        finally:
            if previous is None:
                os.environ.pop(_URI_VARIABLE, None)
            else:
                os.environ[_URI_VARIABLE] = previous
        if not _autologged:
            mlflow.openai.autolog(silent=True)
            _autologged = True
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        return {"enabled": True, "experiment_id": experiment_id}
    except Exception as exc:  # any failure only costs the traces, never the plan
        logger.warning("LLM calls are not traced: %s", exc)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"enabled": False, "error": f"{type(exc).__name__}: {first}"[:300]}


def experiment_destination(experiment_id: str) -> Any:
    """A trace destination for ``experiment_id`` that this MLflow's ``set_destination`` takes.

    MLflow 3.5 moved destinations to ``TraceLocationBase`` subclasses; 3.1 to 3.4 already
    have ``MlflowExperimentLocation`` but refuse it there and want the older
    ``MlflowExperiment``, which 3.5 and later still take, with a deprecation warning.
    So the choice follows the API, not whether an import succeeds.
    """
    from mlflow.entities import trace_location

    if hasattr(trace_location, "TraceLocationBase"):
        return trace_location.MlflowExperimentLocation(experiment_id=experiment_id)
    from mlflow.tracing.destination import MlflowExperiment

    logger.debug("MLflow before 3.5: tracing to MlflowExperiment(%s)", experiment_id)
    return MlflowExperiment(experiment_id=experiment_id)
