"""The plan model and its validation against the tools and the data profile."""

from __future__ import annotations

from mlpilot.platform.plan.model import PLAN_VERSION, Plan, Step
from mlpilot.platform.plan.validate import STAGE_ORDER, ValidatedPlan, validate_plan

__all__ = ["PLAN_VERSION", "STAGE_ORDER", "Plan", "Step", "ValidatedPlan", "validate_plan"]
