"""The orchestrator in-process: real planning, validation and codegen; a fake metadata
store, a fake MLflow and a fake executor whose pipeline "finishes" as each test says.

What every test checks in the end: both stores hold the run in a terminal state (never
RUNNING) with the states it went through, and the child was given the MLflow run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mlpilot.platform.agent.orchestrator import Orchestrator
from mlpilot.platform.agent.request import RunOutcome, RunRequest
from mlpilot.platform.config import Settings
from mlpilot.platform.errors import TrackingError
from mlpilot.platform.execution import ChildResult, LegResult
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.protocol import ENV_RUN_STARTED_AT, PipelineEvent, PipelineResult
from mlpilot.tracking import vocab
from mlpilot.tracking.vocab import RunState

R = RunState
PIPELINE_STATES = [R.RECEIVED, R.PLANNING, R.VALIDATING, R.GENERATING, R.RUNNING, R.RECORDING]


# -- fakes ----------------------------------------------------------------------------------------
class FakeStore:
    """The metadata store's writes, kept as documents (dotted field paths included)."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.benchmarks: dict[str, dict[str, Any]] = {}
        self.flushes = 0
        self.fail_create = False

    def create_run(self, run_id: str, fields: dict[str, Any], events: Any = ()) -> None:
        if self.fail_create:
            raise TrackingError("the metadata store refused the run")
        assert run_id not in self.runs, "a run is created once"
        self.runs[run_id] = {"_id": run_id, "events": []}
        self.update_run(run_id, fields, events)

    def update_run(self, run_id: str, fields: dict[str, Any], events: Any = ()) -> None:
        doc = self.runs[run_id]
        for key, value in fields.items():
            *parents, last = key.split(".")
            target = doc
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = value
        doc["events"].extend(events)

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        return self.sessions.get(session_id)

    def save_session(
        self, session_id: str, messages: list[dict[str, Any]], context: dict[str, Any]
    ) -> None:
        self.sessions[session_id] = {"_id": session_id, "messages": messages, "context": context}

    def save_benchmark(self, benchmark_id: str, doc: dict[str, Any]) -> None:
        self.benchmarks[benchmark_id] = doc

    def flush(self) -> int:
        self.flushes += 1
        return 0


class FakeRun:
    """One MLflow run: tags, metrics, artifacts and its status."""

    def __init__(self, tracking: FakeTracking, name: str, tags: dict[str, str]) -> None:
        self.tracking = tracking
        self.run_id = uuid.uuid4().hex
        self.experiment_id = "1"
        self.name = name
        self.tags = dict(tags)
        self.metrics: dict[str, float] = {}
        self.artifacts: dict[str, Any] = {}
        self.status = "RUNNING"
        tracking.runs[self.run_id] = self

    def set_tags(self, tags: dict[str, Any]) -> None:
        self.tags.update({k: str(v) for k, v in tags.items()})

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        self.metrics.update(metrics)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.artifacts[artifact_file] = text

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.artifacts[artifact_file] = json.loads(json.dumps(data, default=str))

    def log_file(self, local_path: str | Path, artifact_dir: str | None = None) -> None:
        path = Path(local_path)
        name = f"{artifact_dir}/{path.name}" if artifact_dir else path.name
        self.artifacts[name] = path.read_text(encoding="utf-8")

    def child(self, name: str, tags: dict[str, str] | None = None) -> FakeRun:
        return FakeRun(self.tracking, name, tags or {})

    def end(self, status: str = "FINISHED") -> None:
        self.status = status


class FakeTracking:
    tracking_uri = "fake://mlflow"

    def __init__(self) -> None:
        self.runs: dict[str, FakeRun] = {}
        self.down = False

    def create_run(self, experiment: str, run_name: str, tags: dict[str, str]) -> FakeRun:
        if self.down:
            raise TrackingError("MLflow is unreachable")
        return FakeRun(self, run_name, tags)


Finish = Callable[["FakeLeg", Any], LegResult]


class FakeLeg:
    """A started pipeline: what it was started with, and what the parent did to it."""

    def __init__(self, finish: Finish, run_dir: Path, script: Path, engine: str, run_id: Any):
        self._finish = finish
        self.run_dir, self.script, self.engine = run_dir, script, engine
        self.started_with_run = run_id
        self.script_text = script.read_text(encoding="utf-8")
        self.handed_over: str | None = None
        self.stopped = self.abandoned = False

    def hand_over_run(self, run_id: str) -> None:
        self.handed_over = run_id

    def stop(self) -> None:
        self.stopped = True

    def abandon(self) -> None:
        self.abandoned = True

    def finish(self, *, on_event: Any = None, cancel: Any = None) -> LegResult:
        return self._finish(self, on_event)

    @property
    def run_id(self) -> str | None:
        return self.started_with_run or self.handed_over


