"""The orchestrator: one request through the states of DESIGN §2, recorded in both stores.

RECEIVED → PLANNING → VALIDATING → GENERATING → RUNNING → RECORDING → SUCCEEDED | FAILED |
CANCELLED. Every transition is an event in the MongoDB run document (and a tag in MLflow);
whatever goes wrong after the run exists, the run ends FAILED (or CANCELLED) in both stores
with the reason — never left RUNNING.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mlpilot.platform.agent.early_start import EarlyStart, link_run_dir, new_run_dir
from mlpilot.platform.agent.recording import record_result, remember_outcome
from mlpilot.platform.agent.sessions import Session, load_session, save_session
from mlpilot.platform.config import Settings, get_settings
from mlpilot.platform.errors import MlpilotError, describe_error
from mlpilot.platform.plan import Plan

TERMINAL_MLFLOW = {"SUCCEEDED": "FINISHED", "FAILED": "FAILED", "CANCELLED": "KILLED"}
PROMPT_TAG_CHARS = 500


class Progress(Protocol):
    def state(self, state: str, message: str = "") -> None: ...
    def event(self, event: dict[str, Any]) -> None: ...


class SilentProgress:
    def state(self, state: str, message: str = "") -> None:
        pass

    def event(self, event: dict[str, Any]) -> None:
        pass


@dataclass
class RunRequest:
    prompt: str
    data_path: str | None = None
    target: str | None = None
    engine: str | None = None
    experiment: str | None = None
    template: str | None = None
    template_params: dict[str, Any] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    session_id: str | None = None
    plan_file: str | None = None
    adapter: str | None = None  # --adapter NAME or "none"
    tags: dict[str, str] = field(default_factory=dict)  # extra parent-run tags


@dataclass
class RunOutcome:
    status: str  # SUCCEEDED, FAILED, CANCELLED, or ANSWERED for a query
    session_id: str
    run_id: str | None = None
    experiment: str | None = None
    experiment_id: str | None = None
    tracking_uri: str | None = None
    plan: dict[str, Any] | None = None
    planner: str | None = None
    engine: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    run_dir: str | None = None
    pipeline_path: str | None = None
    model_uri: str | None = None
    importance: list[dict[str, Any]] | None = None
    registered: dict[str, Any] | None = None
    predictions: dict[str, Any] | None = None
    study: dict[str, Any] | None = None
    answer: Any = None
    notes: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    main_metric: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RunFailed(MlpilotError):
    """Raised inside the orchestrator to end a run FAILED at a given stage."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", "the run failed"))
        self.error = error


def run_request(
    request: RunRequest, *, progress: Progress | None = None, settings: Settings | None = None
) -> RunOutcome:
    return Orchestrator(settings or get_settings(), progress=progress).run(request)


