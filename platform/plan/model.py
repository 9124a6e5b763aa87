"""The plan: DESIGN.md section 3's canonical object, as dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mlpilot.platform.config import ENGINES
from mlpilot.platform.errors import PlanError

PLAN_VERSION = 1
_PLAN_KEYS = ("version", "template", "engine", "adapter", "steps", "rationale")


@dataclass
class Step:
    tool: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "args": dict(self.args)}


@dataclass
class Plan:
    steps: list[Step]
    template: str = "custom"
    engine: str = "auto"
    adapter: str | None = None
    rationale: str = ""
    version: int = PLAN_VERSION

    @property
    def tools(self) -> list[str]:
        return [s.tool for s in self.steps]

    def step(self, tool: str) -> Step | None:
        """The first step calling ``tool``, if any."""
        return next((s for s in self.steps if s.tool == tool), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "template": self.template,
            "engine": self.engine,
            "adapter": self.adapter,
            "steps": [s.to_dict() for s in self.steps],
            "rationale": self.rationale,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        if not isinstance(data, dict):
            raise PlanError("a plan must be a JSON object")
        unknown = sorted(set(data) - set(_PLAN_KEYS))
        if unknown:
            raise PlanError(
                f"unknown plan keys: {', '.join(unknown)}",
                hint=f"valid keys: {', '.join(_PLAN_KEYS)}",
            )
        version = data.get("version", PLAN_VERSION)
        if version != PLAN_VERSION:
            raise PlanError(f"plan version {version!r} is not supported (expected {PLAN_VERSION})")
        raw_steps = data.get("steps")
        if not isinstance(raw_steps, list) or not raw_steps:
            raise PlanError("a plan needs a non-empty 'steps' list")
        steps = []
        for i, raw in enumerate(raw_steps):
            if not isinstance(raw, dict) or not isinstance(raw.get("tool"), str):
                raise PlanError(f"step {i} must be an object with a 'tool' name and 'args'")
            args = raw.get("args") or {}
            if not isinstance(args, dict):
                raise PlanError(f"step {i} ({raw['tool']}): 'args' must be an object")
            steps.append(Step(raw["tool"], dict(args)))
        engine = data.get("engine", "auto") or "auto"
        if engine not in ENGINES:
            raise PlanError(
                f"engine {engine!r} is not valid", hint=f"use one of: {', '.join(ENGINES)}"
            )
        adapter = data.get("adapter")
        if adapter is not None and not isinstance(adapter, str):
            raise PlanError("'adapter' must be a name or null")
        return cls(
            steps=steps,
            template=str(data.get("template") or "custom"),
            engine=engine,
            adapter=adapter,
            rationale=str(data.get("rationale") or ""),
            version=PLAN_VERSION,
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise PlanError(f"the plan is not valid JSON: {exc}") from None