class FakeExecutor:
    def __init__(
        self, finish: Finish, refuse_starts: int = 0, settings: Settings | None = None
    ) -> None:
        self.settings = settings or Settings.from_env({})
        self.finish = finish
        self.refuse_starts = refuse_starts  # how many starts fail before one works
        self.legs: list[FakeLeg] = []

    def start_leg(
        self,
        *,
        script: Path,
        run_dir: Path,
        engine: Any,
        data_path: Any,
        mlflow_run_id: Any,
        track: bool = True,
        prefer: str | None = None,
        extra_env: dict[str, str] | None = None,
        registrations: tuple[Any, ...] = (),
        extra_reads: tuple[str, ...] = (),
    ) -> FakeLeg:
        self.extra_env = dict(extra_env or {})
        if self.refuse_starts:
            self.refuse_starts -= 1
            raise OSError("cannot start the child")
        name = getattr(engine, "used", engine)  # the orchestrator hands over the whole choice
        leg = FakeLeg(self.finish, run_dir, script, name, mlflow_run_id)
        self.legs.append(leg)
        return leg

    def run_leg(self, *, on_event: Any = None, cancel: Any = None, **start: Any) -> LegResult:
        return self.start_leg(**start).finish(on_event=on_event)


def succeeded(leg: FakeLeg, on_event: Any) -> LegResult:
    on_event(PipelineEvent(type="stage_end", at="now", stage="train", seconds=0.5))
    result = PipelineResult(
        status=protocol.SUCCEEDED,
        run_id=leg.run_id,
        task="regression",
        target="sales",
        main_metric="rmse",
        model_uri="models:/m-0123456789abcdef",  # a session's best run is one with a model
        metrics={"test_rmse": 1.5, "cv_rmse": 1.7},
        timings={"train": 0.5, "total": 1.0},
    )
    return LegResult(leg.engine, ChildResult(returncode=0, duration_s=1.0), result, leg.run_dir)


def crashed(leg: FakeLeg, on_event: Any) -> LegResult:
    child = ChildResult(returncode=-9, duration_s=1.0, signal_name="SIGKILL")
    return LegResult(leg.engine, child, None, leg.run_dir)


def interrupted(leg: FakeLeg, on_event: Any) -> LegResult:
    raise KeyboardInterrupt


# -- the harness ----------------------------------------------------------------------------------
@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mlpilot.platform.datasets import make_sales, write_table

    return write_table(make_sales(300, seed=5), tmp_path_factory.mktemp("data") / "sales.csv")


class Harness:
    def __init__(self, settings: Settings, executor: FakeExecutor) -> None:
        self.store, self.tracking, self.executor = FakeStore(), FakeTracking(), executor
        self.states: list[str] = []
        self.orchestrator = Orchestrator(
            settings,
            store=self.store,
            tracking=self.tracking,
            executor=executor,
            progress=self,
        )

    # progress
    def state(self, state: str, message: str = "") -> None:
        self.states.append(state)

    def event(self, event: PipelineEvent) -> None:
        pass

    def run(self, **request: Any) -> RunOutcome:
        request.setdefault("engine", "cpu")
        return self.orchestrator.run(RunRequest(**request))

    def recorded(self, outcome: RunOutcome) -> tuple[dict[str, Any], FakeRun]:
        """The run in both stores; asserts it ended, in the same state in both."""
        assert outcome.run_id is not None
        doc, run = self.store.runs[outcome.run_id], self.tracking.runs[outcome.run_id]
        final = RunState(outcome.status)
        assert final.terminal and doc["status"] == final.value
        assert run.status == final.mlflow_status and run.tags[vocab.TAG_STATE] == final.value
        assert doc["events"][-1]["state"] == final.value
        assert self.states[-1] == final.value
        self.assert_nothing_running()
        return doc, run

    def assert_nothing_running(self) -> None:
        assert all(r.status != "RUNNING" for r in self.tracking.runs.values())
        assert all(RunState(d["status"]).terminal for d in self.store.runs.values())


def states(doc: dict[str, Any]) -> list[str]:
    """The run's states in order, repeats (pipeline events while RUNNING) merged."""
    seen = [e["state"] for e in doc["events"]]
    return [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]


