"""Planning a request (no run is created): profile the data, ask the planner, validate."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import PlanError
from mlpilot.platform.llm import PlanningRequest, PlanResult, make_planner
from mlpilot.platform.ml.profile import DataProfile, profile_table
from mlpilot.platform.plan import validate_plan
from mlpilot.platform.plan.templates import TemplateCatalog, builtin_templates
from mlpilot.platform.tools import ToolRegistry, default_registry

log = logging.getLogger(__name__)
#: ``--adapter none``: no domain adapter, whatever the planner suggests
NO_ADAPTER = "none"


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
    adapter: str | None = None,
) -> tuple[PlanResult, DataProfile | None]:
    """Plan ``prompt``; with ``template`` the named template is instantiated directly.

    ``adapter`` (``--adapter``) names the domain adapter, or ``"none"`` for none; it wins
    over the planner's suggestion and over a plan file's.
    """
    result, profile = _plan(
        settings,
        prompt,
        data_path=data_path,
        target=target,
        template=template,
        template_params=template_params,
        context=context,
        registry=registry,
        templates=templates,
        profile=profile,
        experiment=experiment,
        planner_name=planner_name,
        plan_file=plan_file,
    )
    if adapter is not None:
        _set_adapter(result, adapter)
    return result, profile


def _set_adapter(result: PlanResult, name: str) -> None:
    from mlpilot.adapters import get_adapter

    chosen = None if name.strip().lower() == NO_ADAPTER else get_adapter(name.strip()).name
    if chosen != result.plan.adapter:
        was = result.plan.adapter or "none"
        result.notes.append(f"adapter {chosen or 'none'} (--adapter; the plan had {was})")
    result.plan.adapter = chosen


def _plan(
    settings: Settings,
    prompt: str,
    *,
    data_path: str | None,
    target: str | None,
    template: str | None,
    template_params: dict[str, Any] | None,
    context: dict[str, Any] | None,
    registry: ToolRegistry | None,
    templates: TemplateCatalog | None,
    profile: DataProfile | None,
    experiment: str | None,
    planner_name: str | None,
    plan_file: str | None,
) -> tuple[PlanResult, DataProfile | None]:
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
    """A saved plan (``mlpilot plan --json > plan.json``), validated like any other.

    The run records where the plan came from: the file, its SHA-256 digest, and the prompt
    it was planned from when the file carries one (a top-level ``"prompt"``, or the plan
    under ``"plan"`` next to it).
    """
    from mlpilot.platform.plan import Plan

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PlanError(f"cannot read plan file {path}: {exc.strerror}") from None
    data, prompt = _unwrap(raw, path)
    plan = Plan.from_dict(data)
    load = plan.step("load_data")
    replaced = []
    if load is not None and data_path:
        given = load.args.get("path")
        if given and Path(str(given)).expanduser().resolve() != Path(data_path).resolve():
            replaced.append(f"the plan file's data path {given} was replaced by --data {data_path}")
        load.args["path"] = data_path
    if load is not None and target:
        load.args["target"] = target  # --target wins over what the file says
    if profile is None and load is not None:
        profile = profile_if_given(load.args.get("path"))
        load.args["path"] = profile.path if profile else load.args.get("path")
    validated = validate_plan(plan, registry, profile, check_files=False)
    source = {"path": str(Path(path).resolve()), "sha256": hashlib.sha256(raw).hexdigest()}
    if prompt:
        source["prompt"] = prompt
    return PlanResult(
        plan=validated.plan,
        planner="file",
        task=validated.task,
        notes=[
            *validated.notes,
            *replaced,
            f"plan file {source['path']} (sha256 {source['sha256'][:16]}…)",
        ],
        source=source,
    ), profile


def _unwrap(raw: bytes, path: str) -> tuple[Any, str | None]:
    """The plan object in a plan file, and the prompt the file carries (or None)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"plan file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        return data, None
    prompt = data.get("prompt")
    if isinstance(data.get("plan"), dict):
        data = data["plan"]
    else:
        data = {k: v for k, v in data.items() if k != "prompt"}
    return data, prompt if isinstance(prompt, str) and prompt.strip() else None


def provenance_tags(source: dict[str, Any] | None) -> dict[str, str]:
    """MLflow tags recording a plan file a run was started from."""
    from mlpilot.tracking import vocab

    if not source:
        return {}
    return {vocab.TAG_PLAN_FILE: source["path"][:500], vocab.TAG_PLAN_SHA256: source["sha256"]}