class Orchestrator:
    def __init__(self, settings: Settings, *, progress: Progress | None = None) -> None:
        self.settings = settings
        self.progress = progress or SilentProgress()

    # -- the request --------------------------------------------------------------------------
    def run(self, request: RunRequest) -> RunOutcome:
        from mlpilot.platform.agent.planning import plan_request
        from mlpilot.platform.tools import default_registry
        from mlpilot.tracking.metadata import new_event, open_store

        store = open_store(self.settings)
        session = load_session(store, request.session_id)
        session.add("user", request.prompt)
        experiment = (
            request.experiment or session.context.get("experiment") or self.settings.experiment
        )
        events = [new_event("RECEIVED", "request received")]
        self.progress.state("RECEIVED")
        registry = default_registry(request.plugins)
        events.append(new_event("PLANNING", "profiling the data and planning"))
        self.progress.state("PLANNING")
        try:
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
        except MlpilotError as exc:
            return self._fail_without_plan(store, session, request, experiment, events, exc)
        if result.source:  # a --plan file: the prompt it carries, its path and digest
            from mlpilot.platform.agent.planning import provenance_tags

            request.prompt = request.prompt or result.source.get("prompt", "")
            request.tags.update(provenance_tags(result.source))
        plan = result.plan
        if len(plan.steps) == 1 and registry.get(plan.steps[0].tool).kind == "query":
            return self._answer(store, session, plan, registry, profile, experiment, result.planner)
        return self._execute(store, session, request, experiment, events, result, profile, registry)

    # -- queries ----------------------------------------------------------------------------------
    def _answer(
        self,
        store: Any,
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
            store=store,
            profile=profile,
            experiment=experiment,
            session_runs=session.context.get("runs"),  # "best", "last": this session's runs
        )
        answer = registry.get(step.tool)(context, **step.args)
        session.add(
            "assistant",
            json.dumps({"tool": step.tool, "answer": answer}, default=str, ensure_ascii=False)[
                :4000
            ],
        )
        save_session(store, session)
        return RunOutcome(
            status="ANSWERED",
            session_id=session.id,
            plan=plan.to_dict(),
            planner=planner,
            answer=answer,
            experiment=experiment,
        )

    # -- runs -------------------------------------------------------------------------------------
    def _open_tracking(self, experiment: str) -> tuple[Any, str]:
        from mlpilot.tracking.mlflow_store import ensure_experiment, make_client

        client = make_client(self.settings)
        return client, ensure_experiment(client, experiment, self.settings.artifact_root)

    def _create_parent(
        self,
        client: Any,
        experiment_id: str,
        session: Session,
        request: RunRequest,
        planner: str,
        plan: Plan | None,
        fingerprint: str | None,
        state: str = "RECEIVED",
    ) -> Any:
        from mlpilot.tracking import mlflow_store as ms
        from mlpilot.tracking.run_logger import MlflowRunLogger

        tags = {
            ms.TAG_KIND: "agent_run",
            ms.TAG_SESSION: session.id,
            ms.TAG_PROMPT: request.prompt[:PROMPT_TAG_CHARS],
            ms.TAG_PLANNER: planner,
            ms.TAG_TEMPLATE: plan.template if plan else "none",
            ms.TAG_VERSION: ms.mlpilot_version(),
            ms.TAG_STATE: state,
        }
        if fingerprint:
            tags[ms.TAG_FINGERPRINT] = fingerprint
        tags.update(request.tags)
        name = (plan.template if plan else "failed") + "-" + session.id[:6]
        run = client.create_run(experiment_id, run_name=name, tags=tags)
        return MlflowRunLogger(client, run.info.run_id, experiment_id)

    def _fail_without_plan(
        self,
        store: Any,
        session: Session,
        request: RunRequest,
        experiment: str,
        events: list[dict[str, Any]],
        exc: MlpilotError,
    ) -> RunOutcome:
        """Bad input found while planning: record a FAILED run with the reason, then report it."""
        from mlpilot.tracking.metadata import new_event, utcnow

        error = exc.to_dict(stage="PLANNING")
        outcome = RunOutcome(
            status="FAILED", session_id=session.id, experiment=experiment, error=error
        )
        # an LLM planner that gave up leaves its conversation on the error: keep it, it
        # is what explains the failure
        transcript = getattr(exc, "transcript", None)
        planner = str(transcript.get("planner", "none")) if transcript else "none"
        try:
            client, experiment_id = self._open_tracking(experiment)
            logger = self._create_parent(
                client, experiment_id, session, request, planner, None, None
            )
        except MlpilotError:
            raise exc from None  # tracking is down too: the input error is the one to report
        logger.log_text(request.prompt, "prompt.txt")
        if transcript:
            logger.log_dict(transcript, "llm/transcript.json")
        logger.set_tags({"mlpilot.state": "FAILED", "mlpilot.error": error["message"][:500]})
        logger.end("FAILED")
        events.append(new_event("FAILED", error["message"]))
        store.create_run(
            logger.run_id,
            {
                "session_id": session.id,
                "experiment": experiment,
                "prompt": request.prompt,
                "planner": None if planner == "none" else planner,
                "plan": None,
                "status": "FAILED",
                "error": error,
                "dataset": {"path": request.data_path},
                "created_at": utcnow(),
            },
            events,
        )
        session.add("assistant", f"failed: {error['message']}", logger.run_id)
        save_session(store, session)
        store.flush()
        self.progress.state("FAILED", error["message"])
        outcome.run_id, outcome.experiment_id, outcome.tracking_uri = (
            logger.run_id,
            experiment_id,
            self.settings.tracking_uri,
        )
        return outcome

    def _execute(
        self,
        store: Any,
        session: Session,
        request: RunRequest,
        experiment: str,
        events: list[dict[str, Any]],
        result: Any,
        profile: Any,
        registry: Any,
    ) -> RunOutcome:
        from mlpilot.tracking.metadata import new_event, utcnow

        plan: Plan = result.plan
        # Start the pipeline before the MLflow run exists: it reads the data while MLflow
        # opens here. Anything that stops it from starting takes the slow path below,
        # which meets the same problem after the run exists and records it there.
        early = self._start_early(plan, registry, request, profile)
        try:
            client, experiment_id = self._open_tracking(experiment)
            logger = self._create_parent(
                client,
                experiment_id,
                session,
                request,
                result.planner,
                plan,
                profile.fingerprint if profile else None,
                state="RUNNING" if early else "PLANNING",
            )
        except BaseException:
            if early:
                early.leg.abandon()
            raise
        run_id = logger.run_id
        try:
            if early:
                run_dir = link_run_dir(early.leg.run_dir, run_id)
                events.extend(early.events)
            else:
                run_dir = self.settings.runs_dir / run_id
                run_dir.mkdir(parents=True, exist_ok=True)
            outcome = RunOutcome(
                status="RUNNING",
                session_id=session.id,
                run_id=run_id,
                experiment=experiment,
                experiment_id=experiment_id,
                tracking_uri=self.settings.tracking_uri,
                plan=plan.to_dict(),
                planner=result.planner,
                run_dir=str(run_dir),
                notes=list(result.notes),
            )
            dataset = None
            if profile is not None:
                dataset = {
                    "path": profile.path,
                    "fingerprint": profile.fingerprint,
                    "rows": profile.rows,
                    "cols": len(profile.columns),
                    "schema": [{"name": c.name, "kind": c.kind} for c in profile.columns],
                }
            state = "RUNNING" if early else "PLANNING"
            document: dict[str, Any] = {
                "session_id": session.id,
                "experiment": experiment,
                "experiment_id": experiment_id,
                "prompt": request.prompt,
                "planner": result.planner,
                "plan": plan.to_dict(),
                "status": state,
                "dataset": dataset,
                "run_dir": str(run_dir),
                "created_at": events[0]["at"],
            }
            if early:
                document["engine"] = early.choice.to_dict()
            store.create_run(run_id, document, events)
        except BaseException as exc:  # the run exists: never leave it RUNNING
            if early:
                early.leg.stop()
            with contextlib.suppress(Exception):
                cancelled = isinstance(exc, KeyboardInterrupt)
                final = "CANCELLED" if cancelled else "FAILED"
                logger.set_tags({"mlpilot.state": final, "mlpilot.error": str(exc)[:500]})
                logger.end(TERMINAL_MLFLOW[final])
            raise

        def transition(new_state: str, message: str = "", **fields: Any) -> None:
            nonlocal state
            state = new_state
            store.update_run(
                run_id, {"status": new_state, **fields}, [new_event(new_state, message)]
            )
            logger.set_tags({"mlpilot.state": new_state})
            self.progress.state(new_state, message)

        try:
            if early:
                leg = self._finish_early(
                    early, run_id, run_dir, request, plan, profile, result, logger, store, outcome
                )
            else:
                leg = self._validate_and_run(
                    run_id,
                    run_dir,
                    request,
                    plan,
                    profile,
                    result,
                    registry,
                    logger,
                    store,
                    transition,
                    outcome,
                )
            transition("RECORDING", "recording results")
            record_result(leg, logger, store, outcome, run_id)
            if not leg.ok:
                raise RunFailed(leg.failure())
            final = "SUCCEEDED"
        except KeyboardInterrupt:
            outcome.error = {
                "type": "Cancelled",
                "message": "cancelled by the user",
                "stage": state,
            }
            final = "CANCELLED"
        except RunFailed as exc:
            outcome.error = exc.error
            final = "FAILED"
        except MlpilotError as exc:
            outcome.error = exc.to_dict(stage=state)
            final = "FAILED"
        except Exception as exc:  # a bug: still never leave the run RUNNING
            outcome.error = {
                "type": type(exc).__name__,
                "message": f"internal error: {exc}",
                "stage": state,
            }
            final = "FAILED"
        outcome.status = final
        fields: dict[str, Any] = {"finished_at": utcnow()}
        if outcome.error:
            fields["error"] = outcome.error
            logger.set_tags(
                {
                    "mlpilot.error": describe_error(outcome.error)[:500],
                    "mlpilot.error.stage": str(outcome.error.get("stage") or ""),
                }
            )
        transition(final, describe_error(outcome.error) if outcome.error else "done", **fields)
        logger.end(TERMINAL_MLFLOW[final])
        remember_outcome(session, outcome, profile, plan, store)
        store.flush()
        return outcome

    def _log_request(
        self, logger: Any, request: RunRequest, plan: Plan, profile: Any, result: Any
    ) -> None:
        logger.log_text(request.prompt, "prompt.txt")
        logger.log_dict(plan.to_dict(), "plan.json")
        if profile is not None:
            logger.log_dict(profile.to_dict(), "data/profile.json")
        if result.transcript:
            logger.log_dict(result.transcript, "llm/transcript.json")

    def _validate_and_run(
        self,
        run_id: str,
        run_dir: Path,
        request: RunRequest,
        plan: Plan,
        profile: Any,
        result: Any,
        registry: Any,
        logger: Any,
        store: Any,
        transition: Any,
        outcome: RunOutcome,
    ) -> Any:
        """The path after the run exists: every failure is recorded at its own stage."""
        self._log_request(logger, request, plan, profile, result)
        transition("VALIDATING", "checking the plan against the tools and the data")
        from mlpilot.platform.plan import validate_plan

        validated = validate_plan(plan, registry, profile, check_files=True)
        outcome.notes.extend(n for n in validated.notes if n not in outcome.notes)
        engine_requested = self._engine_request(request, plan)
        transition("GENERATING", "rendering pipeline.py from templates")
        script = self._generate(plan, registry, request, profile, run_dir)
        outcome.pipeline_path = str(script)
        logger.log_file(script)
        return self._run(
            run_id,
            run_dir,
            script,
            engine_requested,
            profile,
            logger,
            store,
            transition,
            outcome,
        )

    def _start_early(
        self, plan: Plan, registry: Any, request: RunRequest, profile: Any
    ) -> EarlyStart | None:
        """Validate, render and start a one-engine pipeline before its run exists, or None."""
        from mlpilot.platform.execution import Executor, resolve_engine
        from mlpilot.platform.plan import validate_plan
        from mlpilot.tracking.metadata import new_event

        run_dir = None
        try:
            validated = validate_plan(plan, registry, profile, check_files=True)
            choice = resolve_engine(self._engine_request(request, plan))
            if choice.used == "compare":
                return None
            events = [
                new_event("VALIDATING", "checking the plan against the tools and the data"),
                new_event("GENERATING", "rendering pipeline.py from templates"),
            ]
            run_dir = new_run_dir(self.settings.runs_dir)
            script = self._generate(plan, registry, request, profile, run_dir)
            leg = Executor(self.settings).start_leg(
                script=script,
                run_dir=run_dir,
                engine=choice.used,
                data_path=profile.path if profile else None,
                mlflow_run_id=None,
            )
        except Exception:  # the slow path meets it again, with a run to record it on
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)
            return None
        try:
            events.append(new_event("RUNNING", f"engine {choice.used} ({choice.reason})"))
            for event in events:
                self.progress.state(event["state"], event["message"])
        except BaseException:
            leg.abandon()
            raise
        return EarlyStart(leg, choice, script, list(validated.notes), events)

    def _finish_early(
        self,
        early: EarlyStart,
        run_id: str,
        run_dir: Path,
        request: RunRequest,
        plan: Plan,
        profile: Any,
        result: Any,
        logger: Any,
        store: Any,
        outcome: RunOutcome,
    ) -> Any:
        from mlpilot.tracking.mlflow_store import engine_tags

        try:
            early.leg.hand_over_run(run_id)
            outcome.notes.extend(n for n in early.notes if n not in outcome.notes)
            outcome.engine = early.choice.to_dict()
            outcome.pipeline_path = str(run_dir / early.script.name)
            self._log_request(logger, request, plan, profile, result)
            logger.log_file(early.script)
            choice = early.choice
            logger.set_tags(engine_tags(choice.requested, choice.used, choice.reason))
        except BaseException:
            early.leg.stop()  # the run exists and keeps its folder
            raise
        return early.leg.finish(on_event=self._event_handler(run_id, store))

    def _engine_request(self, request: RunRequest, plan: Plan) -> str:
        if request.engine:
            return request.engine
        if plan.engine != "auto":
            return plan.engine
        return self.settings.engine

    def _generate(
        self, plan: Plan, registry: Any, request: RunRequest, profile: Any, run_dir: Path
    ) -> Path:
        from mlpilot.platform.codegen import render_pipeline
        from mlpilot.tracking.mlflow_store import mlpilot_version

        source = render_pipeline(
            plan,
            registry,
            data_path=profile.path if profile else None,
            prompt=request.prompt,
            version=mlpilot_version(),
        )
        script = run_dir / "pipeline.py"
        script.write_text(source, encoding="utf-8")
        return script

    def _run(
        self,
        run_id: str,
        run_dir: Path,
        script: Path,
        requested: str,
        profile: Any,
        logger: Any,
        store: Any,
        transition: Any,
        outcome: RunOutcome,
    ) -> Any:
        from mlpilot.platform.execution import Executor, resolve_engine

        choice = resolve_engine(requested)
        outcome.engine = choice.to_dict()
        from mlpilot.tracking.mlflow_store import engine_tags

        logger.set_tags(engine_tags(choice.requested, choice.used, choice.reason))
        executor = Executor(self.settings)
        data = profile.path if profile else None
        transition("RUNNING", f"engine {choice.used} ({choice.reason})", engine=choice.to_dict())
        on_event = self._event_handler(run_id, store)
        if choice.used != "compare":
            return executor.run_leg(
                script=script,
                run_dir=run_dir,
                engine=choice.used,
                data_path=data,
                mlflow_run_id=run_id,
                on_event=on_event,
            )
        from mlpilot.platform.agent.compare import run_comparison

        return run_comparison(
            executor,
            script=script,
            run_dir=run_dir,
            data_path=data,
            logger=logger,
            store=store,
            on_event=on_event,
            outcome=outcome,
            profile=profile,
        )

    def _event_handler(self, run_id: str, store: Any) -> Any:
        from mlpilot.tracking.metadata import new_event

        def handle(event: dict[str, Any]) -> None:
            self.progress.event(event)
            kind = event.get("type")
            if kind in ("stage_end", "pipeline_failed") or (
                kind == "trial" and int(event.get("number", 0)) % 10 == 9
            ):
                message = event.get("message") or _describe_event(event)
                store.update_run(
                    run_id,
                    {},
                    [
                        new_event(
                            "RUNNING", message, detail={k: v for k, v in event.items() if k != "at"}
                        )
                    ],
                )

        return handle


def _describe_event(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "stage_end":
        return f"{event.get('stage')} done in {event.get('seconds', 0):.2f} s"
    if kind == "trial":
        return f"trial {event.get('number')}: value {event.get('value')}, best {event.get('best')}"
    return str(kind)