def test_a_run_that_succeeds(settings: Settings, data: Path) -> None:
    harness = Harness(settings, FakeExecutor(succeeded))
    outcome = harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    assert outcome.status == R.SUCCEEDED and outcome.error is None
    doc, run = harness.recorded(outcome)
    assert states(doc) == [s.value for s in [*PIPELINE_STATES, R.SUCCEEDED]]
    assert harness.states == states(doc)
    assert any(e.get("detail", {}).get("stage") == "train" for e in doc["events"])
    # early start: the child started before its MLflow run and got the id afterwards
    [leg] = harness.executor.legs
    assert leg.started_with_run is None and leg.handed_over == outcome.run_id
    assert "train_model" in leg.script_text and str(data) in leg.script_text
    run_dir = Path(outcome.run_dir or "")
    assert run_dir == settings.runs_dir / outcome.run_id and run_dir.is_symlink()
    assert outcome.pipeline_path == str(run_dir / "pipeline.py")
    # both stores hold the result
    assert doc["metrics"]["test_rmse"] == 1.5 and doc["engine"]["used"] == "cpu"
    assert doc["finished_at"] >= doc["created_at"]
    assert doc["plan"] == outcome.plan and doc["dataset"]["rows"] == 300
    assert run.tags[vocab.TAG_ENGINE_USED] == "cpu" and run.tags[vocab.TAG_TARGET] == "sales"
    assert run.tags[vocab.TAG_KIND] == vocab.KIND_AGENT_RUN and run.tags[vocab.TAG_FINGERPRINT]
    assert run.artifacts["pipeline.py"] == leg.script_text
    assert run.artifacts["plan.json"] == outcome.plan and run.artifacts["prompt.txt"]
    assert run.artifacts["timings.json"]["stages_s"]["total"] == 1.0
    # the session remembers it as its best run
    session = harness.store.sessions[outcome.session_id]
    assert session["context"]["best_run"]["run_id"] == outcome.run_id
    assert harness.store.flushes >= 1


def test_a_planning_failure_is_a_failed_run_without_a_pipeline(
    settings: Settings, data: Path
) -> None:
    harness = Harness(settings, FakeExecutor(succeeded))
    outcome = harness.run(prompt="train a random forest", data_path=str(data), target="revenue")
    assert outcome.status == R.FAILED and outcome.error is not None
    assert outcome.error["stage"] == R.PLANNING and "'revenue'" in outcome.error["message"]
    doc, run = harness.recorded(outcome)
    assert states(doc) == [R.RECEIVED, R.PLANNING, R.FAILED]
    assert doc["error"] == outcome.error and doc["plan"] is None
    assert "revenue" in run.tags[vocab.TAG_ERROR] and run.artifacts["prompt.txt"]
    assert harness.executor.legs == []


def test_a_validation_failure_is_recorded_at_validating(
    settings: Settings, data: Path, tmp_path: Path
) -> None:
    # a saved plan passes planning (no file checks there); validation finds the missing file
    plan = tmp_path / "plan.json"
    steps = [
        {"tool": "load_data", "args": {"path": str(data), "target": "sales"}},
        {"tool": "train_model", "args": {"model": "linear"}},
        {"tool": "predict", "args": {"data_path": str(tmp_path / "missing.csv")}},
    ]
    plan.write_text(json.dumps({"steps": steps}))
    harness = Harness(settings, FakeExecutor(succeeded))
    outcome = harness.run(  # the saved plan's files confirmed by --data and --allow-read
        prompt="train and predict",
        plan_file=str(plan),
        data_path=str(data),
        allow_read=(str(tmp_path),),
    )
    assert outcome.status == R.FAILED and outcome.error is not None
    assert outcome.error["stage"] == R.VALIDATING and "missing.csv" in outcome.error["message"]
    doc, run = harness.recorded(outcome)
    assert states(doc) == [R.RECEIVED, R.PLANNING, R.VALIDATING, R.FAILED]
    assert doc["error"]["type"] == "PlanError"
    assert run.tags[vocab.TAG_ERROR_STAGE] == R.VALIDATING
    assert run.artifacts["plan.json"]["steps"][2]["tool"] == "predict"
    assert harness.executor.legs == [] and "pipeline.py" not in run.artifacts


def test_a_child_that_dies_without_a_result_fails_the_run(settings: Settings, data: Path) -> None:
    harness = Harness(settings, FakeExecutor(crashed))
    outcome = harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    assert outcome.status == R.FAILED and outcome.error is not None
    assert outcome.error["type"] == "ChildProcessError" and "SIGKILL" in outcome.error["message"]
    doc, run = harness.recorded(outcome)
    assert states(doc) == [s.value for s in [*PIPELINE_STATES, R.FAILED]]
    assert "SIGKILL" in doc["error"]["message"] and "SIGKILL" in run.tags[vocab.TAG_ERROR]
    assert outcome.metrics == {} and outcome.session_id in harness.store.sessions


def test_a_cancelled_run_is_cancelled_in_the_store_and_killed_in_mlflow(
    settings: Settings, data: Path
) -> None:
    harness = Harness(settings, FakeExecutor(interrupted))
    outcome = harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    assert outcome.status == R.CANCELLED and outcome.error is not None
    assert outcome.error["type"] == "Cancelled" and outcome.error["stage"] == R.RUNNING
    doc, run = harness.recorded(outcome)
    assert run.status == "KILLED" and doc["status"] == "CANCELLED"
    assert states(doc) == [s.value for s in [*PIPELINE_STATES[:-1], R.CANCELLED]]


