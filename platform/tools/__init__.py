"""Tools: what a plan may call. ``@tool`` builds a schema; the registry looks tools up.

``default_registry()`` holds the canonical tools, tools from the ``mlpilot.tools``
entry-point group and, optionally, tools from user modules (``--plugins``). A ``--plugins``
name (or one in the ``family_plugins`` setting) that provides model families registers
them (``ml/families``), and the tools' ``model`` argument then accepts them too.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterable

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.tools._registry import TOOL_KINDS, Bounds, Tool, ToolRegistry, tool
from mlpilot.platform.tools.builtin import (
    BUILTIN_TOOLS,
    CLASSIFICATION_METRICS,
    METRICS,
    MODELS,
    REGRESSION_METRICS,
)

__all__ = [
    "BUILTIN_TOOLS",
    "CLASSIFICATION_METRICS",
    "METRICS",
    "MODELS",
    "REGRESSION_METRICS",
    "TOOL_KINDS",
    "Bounds",
    "Tool",
    "ToolRegistry",
    "default_registry",
    "tool",
    "tools_in_module",
]

ENTRY_POINT_GROUP = "mlpilot.tools"


def tools_in_module(module_name: str) -> list[Tool]:
    """The ``Tool`` objects a module defines (its ``__all__`` when present)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MlpilotError(
            f"cannot import plugin module {module_name!r}: {exc}",
            hint="pass an importable module name to --plugins (on PYTHONPATH or installed)",
        ) from None
    names = getattr(module, "__all__", None) or dir(module)
    return [obj for n in names if isinstance(obj := getattr(module, n, None), Tool)]


def _entry_point_tools() -> list[Tool]:
    from importlib.metadata import entry_points

    found: list[Tool] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if isinstance(obj, Tool):
            found.append(obj)
        elif isinstance(obj, (list, tuple)):
            found.extend(t for t in obj if isinstance(t, Tool))
    return found


def default_registry(plugins: Iterable[str] = ()) -> ToolRegistry:
    """Built-in tools, then entry-point tools, then tools from ``plugins`` modules (a name
    that provides model families instead is not imported as a tool module)."""
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.ml import families

    plugins = list(plugins)
    families.load_plugins(get_settings().family_plugins)
    family_packages = {f.provider for f in families.load_plugins(plugins, strict=False)}
    family_packages |= families.registry().loaded
    registry = ToolRegistry(_with_models(t, families.plan_names()) for t in BUILTIN_TOOLS)
    extra = _entry_point_tools()
    for module_name in plugins:
        if module_name not in family_packages:
            extra.extend(tools_in_module(module_name))
    for t in extra:
        if t.name in registry and registry.get(t.name) is not t:
            raise MlpilotError(
                f"plugin tool {t.name!r} clashes with a tool of the same name",
                hint="rename the plugin tool",
            )
        if t.name not in registry:
            registry.add(t)
    return registry


def _with_models(t: Tool, names: tuple[str, ...]) -> Tool:
    """``t`` with its ``model`` argument accepting every registered family (plugins'
    included); the built-in schema when no plugin family is loaded."""
    spec = t.parameters["properties"].get("model")
    wanted = [*names, "auto"]
    if spec is None or list(spec.get("enum", ())) == wanted:
        return t
    parameters = {**t.parameters, "properties": dict(t.parameters["properties"])}
    parameters["properties"]["model"] = {**spec, "enum": wanted}
    return dataclasses.replace(t, parameters=parameters)
