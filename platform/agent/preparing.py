"""VALIDATING and GENERATING, before anything runs: a planned request becomes a
``PreparedRun`` — the validated plan, the engine that will run it and the source of its
``pipeline.py``.

``prepare`` is pure: it validates the plan once (into a new plan, the planner's is left
as it was), writes no file and touches no store. A plan that fails is prepared too, with
its failure, so that the run can be created and the failure recorded at its own stage.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mlpilot.platform.agent.request import RunRequest, failure_of
from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.plan import Plan
from mlpilot.platform.plan.paths import PathPolicy
from mlpilot.tracking.vocab import RunState

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution import EngineChoice
    from mlpilot.platform.llm import PlanResult
    from mlpilot.platform.ml.profile import DataProfile
    from mlpilot.platform.tools import ToolRegistry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planned:
    """What planning produced for a request that runs a pipeline."""

    request: RunRequest
    result: PlanResult
    profile: DataProfile | None
    experiment: str
    registry: ToolRegistry


@dataclass(frozen=True)
class PreparedRun:
    request: RunRequest
    plan: Plan  # validated; the planner's own when validation failed
    planner: str
    profile: DataProfile | None
    experiment: str
    transcript: dict[str, Any] | None
    notes: tuple[str, ...] = ()
    engine: EngineChoice | None = None
    source: str | None = None  # pipeline.py
    failure: dict[str, Any] | None = None  # {type, message, stage}, recorded once the run exists
    reached: tuple[RunState, ...] = (RunState.VALIDATING,)

    @property
    def data_path(self) -> str | None:
        return self.profile.path if self.profile else None

    @property
    def fingerprint(self) -> str | None:
        return self.profile.fingerprint if self.profile else None

    @property
    def state(self) -> RunState:
        """The last state preparing reached (the one a failure happened in)."""
        return self.reached[-1]

    @property
    def can_start_early(self) -> bool:
        """One engine, nothing wrong: the pipeline may start before its MLflow run exists
        (an engine comparison's legs log into runs that must exist first)."""
        return self.failure is None and self.engine is not None and self.engine.used != "compare"


_REACHED_GENERATING = (RunState.VALIDATING, RunState.GENERATING)


def path_policy(request: RunRequest, profile: DataProfile | None) -> PathPolicy:
    """What the plan may read: the user's data file, and the folders they allowed.

    The data file is the one given with ``--data`` (or carried by the session, planned
    on); a saved plan's own data path counts only when ``--data`` or ``--allow-read``
    confirms it.
    """
    data_file = request.data_path
    if data_file is None and profile is not None and not request.plan_file:
        data_file = profile.path
    return PathPolicy(
        data_file=data_file,
        read_folders=tuple(request.allow_read),
        saved_plan=bool(request.plan_file),
    )


def prepare(planned: Planned, settings: Settings) -> PreparedRun:
    """Validate the plan (once), choose the engine and render ``pipeline.py``."""
    from mlpilot.platform.plan import validate_plan

    result, request = planned.result, planned.request
    base = PreparedRun(
        request=request,
        plan=result.plan,
        planner=result.planner,
        profile=planned.profile,
        experiment=planned.experiment,
        transcript=result.transcript,
        notes=tuple(result.notes),
    )
    try:
        validated = validate_plan(
            result.plan,
            planned.registry,
            planned.profile,
            check_files=True,
            policy=path_policy(request, planned.profile),
        )
    except Exception as exc:  # recorded on the run, at VALIDATING
        _log_failure(exc, RunState.VALIDATING)
        return replace(base, failure=failure_of(exc, RunState.VALIDATING))
    notes = base.notes + tuple(n for n in validated.notes if n not in base.notes)
    base = replace(base, plan=validated.plan, notes=notes)
    try:
        engine = _choose_engine(request, validated.plan, settings)
        source = _render(validated.plan, planned, request.prompt)
    except Exception as exc:  # recorded on the run, at GENERATING
        _log_failure(exc, RunState.GENERATING)
        failure = failure_of(exc, RunState.GENERATING)
        return replace(base, failure=failure, reached=_REACHED_GENERATING)
    return replace(base, engine=engine, source=source, reached=_REACHED_GENERATING)


def _log_failure(exc: Exception, stage: RunState) -> None:
    if isinstance(exc, MlpilotError):  # the user's to fix: the run records it
        logger.debug("preparing failed at %s: %s", stage.value, exc)
    else:
        logger.warning("internal error while %s", stage.value, exc_info=True)


def engine_request(request: RunRequest, plan: Plan, settings: Settings) -> str:
    """The engine asked for: the request's (``--engine``), else the plan's, else the setting."""
    if request.engine:
        return request.engine
    if plan.engine != "auto":
        return plan.engine
    return settings.engine


def _choose_engine(request: RunRequest, plan: Plan, settings: Settings) -> EngineChoice:
    from mlpilot.platform.execution import resolve_engine

    return resolve_engine(engine_request(request, plan, settings))


def _render(plan: Plan, planned: Planned, prompt: str) -> str:
    """The script, logging a hand re-run to the run's own experiment."""
    from mlpilot.platform.codegen import render_pipeline
    from mlpilot.tracking.mlflow_store import mlpilot_version

    return render_pipeline(
        plan,
        planned.registry,
        data_path=planned.profile.path if planned.profile else None,
        prompt=prompt,
        version=mlpilot_version(),
        experiment=planned.experiment,
    )
