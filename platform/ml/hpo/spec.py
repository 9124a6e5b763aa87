"""What a study needs to be continued elsewhere, stored with the study itself.

``StudySpec`` goes into the study's user attribute ``mlpilot``: the data file, target, task,
model family, metric, seed, the data-preparation steps of the plan (load, clean, features)
with their arguments, the budget and early-stopping settings, and where its trials are
logged in MLflow. ``mlpilot worker --study NAME`` replays the preparation steps through the
runtime library to rebuild exactly the objective the study was created with.

The recipe names functions (``module:function``) that a worker imports and calls, so it is
checked before anything is imported (``check_recipe``): every function must be the runtime
function of a registered pipeline tool — built-in, or a plugin given with ``--plugins``.
The parent's storage proxy applies the same check when a pipeline stores the recipe.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
import uuid
from collections.abc import Container
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.hpo.storage import redact

if TYPE_CHECKING:
    import optuna

    from mlpilot.platform.ml.context import PipelineRun

SPEC_ATTR = "mlpilot"
SPEC_VERSION = 1
#: the stages whose steps shape the data every trial sees, replayed in plan order
PREP_STAGES = ("load", "clean", "features")
#: where the built-in steps live (studies created before steps recorded their function)
RUNTIME_MODULE = "mlpilot.platform.ml.steps"
_BUILTIN_STAGES = {"load_data": "load", "clean_data": "clean", "engineer_features": "features"}
#: the preparation steps every plan may replay (built-in; a recipe may name them bare)
BUILTIN_PREP_FUNCTIONS = frozenset(f"{RUNTIME_MODULE}:{tool}" for tool in _BUILTIN_STAGES)
#: a recipe larger than this (as JSON) is refused: a real one is a few kilobytes
MAX_RECIPE_BYTES = 64 * 1024


@dataclass
class StudySpec:
    data_path: str
    target: str
    task: str
    model: str
    metric: str
    seed: int
    steps: list[dict[str, Any]]
    adapter: str | None = None
    engine: str = "cpu"
    #: whose model defaults the study samples (a comparison's CPU leg prefers the GPU's)
    prefer: str | None = None
    data_bytes: int | None = None
    n_trials: int | None = None
    timeout_s: float | None = None
    early_stopping: bool = True
    patience: int = 10
    min_delta: float = 0.01
    warmup: int = 10
    pruning: bool = True
    cv_folds: int = 3
    mlflow_run_id: str | None = None
    mlflow_experiment_id: str | None = None
    tracking_uri: str | None = None
    created_at: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")
    )
    version: int = SPEC_VERSION

    def to_attr(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_attr(cls, data: dict[str, Any]) -> StudySpec:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def of_study(cls, study: optuna.Study) -> StudySpec:
        data = study.user_attrs.get(SPEC_ATTR)
        if not isinstance(data, dict):
            raise MlpilotError(
                f"study {study.study_name!r} was not created by mlpilot: it has no recipe to rebuild its objective",
                hint="workers join studies that an mlpilot optimize_model step created",
            )
        return cls.from_attr(data)

    def save(self, study: optuna.Study) -> None:
        study.set_user_attr(SPEC_ATTR, self.to_attr())


def recipe_functions(data: Any) -> list[str]:
    """The ``module:function`` names a stored recipe would import, in order."""
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        raise MlpilotError(
            "the study's recipe has no list of steps", hint="it was not written by mlpilot"
        )
    names = []
    for step in steps:
        if not isinstance(step, dict) or not isinstance(step.get("tool", ""), str):
            raise MlpilotError("the study's recipe holds a step that is not a tool call")
        function = step.get("function") or f"{RUNTIME_MODULE}:{step.get('tool', '')}"
        if not isinstance(function, str):
            raise MlpilotError(f"the study's recipe names a step function {function!r}")
        names.append(function)
    return names


def check_recipe(data: Any, allowed: Container[str]) -> StudySpec:
    """The recipe as a ``StudySpec``, when every function it names is in ``allowed``.

    Nothing is imported: a refused recipe ends here, naming the function.
    """
    import json

    try:
        size = len(json.dumps(data))
    except (TypeError, ValueError):
        raise MlpilotError("the study's recipe is not JSON") from None
    if size > MAX_RECIPE_BYTES:
        raise MlpilotError(f"the study's recipe is {size} bytes, over {MAX_RECIPE_BYTES}")
    for function in recipe_functions(data):
        if function not in allowed and function not in BUILTIN_PREP_FUNCTIONS:
            raise MlpilotError(
                f"the study's recipe calls {function}, which is not a registered pipeline "
                "step: it is not run",
                hint="only built-in steps and plugins given with --plugins MODULE run",
            )
    try:
        return StudySpec.from_attr(data)
    except TypeError as exc:
        raise MlpilotError(f"the study's recipe does not describe a study: {exc}") from None


def prep_steps(run: PipelineRun, data_path: str) -> list[dict[str, Any]]:
    """The plan's data-preparation steps, each with the runtime function that runs it.

    A step prepares the data when its tool's stage is load, clean or features — plugin
    tools too, since the function is recorded as ``module:function`` and replayed by import.
    A bare load_data when the plan has none.
    """
    steps = []
    for step in (run.plan or {}).get("steps", []):
        if not isinstance(step, dict):
            continue
        info = run.runtime.get(step.get("tool", ""), {})
        stage = info.get("stage") or _BUILTIN_STAGES.get(step.get("tool", ""))
        if stage in PREP_STAGES:
            function = info.get("function") or f"{RUNTIME_MODULE}:{step['tool']}"
            steps.append(
                {"tool": step["tool"], "function": function, "args": dict(step.get("args") or {})}
            )
    if not any(s["tool"] == "load_data" for s in steps):
        args = {"path": data_path, "target": run.data.target, "task": run.data.task}
        steps.insert(
            0, {"tool": "load_data", "function": f"{RUNTIME_MODULE}:load_data", "args": args}
        )
    return steps


def spec_from_run(run: PipelineRun, **settings: Any) -> StudySpec:
    """The spec of a study about to be optimised for ``run``."""
    data_path = str(Path((run.result.data or {}).get("path") or run.data_path or "").resolve())
    try:
        data_bytes: int | None = Path(data_path).stat().st_size
    except OSError:
        data_bytes = None
    logger = run.logger
    return StudySpec(
        data_path=data_path,
        data_bytes=data_bytes,
        target=str(run.data.target),
        task=str(run.data.task),
        seed=int(run.seed),
        engine=run.engine,
        prefer=run.prefer,
        steps=prep_steps(run, data_path),
        adapter=(run.plan or {}).get("adapter"),
        mlflow_run_id=getattr(logger, "run_id", None),
        mlflow_experiment_id=getattr(logger, "experiment_id", None),
        # without a password: the storage is shared, credentials belong in each worker's env
        tracking_uri=redact(logger.tracking_uri) if getattr(logger, "tracking_uri", None) else None,
        **settings,
    )


def rebuild_run(
    spec: StudySpec, *, run_dir: Path, data_path: str | None = None, engine: str | None = None
) -> PipelineRun:
    """A ``PipelineRun`` with the study's data prepared exactly as when the study was created."""
    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.platform.ml.io import readable_path
    from mlpilot.tracking.run_logger import NullRunLogger

    path = data_path or spec.data_path
    # a contained trial loop gets the file as a descriptor (``protocol.ENV_READ_MAP``)
    opened = readable_path(path)
    if not opened.is_file():
        raise MlpilotError(
            f"the study's data file {path} is not here",
            hint="pass the same file with --data (the file this study was created on)",
        )
    size = opened.stat().st_size
    run_dir.mkdir(parents=True, exist_ok=True)
    run = PipelineRun(
        plan={"adapter": spec.adapter, "steps": spec.steps},
        seed=spec.seed,
        data_path=path,
        run_dir=run_dir,
        logger=NullRunLogger(),  # the study's parent run already holds these params
        engine=engine or spec.engine,
        prefer=spec.prefer or spec.engine,
    )
    if spec.data_bytes is not None and size != spec.data_bytes:
        run.note(
            f"{path} has {size} bytes, the study was created on {spec.data_bytes}: "
            "trials are scored on different data"
        )
    for step in spec.steps:
        function = step.get("function") or f"{RUNTIME_MODULE}:{step['tool']}"
        _step_function(function)(run, **step["args"])
    return run


def _step_function(path: str) -> Any:
    """The runtime function ``module:function`` that a study recorded for a step."""
    module_name, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise MlpilotError(
            f"the study replays step {path}, which cannot be imported here: {exc}",
            hint="install the plugin that defines it (mlpilot run --plugins MODULE)",
        ) from None


def default_study_name(run: PipelineRun, model: str) -> str:
    """``<target>-<model>-<run id prefix>``: one study per request, found again by its run."""
    run_id = getattr(run.logger, "run_id", None)
    if run_id:
        return f"{run.data.target or 'study'}-{model}-{run_id[:8]}"
    # a relayed pipeline knows no run id: one timestamped name per run and model, the same
    # on every call (the storage proxy lets a leg load only the studies it made)
    names = run.__dict__.setdefault("_study_names", {})
    if model not in names:
        stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        names[model] = f"{run.data.target or 'study'}-{model}-{stamp}"
    return names[model]
