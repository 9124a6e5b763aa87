"""Codegen: a validated plan → a readable, standalone ``pipeline.py``.

Values are rendered as Python literals (``repr``), never spliced as code; column names
are strings, never identifiers. Each pipeline step becomes an import of its runtime
function and one call with keyword arguments. The rendered script is parsed and checked
before it is returned: it may only call the step functions it imports.
"""

from __future__ import annotations

import ast
import pprint
from functools import lru_cache
from typing import Any

from mlpilot.platform.errors import PlanError
from mlpilot.platform.plan import Plan
from mlpilot.platform.tools import ToolRegistry

__all__ = ["literal", "render_pipeline"]

DEFAULT_SEED = 42
_LITERAL_TYPES = (str, int, float, bool, type(None))


def literal(value: Any) -> str:
    """``repr`` of a JSON-like value, refusing anything that is not a plain literal."""
    _check_literal(value)
    text = repr(value)
    if ast.literal_eval(text) != value and value == value:  # NaN is never equal to itself
        raise PlanError(f"value {text[:60]} does not round-trip as a Python literal")
    return text


def literal_block(value: Any) -> str:
    _check_literal(value)
    text = pprint.pformat(value, indent=1, width=88, sort_dicts=False)
    if ast.literal_eval(text) != value:
        raise PlanError("the plan does not round-trip as a Python literal")
    return text


def _check_literal(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PlanError(f"argument keys must be strings, not {type(key).__name__}")
            _check_literal(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_literal(item)
    elif not isinstance(value, _LITERAL_TYPES):
        raise PlanError(f"argument values must be JSON-like literals, not {type(value).__name__}")


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mlpilot.platform.codegen", "templates"),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["literal"] = literal
    env.filters["literal_block"] = literal_block
    return env


def _split_runtime(runtime: str) -> tuple[str, str]:
    module, _, function = runtime.partition(":")
    if (
        not function
        or not all(part.isidentifier() for part in module.split("."))
        or not function.isidentifier()
    ):
        raise PlanError(f"tool runtime {runtime!r} must look like 'package.module:function'")
    return module, function


def execution_order(plan: Plan, registry: ToolRegistry) -> list[Any]:
    """Steps in the order they run: importance after the model steps (it explains the final model)."""
    from mlpilot.platform.plan import STAGE_ORDER

    def rank(item: tuple[int, Any]) -> tuple[int, int]:
        index, step = item
        stage = registry.get(step.tool).stage
        if stage == "importance":
            return (STAGE_ORDER.index("importance"), index)
        return (0, index)

    return [step for _, step in sorted(enumerate(plan.steps), key=rank)]


def render_pipeline(
    plan: Plan,
    registry: ToolRegistry,
    *,
    data_path: str | None,
    prompt: str = "",
    seed: int = DEFAULT_SEED,
    version: str = "",
    experiment: str | None = None,
) -> str:
    """Render ``pipeline.py`` for a validated plan (``experiment``: where a re-run logs)."""
    imports: dict[str, list[str]] = {}
    aliases: dict[str, str] = {}
    calls = []
    runtime: dict[str, dict[str, str]] = {}
    for step in execution_order(plan, registry):
        tool = registry.get(step.tool)
        if tool.kind == "query":
            raise PlanError(f"query tool {tool.name!r} answers in-process and has no pipeline step")
        if tool.kind != "pipeline" or not tool.runtime:
            continue
        module, function = _split_runtime(tool.runtime)
        key = f"{module}:{function}"
        runtime[step.tool] = {"function": key, "stage": tool.stage or ""}
        if key not in aliases:
            taken = set(aliases.values())
            alias = function if function not in taken else f"{function}_{len(taken)}"
            aliases[key] = alias
            imports.setdefault(module, []).append(
                function if alias == function else f"{function} as {alias}"
            )
        args = ", ".join(
            f"{name}={literal(value)}" for name, value in step.args.items() if name.isidentifier()
        )
        calls.append(f"{aliases[key]}(run{', ' + args if args else ''})")
    import_lines = [
        f"from {module} import {', '.join(sorted(names))}"
        for module, names in sorted(imports.items())
    ]
    source = (
        _environment()
        .get_template("pipeline.py.j2")
        .render(
            version=version,
            imports=import_lines,
            calls=calls,
            prompt=prompt,
            data=data_path,
            seed=seed,
            experiment=experiment,
            plan=plan.to_dict(),
            runtime=runtime,
        )
    )
    verify_script(source, allowed_calls=set(aliases.values()))
    return source


_FRAME_CALLS = {"open_pipeline", "exit_process", "main"}


def verify_script(source: str, allowed_calls: set[str]) -> None:
    """Parse the script and check it calls nothing but its steps and its fixed frame."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:  # a bug in codegen, never the user's fault
        raise PlanError(f"generated pipeline does not parse: {exc}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name not in allowed_calls and name not in _FRAME_CALLS:
                raise PlanError(
                    f"generated pipeline would call {name!r}, which is not a planned step"
                )
