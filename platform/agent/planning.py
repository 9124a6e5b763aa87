"""Planning a request (no run is created): profile the data, ask the planner, validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import PlanError
from mlpilot.platform.llm import PlanningRequest, PlanResult, make_planner
from mlpilot.platform.ml.profile import DataProfile, profile_table
from mlpilot.platform.plan import validate_plan
from mlpilot.platform.plan.templates import TemplateCatalog, builtin_templates
from mlpilot.platform.tools import ToolRegistry, default_registry


def profile_if_given(data_path: str | None) -> DataProfile | None:
    return profile_table(data_path) if data_path else None


def plan_request(
    settings: Settings,
    prompt: str,
    *,
    data_path: str | None = None,
    target: str | None = None,
    template: str | None = None,
    template_params: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    templates: TemplateCatalog | None = None,
    profile: DataProfile | None = None,
    experiment: str | None = None,
    planner_name: str | None = None,
    plan_file: str | None = None,
) -> tuple[PlanResult, DataProfile | None]:
    """Plan ``prompt``; with ``template`` the named template is instantiated directly."""
    registry = registry or default_registry()
    templates = templates or builtin_templates()
    context = dict(context or {})
    if data_path is None and context.get("data_path") and Path(context["data_path"]).exists():
        data_path = context["data_path"]
    if plan_file:
        return _plan_from_file(plan_file, registry, data_path, profile, target)
    if profile is None:
        profile = profile_if_given(data_path)
    if template:
        chosen_target = target or context.get("target")
        needs_data = "load_data" in templates.get(template).tools
        if needs_data and chosen_target is None and profile is not None:
            from mlpilot.platform.plan.validate import describe_candidates

            raise PlanError(
                f"template {template!r} needs a target column",
                hint=f"pass --target COL; candidates: {describe_candidates(profile)}",
            )
        plan = templates.get(template).instantiate(
            template_params, data_path=profile.path if profile else data_path, target=chosen_target
        )
        validated = validate_plan(plan, registry, profile, check_files=False)
        if needs_data and target is None and chosen_target is not None:
            validated.notes.insert(0, f"target {chosen_target!r} carried over from the session")
        return PlanResult(
            plan=validated.plan, planner="template", task=validated.task, notes=validated.notes
        ), profile
    planner = make_planner(settings, planner_name)
    request = PlanningRequest(
        prompt=prompt,
        registry=registry,
        templates=templates,
        profile=profile,
        data_path=profile.path if profile else data_path,
        target=target,
        context=context,
        experiment=experiment or settings.experiment,
    )
    return planner.plan(request), profile


def _plan_from_file(
    path: str,
    registry: ToolRegistry,
    data_path: str | None,
    profile: DataProfile | None,
    target: str | None = None,
) -> tuple[PlanResult, DataProfile | None]:
    """A saved plan (``mlpilot plan --json > plan.json``), validated like any other."""
    from mlpilot.platform.plan import Plan

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"cannot read plan file {path}: {exc.strerror}") from None
    plan = Plan.from_json(text)
    load = plan.step("load_data")
    if load is not None and data_path:
        load.args["path"] = data_path
    if load is not None and target:
        load.args["target"] = target  # --target wins over what the file says
    if profile is None and load is not None:
        profile = profile_if_given(load.args.get("path"))
        load.args["path"] = profile.path if profile else load.args.get("path")
    validated = validate_plan(plan, registry, profile, check_files=False)
    return PlanResult(
        plan=validated.plan, planner="file", task=validated.task, notes=validated.notes
    ), profile
