"""A plan's model parameters checked against the family's specification (``Family.params``).

``train_model.params`` reaches the estimator's constructor: a name the family does not
take, a value of the wrong type, or one outside what the family can sensibly fit
(``n_estimators: 1e12``) is refused in one line before anything runs. The search spaces
are the same specifications' search ranges, so they are bounded by construction.
"""

from __future__ import annotations

from typing import Any

from mlpilot.platform.errors import PlanError
from mlpilot.platform.ml import families
from mlpilot.platform.ml.modeling import Param, params_of, resolve_family
from mlpilot.platform.plan.model import Plan


def check_params(plan: Plan, task: str | None) -> None:
    """Raise ``PlanError`` for the first parameter of a ``train_model`` step out of bounds."""
    for number, step in enumerate(plan.steps, start=1):
        params = step.args.get("params") if step.tool == "train_model" else None
        if not params:
            continue
        family = resolve_family(str(step.args.get("model", "auto")))
        if family not in families.registry():
            continue  # the tool's schema refuses unknown families with its own message
        tasks = (
            (task,)
            if task in ("classification", "regression")
            else ("classification", "regression")
        )
        known = {p.name: p for t in tasks for p in params_of(family, t)}
        for name, value in params.items():
            problem = _problem(known, name, value)
            if problem:
                raise PlanError(
                    f"step {number} (train_model): params.{name}={value!r} is refused: {problem}",
                    hint=f"{family} takes: {', '.join(sorted(known))}",
                )


def _problem(known: dict[str, Param], name: str, value: Any) -> str | None:
    param = known.get(name)
    if param is None:
        return "not a parameter mlpilot sets for this model family"
    if param.kind == "choice":
        return None if value in param.choices else f"choose one of {list(param.choices)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "a whole number is needed" if param.kind == "int" else "a number is needed"
    if param.kind == "int" and not float(value).is_integer():
        return "a whole number is needed"
    low, high = param.bounds or (float("-inf"), float("inf"))
    if not low <= float(value) <= high:
        return f"outside {low:g}…{high:g}"
    return None