def test_a_pipeline_that_cannot_start_early_starts_once_its_run_exists(
    settings: Settings, data: Path
) -> None:
    harness = Harness(settings, FakeExecutor(succeeded, refuse_starts=1))
    outcome = harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    assert outcome.status == R.SUCCEEDED
    doc, _ = harness.recorded(outcome)
    [leg] = harness.executor.legs
    assert leg.started_with_run == outcome.run_id and leg.handed_over is None
    assert leg.run_dir == settings.runs_dir / outcome.run_id and not leg.run_dir.is_symlink()
    assert states(doc) == [s.value for s in [*PIPELINE_STATES, R.SUCCEEDED]]
    # the folder made for the early start was removed: only the run's own remains
    assert [p.name for p in settings.runs_dir.iterdir()] == [outcome.run_id]


def test_an_engine_comparison_starts_with_its_run(settings: Settings, data: Path) -> None:
    harness = Harness(settings, FakeExecutor(succeeded))
    outcome = harness.run(
        prompt="train a random forest to predict sales", data_path=str(data), engine="compare"
    )
    assert outcome.status == R.SUCCEEDED
    doc, run = harness.recorded(outcome)
    leg = harness.executor.legs[0]
    assert leg.engine == "cpu" and leg.started_with_run == outcome.run_id
    [benchmark] = harness.store.benchmarks.values()
    assert benchmark["run_id"] == outcome.run_id and benchmark["stages"]["total"]["cpu_s"] == 1.0
    assert doc["engine"]["requested"] == "compare" and vocab.TAG_COMPARE_GPU in run.tags


def test_mlflow_down_after_an_early_start_abandons_the_pipeline(
    settings: Settings, data: Path
) -> None:
    harness = Harness(settings, FakeExecutor(succeeded))
    harness.tracking.down = True
    with pytest.raises(TrackingError):
        harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    [leg] = harness.executor.legs
    assert leg.abandoned and harness.store.runs == {}


def test_a_store_that_refuses_the_run_ends_the_mlflow_run(settings: Settings, data: Path) -> None:
    harness = Harness(settings, FakeExecutor(succeeded))
    harness.store.fail_create = True
    with pytest.raises(TrackingError):
        harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    [leg] = harness.executor.legs
    [run] = harness.tracking.runs.values()
    assert leg.stopped and run.status == "FAILED" and run.tags[vocab.TAG_STATE] == R.FAILED


def test_the_requests_start_reaches_the_pipeline(settings: Settings, data: Path) -> None:
    """A time budget is the whole run's: the child counts it from when the request began."""
    harness = Harness(settings, FakeExecutor(succeeded))
    outcome = harness.run(
        prompt="train a random forest to predict sales", data_path=str(data), received_at=1234.5
    )
    assert outcome.status == R.SUCCEEDED
    assert harness.executor.extra_env == {ENV_RUN_STARTED_AT: "1234.500000"}


@pytest.fixture
def signals_installed() -> Any:
    """``interrupts.install`` as the CLI does, undone afterwards (handlers and state)."""
    import signal as signal_module

    from mlpilot.platform.config import interrupts

    saved = {sig: signal_module.getsignal(sig) for sig in interrupts.SIGNALS}
    state = dict(interrupts._state)
    interrupts.install()
    yield
    for sig, handler in saved.items():
        signal_module.signal(sig, handler)
    interrupts._state.clear()
    interrupts._state.update(state)


class SignalledHarness(Harness):
    """A user who presses Ctrl-C (SIGTERM here) the moment ``at`` is shown."""

    def __init__(self, settings: Settings, executor: FakeExecutor, at: str) -> None:
        super().__init__(settings, executor)
        self.at = at

    def state(self, state: str, message: str = "") -> None:
        super().state(state, message)
        if state == self.at:
            import os
            import signal as signal_module

            os.kill(os.getpid(), signal_module.SIGTERM)


@pytest.mark.parametrize("at", [R.RECEIVED.value, R.PLANNING.value, R.VALIDATING.value])
def test_a_signal_the_moment_a_state_is_shown_is_recorded_cancelled(
    settings: Settings, data: Path, signals_installed: Any, at: str
) -> None:
    harness = SignalledHarness(settings, FakeExecutor(succeeded), at)
    outcome = harness.run(prompt="train a random forest to predict sales", data_path=str(data))
    assert outcome.status == R.CANCELLED
    doc, run = harness.recorded(outcome)
    assert run.status == "KILLED" and doc["status"] == "CANCELLED"
