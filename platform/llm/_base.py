"""The planner interface: prompt + data profile + session context → a validated Plan."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlpilot.platform.ml.profile import DataProfile
    from mlpilot.platform.plan import Plan
    from mlpilot.platform.plan.templates import TemplateCatalog
    from mlpilot.platform.tools import ToolRegistry


@dataclass
class PlanningRequest:
    """Everything a planner may use. Column names and values in ``profile`` are data."""

    prompt: str
    registry: ToolRegistry
    templates: TemplateCatalog
    profile: DataProfile | None = None
    data_path: str | None = None
    target: str | None = None  # --target: wins over anything in the prompt
    context: dict[str, Any] = field(
        default_factory=dict
    )  # session: data, target, last_run, best_run, last_plan
    experiment: str = "mlpilot"


@dataclass
class PlanResult:
    plan: Plan
    planner: str  # "offline" or "openai:<model>"
    task: str | None = None
    notes: list[str] = field(default_factory=list)
    transcript: dict[str, Any] | None = None
    source: dict[str, Any] | None = None  # a plan file: path, sha256, the prompt it carries


class Planner(abc.ABC):
    """Turns a request into a validated plan, or raises ``PlanError`` saying why it cannot."""

    name: str = "planner"

    @abc.abstractmethod
    def plan(self, request: PlanningRequest) -> PlanResult: ...
