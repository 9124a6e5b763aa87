"""Plan validation (DESIGN.md section 2, step 3).

Each step is checked against its tool's JSON schema, then the plan as a whole against
the data profile: the target exists and suits the task, metrics suit the task, steps come
in a sensible order. Errors are written so that an LLM planner can repair its plan.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mlpilot.platform.errors import PlanError
from mlpilot.platform.ml.profile import DataProfile, infer_task, target_identifier
from mlpilot.platform.plan.model import Plan, Step
from mlpilot.platform.plan.params import check_params
from mlpilot.platform.plan.paths import PathPolicy, check_paths
from mlpilot.tracking.vocab import CLASSIFICATION_METRICS, REGRESSION_METRICS

if TYPE_CHECKING:
    from mlpilot.platform.tools import ToolRegistry

#: pipeline stages in the order a generated script runs them
STAGE_ORDER = (
    "load",
    "clean",
    "features",
    "train",
    "tune",
    "evaluate",
    "importance",
    "register",
    "predict",
)
#: stages that may sit anywhere after load_data: importance is computed on the final model
_FLOATING = ("importance",)
_NEEDS_DATA = ("clean", "features", "train", "tune", "evaluate", "importance")
_NEEDS_MODEL = ("evaluate",)


@dataclass
class ValidatedPlan:
    plan: Plan
    task: str | None = None
    notes: list[str] = field(default_factory=list)
    is_query: bool = False


def candidate_targets(profile: DataProfile) -> list[str]:
    return profile.candidate_targets()


def describe_candidates(profile: DataProfile, limit: int = 12) -> str:
    names = candidate_targets(profile)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def validate_plan(
    plan: Plan,
    registry: ToolRegistry,
    profile: DataProfile | None = None,
    *,
    check_files: bool = True,
    policy: PathPolicy | None = None,
) -> ValidatedPlan:
    """Validate ``plan`` and return a new, validated plan with notes; ``plan`` itself is
    left as it was (the new one has every argument's default filled in, and its engine set
    to ``compare`` when a step asks for both engines)."""
    plan = replace(plan, steps=_validated_steps(plan, registry))
    kinds = {s.tool: registry.get(s.tool).kind for s in plan.steps}
    if "query" in kinds.values():
        if len(plan.steps) > 1:
            raise PlanError(
                "query tools answer on their own: plan a query tool alone, or only pipeline tools",
                hint=f"steps were: {', '.join(plan.tools)}",
            )
        return ValidatedPlan(plan, is_query=True)

    if plan.adapter is not None:
        from mlpilot.adapters import get_adapter

        get_adapter(plan.adapter)  # raises PlanError listing the valid adapters
    if "compare_engines" in plan.tools:
        plan = replace(plan, engine="compare")
    _check_order(plan, registry)
    result = ValidatedPlan(plan)
    load = plan.step("load_data")
    if load is not None:
        result.task = _check_target(load, profile, result.notes, check_files)
        _check_metrics(plan, result.task)
    elif any(registry.get(t).stage in _NEEDS_DATA for t in plan.tools):
        raise PlanError(
            "the plan trains or transforms data but has no load_data step",
            hint="add load_data first",
        )
    check_params(plan, result.task)
    if policy is not None:
        plugins = frozenset(t for t in plan.tools if not registry.get(t).builtin)
        check_paths(plan, policy, plugins)
    if check_files:
        for step in plan.steps:
            if step.tool == "predict" and not Path(step.args["data_path"]).expanduser().exists():
                raise PlanError(f"predict: data file not found: {step.args['data_path']}")
    return result


def _validated_steps(plan: Plan, registry: ToolRegistry) -> list[Step]:
    """Each step with its arguments checked against its tool's schema, defaults filled in."""
    steps: list[Step] = []
    problems: list[str] = []
    for i, step in enumerate(plan.steps):
        try:
            steps.append(Step(step.tool, registry.get(step.tool).validate(step.args)))
        except PlanError as exc:
            problems.append(f"step {i + 1}: {exc.one_line()}")
    if problems:
        raise PlanError("the plan is invalid: " + " | ".join(problems))
    return steps


