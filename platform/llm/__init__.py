"""Planners: the offline rule-based planner and the OpenAI-compatible LLM planner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlpilot.platform.errors import SettingsError
from mlpilot.platform.llm._base import Planner, PlanningRequest, PlanResult

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

__all__ = ["PLANNERS", "PlanResult", "Planner", "PlanningRequest", "make_planner"]

PLANNERS = ("offline", "openai")


def make_planner(settings: Settings, name: str | None = None) -> Planner:
    """The planner ``MLPILOT_LLM`` asks for: auto = openai when a key is set, else offline."""
    choice = name or settings.llm
    if choice == "auto":
        choice = "openai" if settings.llm_api_key else "offline"
    if choice == "offline":
        from mlpilot.platform.llm.offline import OfflinePlanner

        return OfflinePlanner()
    if choice == "openai":
        if not settings.llm_api_key:
            raise SettingsError(
                "MLPILOT_LLM=openai needs an API key",
                hint="set NVIDIA_API_KEY (or OPENAI_API_KEY), or use MLPILOT_LLM=offline",
            )
        from mlpilot.platform.llm.openai_planner import OpenAIPlanner

        return OpenAIPlanner(settings)
    raise SettingsError(
        f"unknown planner {choice!r}", hint=f"use one of: auto, {', '.join(PLANNERS)}"
    )
