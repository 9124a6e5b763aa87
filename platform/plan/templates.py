"""Workflow templates: named plan skeletons with parameters (package data, ``workflows/*.json``).

A template's step arguments may be placeholders such as ``"{trials}"``, replaced by the
template's parameters (their defaults, overridden by the caller) with types preserved.
The ``hpo-<family>`` templates are the registry's (``tuning_template``): the built-in
families' files are checked against it (``tests/unit/test_families.py``), and a plugin
family gets its template generated.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import PlanError
from mlpilot.platform.ml import families
from mlpilot.platform.plan import Plan, Step

if TYPE_CHECKING:
    from mlpilot.platform.ml.families import Family

_PLACEHOLDER = re.compile(r"^\{(\w+)\}$")


@dataclass(frozen=True)
class WorkflowTemplate:
    name: str
    description: str
    steps: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)
    engine: str = "auto"

    @property
    def tools(self) -> list[str]:
        return [s["tool"] for s in self.steps]

    def instantiate(
        self,
        params: dict[str, Any] | None = None,
        *,
        data_path: str | None = None,
        target: str | None = None,
        task: str | None = None,
    ) -> Plan:
        values = {**self.params, **(params or {})}
        unknown = sorted(set(params or {}) - set(self.params))
        if unknown:
            raise PlanError(
                f"template {self.name!r} has no parameter {', '.join(map(repr, unknown))}",
                hint=f"its parameters: {', '.join(self.params) or 'none'}",
            )
        steps = []
        for raw in copy.deepcopy(self.steps):
            args = {k: _fill(v, values) for k, v in raw.get("args", {}).items()}
            if raw["tool"] == "load_data":
                if data_path is None:
                    raise PlanError(
                        f"template {self.name!r} loads data", hint="pass the data file with --data"
                    )
                args["path"] = data_path
                args["target"] = target if target is not None else args.get("target")
                if task:
                    args["task"] = task
            steps.append(Step(raw["tool"], args))
        return Plan(steps=steps, template=self.name, engine=self.engine, rationale=self.description)


def _fill(value: Any, values: dict[str, Any]) -> Any:
    if isinstance(value, str):
        match = _PLACEHOLDER.match(value)
        if match:
            return values[match.group(1)]
    return value


class TemplateCatalog:
    def __init__(self, templates: list[WorkflowTemplate]) -> None:
        self._by_name = {t.name: t for t in templates}

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def get(self, name: str) -> WorkflowTemplate:
        try:
            return self._by_name[name]
        except KeyError:
            raise PlanError(
                f"no workflow template named {name!r}",
                hint=f"choose one of: {', '.join(self.names())}",
            ) from None


def tuning_template(family: Family) -> dict[str, Any]:
    """``hpo-<family>``: tune one family with Optuna, then rank the features."""
    described = family.described or family.label
    return {
        "name": f"hpo-{family.name}",
        "description": (
            f"Tune a {described} with Optuna (TPE, cross-validated), then rank the features."
        ),
        "params": {"trials": 50, "metric": None},
        "engine": "auto",
        "steps": [
            {"tool": "load_data", "args": {}},
            {"tool": "clean_data", "args": {}},
            {"tool": "engineer_features", "args": {}},
            {
                "tool": "optimize_model",
                "args": {"model": family.name, "trials": "{trials}", "metric": "{metric}"},
            },
            {"tool": "feature_importance", "args": {"top_k": 10}},
        ],
    }


def builtin_templates() -> TemplateCatalog:
    """The package's templates, and a generated ``hpo-<family>`` for each plan family
    without a file (a plugin's, once it is loaded)."""
    return _templates(families.plan_names())


@lru_cache(maxsize=4)
def _templates(plan_families: tuple[str, ...]) -> TemplateCatalog:
    folder = resources.files("mlpilot.platform.plan").joinpath("workflows")
    templates = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            templates.append(WorkflowTemplate(**data))
    named = {t.name for t in templates}
    for name in plan_families:
        data = tuning_template(families.get(name))
        if data["name"] not in named:
            templates.append(WorkflowTemplate(**data))
    return TemplateCatalog(templates)
