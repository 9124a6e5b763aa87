"""Turning the model's tool calls into plan steps: parsing arguments, merging turns.

One rule serves the first answer and every repair: calling a tool again replaces its step,
a new tool is inserted at its place in the pipeline order, and a turn that calls every
tool of the plan again replaces the plan (so a re-ordered plan can be sent in full).
"""

from __future__ import annotations

import json
from typing import Any

from mlpilot.platform.plan import STAGE_ORDER, Step
from mlpilot.platform.tools import ToolRegistry


class BadArguments(ValueError):
    """The arguments of a tool call are not a JSON object; the text is sent to the model."""


def parse_arguments(tool: str, raw: str | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadArguments(
            f"the arguments of {tool} are not valid JSON ({exc.msg} at character {exc.pos}); "
            f"call {tool} again with a JSON object of arguments"
        ) from None
    if not isinstance(value, dict):
        raise BadArguments(
            f"the arguments of {tool} must be a JSON object, not {type(value).__name__}; "
            f"call {tool} again with a JSON object of arguments"
        )
    return value


def _rank(tool: str, registry: ToolRegistry) -> int | None:
    if tool not in registry:
        return None
    stage = registry.get(tool).stage
    return STAGE_ORDER.index(stage) if stage in STAGE_ORDER else None


def _insert_at(steps: list[Step], tool: str, registry: ToolRegistry) -> int:
    rank = _rank(tool, registry)
    if rank is None:  # directives (compare_engines) have no stage: they go last
        return len(steps)
    for i, step in enumerate(steps):
        other = _rank(step.tool, registry)
        if other is not None and other > rank:
            return i
    return len(steps)


def _last_call_wins(steps: list[Step]) -> list[Step]:
    """One step per tool, at its first position, with its last arguments."""
    out: list[Step] = []
    for step in steps:
        found = next((i for i, s in enumerate(out) if s.tool == step.tool), None)
        if found is None:
            out.append(step)
        else:
            out[found] = step
    return out


def merge_steps(current: list[Step], new: list[Step], registry: ToolRegistry) -> list[Step]:
    """The plan's steps after one model turn called the pipeline tools in ``new``."""
    new = _last_call_wins([Step(s.tool, dict(s.args)) for s in new])
    if not current or {s.tool for s in new} >= {s.tool for s in current}:
        return new
    merged = [Step(s.tool, dict(s.args)) for s in current]
    for step in new:
        found = next((i for i, s in enumerate(merged) if s.tool == step.tool), None)
        if found is not None:
            merged[found] = step
        else:
            merged.insert(_insert_at(merged, step.tool, registry), step)
    return merged
