"""The orchestrator: one request through the states of DESIGN §2, recorded in both stores.

RECEIVED → PLANNING → VALIDATING → GENERATING → RUNNING → RECORDING → SUCCEEDED | FAILED |
CANCELLED. Once planned, a request that runs a pipeline goes through three steps, on one
path whatever the engine:

- ``prepare`` (``preparing.py``, pure): validate the plan once, choose the engine, render
  ``pipeline.py``;
- ``launch`` (``launching.py``): start the pipeline. When it can, the orchestrator launches
  before the MLflow run exists and hands the run id over afterwards (early start); else it
  launches once the run exists. Early start decides only *when* ``launch`` happens;
- ``record`` (``recording.py``): the pipeline's result into both stores.

The store, MLflow and the executor are given to the orchestrator (``services.py``), so it
runs in-process against fakes. Whatever goes wrong after the run exists, the run ends
FAILED (or CANCELLED) in both stores with the reason — never left RUNNING.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from mlpilot.platform.agent import launching
from mlpilot.platform.agent.preparing import Planned, PreparedRun, prepare
from mlpilot.platform.agent.recording import record_result, remember_outcome
from mlpilot.platform.agent.request import (
    ANSWERED,
    RunFailed,
    RunOutcome,
    RunRequest,
    failure_of,
)
from mlpilot.platform.agent.services import (
    Leg,
    MlflowTracking,
    PipelineExecutor,
    Progress,
    RunLogger,
    RunStore,
    SilentProgress,
    Tracking,
)
from mlpilot.platform.agent.sessions import Session, load_session, save_session
from mlpilot.platform.agent.tracked_run import ERROR_TAG_CHARS, TrackedRun, end_unrecorded
from mlpilot.platform.config import Settings, get_settings
from mlpilot.platform.config.interrupts import shielded
from mlpilot.platform.errors import MlpilotError, TrackingError, UnplacedRequestError
from mlpilot.platform.ml.protocol import SCRIPT_FILE
from mlpilot.platform.plan import Plan
from mlpilot.tracking import space, vocab
from mlpilot.tracking.metadata import SCHEMA_DOC_COLUMNS, new_event, utcnow
from mlpilot.tracking.owner import current_owner
from mlpilot.tracking.vocab import RunState

if TYPE_CHECKING:
    from mlpilot.platform.execution import LegResult

__all__ = ["Orchestrator", "Progress", "RunOutcome", "RunRequest", "SilentProgress", "run_request"]

logger = logging.getLogger(__name__)

PROMPT_TAG_CHARS = 500
_MESSAGES = {
    RunState.VALIDATING: "checking the plan against the tools and the data",
    RunState.GENERATING: "rendering pipeline.py from templates",
}


def run_request(
    request: RunRequest, *, progress: Progress | None = None, settings: Settings | None = None
) -> RunOutcome:
    """``request`` through the configured stores, MLflow and executor."""
    return Orchestrator.default(settings or get_settings(), progress=progress).run(request)


class Orchestrator:
    def __init__(
        self,
        settings: Settings,
        *,
        store: RunStore,
        tracking: Tracking,
        executor: PipelineExecutor,
        progress: Progress | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.tracking = tracking
        self.executor = executor
        self.progress = progress or SilentProgress()

    @classmethod
    def default(cls, settings: Settings, *, progress: Progress | None = None) -> Orchestrator:
        """The real services: the configured metadata store, MLflow and executor."""
        from mlpilot.platform.execution import Executor
        from mlpilot.tracking.metadata import open_store

        return cls(
            settings,
            store=open_store(settings),
            tracking=MlflowTracking(settings),
            executor=Executor(settings),
            progress=progress,
        )

    # -- the request ------------------------------------------------------------------------
    def run(self, request: RunRequest) -> RunOutcome:
        from mlpilot.platform.agent.planning import plan_request
        from mlpilot.platform.tools import default_registry

        session = load_session(self.store, request.session_id)
        session.add("user", request.prompt)
        experiment = (
            request.experiment or session.context.get("experiment") or self.settings.experiment
        )
        events: list[dict[str, Any]] = []
        try:
            # shielded from the first line the user sees: a signal from then on cancels a
            # run that gets recorded, never one that vanishes (planning may call an LLM)
            with shielded():
                events.append(new_event(RunState.RECEIVED.value, "request received"))
                self.progress.state(RunState.RECEIVED.value)
                events.append(new_event(RunState.PLANNING.value, "profiling the data and planning"))
                self.progress.state(RunState.PLANNING.value)
                registry = default_registry(request.plugins)
                result, profile = plan_request(
                    self.settings,
                    request.prompt,
                    data_path=request.data_path,
                    target=request.target,
                    template=request.template,
                    template_params=request.template_params,
                    context=session.context,
                    registry=registry,
                    experiment=experiment,
                    plan_file=request.plan_file,
                    adapter=request.adapter,
                )
            if result.source:  # a --plan file: the prompt it carries, its path and digest
                from mlpilot.platform.agent.planning import provenance_tags

                request.prompt = request.prompt or result.source.get("prompt", "")
                request.tags.update(provenance_tags(result.source))
        except UnplacedRequestError as exc:
            if request.ask_back:
                return self._ask_back(session, experiment, exc)
            return self._end_without_plan(session, request, experiment, events, exc)
        except MlpilotError as exc:
            return self._end_without_plan(session, request, experiment, events, exc)
        except KeyboardInterrupt as exc:  # cancelled while planning: recorded all the same
            return self._end_without_plan(session, request, experiment, events, exc)
        plan = result.plan
        if len(plan.steps) == 1 and registry.get(plan.steps[0].tool).kind == "query":
            return self._answer(session, plan, registry, profile, experiment, result.planner)
        planned = Planned(request, result, profile, experiment, registry)
        return self._execute(planned, session, events)

    # -- the three steps ----------------------------------------------------------------------
    def prepare(self, planned: Planned) -> PreparedRun:
        """VALIDATING, GENERATING: pure (see ``preparing.prepare``)."""
        return prepare(planned, self.settings)

    def launch(self, prepared: PreparedRun, run: TrackedRun | None = None) -> Leg:
        """RUNNING: start the pipeline in ``run``'s folder, or (``None``) before its run exists."""
        return launching.launch(
            prepared, run, executor=self.executor, runs_dir=self.settings.runs_dir
        )

    def record(self, run: TrackedRun, leg: LegResult) -> None:
        """RECORDING: the pipeline's result into both stores; a failed pipeline fails the run."""
        run.transition(RunState.RECORDING, "recording results")
        record_result(leg, run.tracker, self.store, run.outcome, run.run_id)
        if leg.child.cancelled:  # a signal, `mlpilot runs cancel` or the dashboard stopped it
            raise KeyboardInterrupt
        if not leg.ok:
            raise RunFailed(leg.failure())

    # -- one path through a run ---------------------------------------------------------------
    def _execute(
        self, planned: Planned, session: Session, events: list[dict[str, Any]]
    ) -> RunOutcome:
        early: Leg | None = None
        try:
            space.keep_reserve(self.settings.private_dir)  # room to record its end on a full disk
            prepared = self.prepare(planned)
            for state in prepared.reached:
                events.append(new_event(state.value, _MESSAGES[state]))
                self.progress.state(state.value, _MESSAGES[state])
            early = self._launch_early(prepared, events)
            run = self._open_run(prepared, session, events, early)
        except KeyboardInterrupt as exc:  # before the run existed: record it cancelled
            if early is not None:
                early.abandon()
            request = planned.request
            return self._end_without_plan(session, request, planned.experiment, events, exc)
        except Exception as exc:  # no run to record it on (``_open_run`` ended what it began)
            reason = self._no_space(exc, RunState(events[-1]["state"]))
            if reason is exc:
                raise
            raise reason from None
        outcome = run.outcome
        try:
            self.record(run, self._run_pipeline(run, prepared, early))
            final = RunState.SUCCEEDED
        except KeyboardInterrupt as exc:
            outcome.error, final = failure_of(exc, run.state), RunState.CANCELLED
        except Exception as exc:  # the run exists: whatever it was, it ends FAILED
            exc = self._no_space(exc, run.state)
            if not isinstance(exc, MlpilotError):
                logger.warning("internal error in run %s", run.run_id, exc_info=True)
            outcome.error, final = failure_of(exc, run.state), RunState.FAILED
        with shielded(deliver=False):  # the final record is written whole
            self._end(run, final)
            try:
                remember_outcome(session, outcome, prepared.profile, prepared.plan, self.store)
                self.store.flush()
            except Exception as exc:  # the run is recorded; only the conversation lacks it
                logger.debug("session %s not saved: %s", session.id, exc)
        return outcome

    def _no_space(self, exc: Exception, stage: RunState) -> Exception:
        """A write that failed for want of space, as one line; and the space reserve given
        back, so that the run's end can still be written to both stores."""
        home = self.settings.home
        if not space.out_of_space(exc, home):
            return exc
        left = space.space_left(home)  # before the reserve's room is given back
        space.release_reserve(self.settings.private_dir)
        return TrackingError(
            f"no space left on the device of {home} ({left}) "
            f"while {stage.value.lower()}: {_first_line(exc)}",
            hint="free some space and run it again",
        )

    def _end(self, run: TrackedRun, final: RunState) -> None:
        """The terminal state into both stores. On a full disk the space reserve makes room
        once; a run that still cannot be ended is reported, and left to doctor --repair."""
        try:
            run.finish(final)
            return
        except Exception as exc:
            logger.debug("ending run %s failed: %s", run.run_id, exc)
            first = exc
            retry = space.out_of_space(exc, self.settings.home) and space.release_reserve(
                self.settings.private_dir
            )
        if retry:
            try:
                run.finish(final)
                return
            except Exception as exc:
                logger.debug("ending run %s failed again: %s", run.run_id, exc)
                first = exc
        logger.debug("run %s could not be ended", run.run_id, exc_info=first)
        error = dict(run.outcome.error or failure_of(first, run.state))
        error["message"] = (
            f"{error.get('message') or 'the run failed'}; its end could not be recorded "
            f"({_first_line(first)}): run mlpilot doctor --repair once the stores can be written"
        )
        run.outcome.error, run.outcome.status = error, final.value

    def _launch_early(self, prepared: PreparedRun, events: list[dict[str, Any]]) -> Leg | None:
        """Launch before the MLflow run exists, when the run can start at once; else None
        (the pipeline then launches once the run exists, where a failure is recorded)."""
        if not prepared.can_start_early:
            return None
        try:
            leg = self.launch(prepared)
        except Exception as exc:
            logger.debug("no early start (%s): the pipeline starts once its run exists", exc)
            return None
        try:
            message = _engine_message(prepared)
            events.append(new_event(RunState.RUNNING.value, message))
            self.progress.state(RunState.RUNNING.value, message)
        except BaseException:
            leg.abandon()
            raise
        return leg

    def _open_run(
        self,
        prepared: PreparedRun,
        session: Session,
        events: list[dict[str, Any]],
        early: Leg | None,
    ) -> TrackedRun:
        """The MLflow parent run and the MongoDB document, at the state reached so far."""
        state = RunState(events[-1]["state"])
        tags = self._parent_tags(session, prepared.request, prepared.planner, prepared.plan, state)
        if prepared.fingerprint:
            tags[vocab.TAG_FINGERPRINT] = prepared.fingerprint
        try:
            tracker = self.tracking.create_run(
                prepared.experiment, f"{prepared.plan.template}-{session.id[:6]}", tags
            )
        except BaseException:
            if early is not None:
                early.abandon()  # no run refers to its folder
            raise
        try:
            return self._create_document(prepared, session, events, early, tracker, state)
        except BaseException as exc:  # the MLflow run exists: never leave it RUNNING
            if early is not None:
                early.stop()
            end_unrecorded(tracker, exc)
            raise

    def _create_document(
        self,
        prepared: PreparedRun,
        session: Session,
        events: list[dict[str, Any]],
        early: Leg | None,
        tracker: RunLogger,
        state: RunState,
    ) -> TrackedRun:
        run_id = tracker.run_id
        if early is not None:
            run_dir = launching.link_run_dir(early.run_dir, run_id)
        else:
            run_dir = launching.make_run_dir(self.settings.runs_dir / run_id)
        outcome = RunOutcome(
            status=RunState.RUNNING.value,
            session_id=session.id,
            run_id=run_id,
            experiment=prepared.experiment,
            experiment_id=tracker.experiment_id,
            tracking_uri=self.tracking.tracking_uri,
            plan=prepared.plan.to_dict(),
            planner=prepared.planner,
            run_dir=str(run_dir),
            notes=list(prepared.notes),
        )
        document: dict[str, Any] = {
            "session_id": session.id,
            "experiment": prepared.experiment,
            "experiment_id": tracker.experiment_id,
            "prompt": prepared.request.prompt,
            "planner": prepared.planner,
            "plan": prepared.plan.to_dict(),
            "status": state.value,
            "dataset": _dataset(prepared.profile),
            "run_dir": str(run_dir),
            "created_at": events[0]["at"],
            "owner": current_owner(),  # who may be asked to cancel it, or found gone
        }
        if early is not None and prepared.engine is not None:
            document["engine"] = prepared.engine.to_dict()
        self.store.create_run(run_id, document, events)
        return TrackedRun(
            tracker=tracker,
            store=self.store,
            progress=self.progress,
            outcome=outcome,
            run_dir=run_dir,
            state=state,
        )

    def _run_pipeline(self, run: TrackedRun, prepared: PreparedRun, early: Leg | None) -> LegResult:
        """The pipeline to its end: the one launched early, or launched now."""
        leg = early
        try:
            if leg is not None:
                leg.hand_over_run(run.run_id)  # first: the pipeline waits for it to log
            self._log_request(run.tracker, prepared)
            if prepared.failure:
                raise RunFailed(prepared.failure)
            engine = prepared.engine
            if engine is None:
                raise MlpilotError("no engine was chosen for the pipeline")
            run.outcome.engine = engine.to_dict()
            run.outcome.pipeline_path = str(run.run_dir / SCRIPT_FILE)
            if leg is None:
                run.transition(RunState.RUNNING, _engine_message(prepared), engine=engine.to_dict())
                leg = self.launch(prepared, run)
            self._log_launch(run, prepared)
        except BaseException:
            if leg is not None:
                leg.stop()  # the run exists and keeps its folder
            raise
        return leg.finish(on_event=run.on_event)

    # -- MLflow ---------------------------------------------------------------------------------
    def _parent_tags(
        self,
        session: Session,
        request: RunRequest,
        planner: str,
        plan: Plan | None,
        state: RunState,
    ) -> dict[str, str]:
        from mlpilot.tracking.mlflow_store import mlpilot_version

        return {
            vocab.TAG_KIND: vocab.KIND_AGENT_RUN,
            vocab.TAG_SESSION: session.id,
            vocab.TAG_PROMPT: request.prompt[:PROMPT_TAG_CHARS],
            vocab.TAG_PLANNER: planner,
            vocab.TAG_TEMPLATE: plan.template if plan else "none",
            vocab.TAG_VERSION: mlpilot_version(),
            vocab.TAG_STATE: state.value,
            **request.tags,  # e.g. a saved plan's file and digest
        }

    def _log_request(self, tracker: RunLogger, prepared: PreparedRun) -> None:
        tracker.log_text(prepared.request.prompt, "prompt.txt")
        tracker.log_dict(prepared.plan.to_dict(), "plan.json")
        if prepared.profile is not None:
            tracker.log_dict(prepared.profile.to_dict(), "data/profile.json")
        if prepared.transcript:
            tracker.log_dict(prepared.transcript, "llm/transcript.json")

    def _log_launch(self, run: TrackedRun, prepared: PreparedRun) -> None:
        from mlpilot.tracking.mlflow_store import engine_tags

        # the text the parent generated, not the run folder's file (never trusted)
        run.tracker.log_text(prepared.source or "", SCRIPT_FILE)
        if prepared.engine is not None:
            choice = prepared.engine
            run.tracker.set_tags(engine_tags(choice.requested, choice.used, choice.reason))

    # -- requests that run no pipeline ---------------------------------------------------------
    def _end_without_plan(
        self,
        session: Session,
        request: RunRequest,
        experiment: str,
        events: list[dict[str, Any]],
        exc: BaseException,
    ) -> RunOutcome:
        """Bad input, or a cancel, before a run with a plan existed: record a FAILED (or
        CANCELLED) run with the reason, then report it."""
        final = RunState.CANCELLED if isinstance(exc, KeyboardInterrupt) else RunState.FAILED
        stage = RunState(events[-1]["state"]) if events else RunState.PLANNING
        error = failure_of(exc, stage)
        # an LLM planner that gave up leaves its conversation on the error: keep it, it
        # is what explains the failure
        transcript = getattr(exc, "transcript", None)
        planner = str(transcript.get("planner", "none")) if transcript else "none"
        tags = self._parent_tags(session, request, planner, None, RunState.RECEIVED)
        try:
            tracker = self.tracking.create_run(experiment, f"failed-{session.id[:6]}", tags)
        except MlpilotError as down:
            logger.debug("tracking is unavailable too (%s): reporting the planning error", down)
            raise exc from None  # the input error (or the cancel) is the one to report
        tracker.log_text(request.prompt, "prompt.txt")
        if transcript:
            tracker.log_dict(transcript, "llm/transcript.json")
        tracker.set_tags(
            {
                vocab.TAG_STATE: final.value,
                vocab.TAG_ERROR: error["message"][:ERROR_TAG_CHARS],
                vocab.TAG_ERROR_STAGE: error["stage"],
            }
        )
        tracker.end(final.mlflow_status)
        events.append(new_event(final.value, error["message"]))
        document = {
            "session_id": session.id,
            "experiment": experiment,
            "prompt": request.prompt,
            "planner": None if planner == "none" else planner,
            "plan": None,
            "status": final.value,
            "error": error,
            "dataset": {"path": request.data_path},
            "created_at": utcnow(),
        }
        self.store.create_run(tracker.run_id, document, events)
        session.add("assistant", f"{final.value.lower()}: {error['message']}", tracker.run_id)
        save_session(self.store, session)
        self.store.flush()
        self.progress.state(final.value, error["message"])
        return RunOutcome(
            status=final.value,
            session_id=session.id,
            run_id=tracker.run_id,
            experiment=experiment,
            experiment_id=tracker.experiment_id,
            tracking_uri=self.tracking.tracking_uri,
            error=error,
        )

    def _ask_back(self, session: Session, experiment: str, exc: MlpilotError) -> RunOutcome:
        """A question back instead of a run: nothing is planned, trained or recorded."""
        hint = exc.hint or "say which column to predict, or ask about your runs"
        question = f"I could not place that. Do you want to {hint.removeprefix('ask to ')}?"
        session.add("assistant", question)
        save_session(self.store, session)
        return RunOutcome(
            status=ANSWERED,
            session_id=session.id,
            answer={"question": question, "reason": exc.message},
            experiment=experiment,
        )

    def _answer(
        self,
        session: Session,
        plan: Plan,
        registry: Any,
        profile: Any,
        experiment: str,
        planner: str,
    ) -> RunOutcome:
        from mlpilot.platform.tools.queries import QueryContext

        step = plan.steps[0]
        context = QueryContext(
            settings=self.settings,
            store=self.store,
            profile=profile,
            experiment=experiment,
            session_runs=session.context.get("runs"),  # "best", "last": this session's runs
        )
        answer = registry.get(step.tool)(context, **step.args)
        reply = json.dumps({"tool": step.tool, "answer": answer}, default=str, ensure_ascii=False)
        session.add("assistant", reply[:4000])
        save_session(self.store, session)
        return RunOutcome(
            status=ANSWERED,
            session_id=session.id,
            plan=plan.to_dict(),
            planner=planner,
            answer=answer,
            experiment=experiment,
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:160]


def _engine_message(prepared: PreparedRun) -> str:
    choice = prepared.engine
    return f"engine {choice.used} ({choice.reason})" if choice else ""


def _dataset(profile: Any) -> dict[str, Any] | None:
    if profile is None:
        return None
    shown = profile.columns[:SCHEMA_DOC_COLUMNS]  # all of them are in data/profile.json
    return {
        "path": profile.path,
        "fingerprint": profile.fingerprint,
        "rows": profile.rows,
        "cols": len(profile.columns),
        "schema": [{"name": c.name[:200], "kind": c.kind} for c in shown],
        **({"schema_truncated": True} if len(shown) < len(profile.columns) else {}),
    }