def _check_order(plan: Plan, registry: ToolRegistry) -> None:
    last_index, last_tool = -1, None
    stages = []
    for step in plan.steps:
        stage = registry.get(step.tool).stage
        if stage is None:
            continue
        if stage in _FLOATING:
            stages.append(stage)
            continue
        index = STAGE_ORDER.index(stage) if stage in STAGE_ORDER else last_index
        if index < last_index:
            raise PlanError(
                f"{step.tool} cannot come after {last_tool}",
                hint="order steps as: " + " → ".join(STAGE_ORDER),
            )
        last_index, last_tool = index, step.tool
        stages.append(stage)
    if plan.tools.count("load_data") > 1:
        raise PlanError("a plan loads one data file: use a single load_data step")
    has_model = "train" in stages or "tune" in stages
    for stage in _NEEDS_MODEL:
        if stage in stages and not has_model:
            raise PlanError(
                "evaluate_model needs a model: add train_model or optimize_model before it"
            )
    if plan.engine == "compare" and not has_model:
        raise PlanError(
            "compare_engines needs a model step to time: add train_model or optimize_model"
        )


def _check_target(
    load: Step, profile: DataProfile | None, notes: list[str], check_files: bool
) -> str | None:
    target = load.args.get("target")
    if profile is None:
        if check_files:
            raise PlanError(
                f"load_data: no profile for {load.args['path']!r}",
                hint="pass the data file with --data",
            )
        return None
    if target is None:
        raise PlanError(
            "load_data: no target column was named",
            hint=f"say which column to predict (--target COL); candidates: {describe_candidates(profile)}",
        )
    column = profile.column(target)
    if column is None:
        close = difflib.get_close_matches(target, profile.names, n=3, cutoff=0.6)
        suggestion = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
        raise PlanError(
            f"load_data: target column {target!r} is not in the data",
            hint=f"{suggestion}columns: {describe_candidates(profile)}",
        )
    if column.kind == "empty":
        raise PlanError(f"load_data: target column {target!r} has no values (every row is missing)")
    if column.kind == "constant":
        raise PlanError(
            f"load_data: target column {target!r} has a single value ({column.samples[0] if column.samples else ''}); there is nothing to predict",
            hint="choose a column with at least two different values",
        )
    if column.kind == "text" or target_identifier(column):
        what = "free text" if column.kind == "text" else "an identifier"
        raise PlanError(
            f"load_data: target column {target!r} is {what} (different in every row): "
            "there is nothing to learn",
            hint=f"choose another target; candidates: {describe_candidates(profile)}",
        )
    task = load.args.get("task", "auto")
    inferred = infer_task(column)
    if task == "regression" and column.kind == "categorical":
        examples = ", ".join(repr(s) for s in column.samples[:3])
        raise PlanError(
            f"load_data: target {target!r} holds text values ({examples}) and cannot be regressed",
            hint="use task classification, or pick a numeric target",
        )
    if task == "classification" and column.kind == "numeric" and column.unique > 50:
        raise PlanError(
            f"load_data: target {target!r} is continuous ({column.unique} distinct values) and cannot be classified",
            hint="use task regression, or bin the target first",
        )
    if column.missing > 0:
        notes.append(
            f"{column.missing:.1%} of rows have no value in target {target!r}; they are dropped before training"
        )
    return inferred if task == "auto" else task


def _check_metrics(plan: Plan, task: str | None) -> None:
    if task is None:
        return
    allowed = CLASSIFICATION_METRICS if task == "classification" else REGRESSION_METRICS
    for step in plan.steps:
        metric = step.args.get("metric")
        if metric is not None and metric not in allowed:
            raise PlanError(
                f"{step.tool}: metric {metric!r} does not suit a {task} task",
                hint=f"use one of: {', '.join(allowed)}",
            )
