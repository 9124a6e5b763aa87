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
    "params_schema",
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
    registry = ToolRegistry(_with_families(t, families.plan_names()) for t in BUILTIN_TOOLS)
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


def _with_families(t: Tool, names: tuple[str, ...]) -> Tool:
    """``t`` with its ``model`` argument accepting every registered family (plugins'
    included) and its ``params`` object bounded to the parameters those families take."""
    props = t.parameters["properties"]
    if "model" not in props:
        return t
    properties = dict(props)
    properties["model"] = {**props["model"], "enum": [*names, "auto"]}
    if props.get("params", {}).get("type") == "object":
        # explicit keys and no others: a constrained decoder (llama.cpp, vLLM) cannot fill
        # the object with invented keys up to the token limit, as a weak model otherwise does
        properties["params"] = {
            **props["params"],
            "properties": params_schema(names),
            "additionalProperties": False,
        }
    return dataclasses.replace(t, parameters={**t.parameters, "properties": properties})


def params_schema(names: Iterable[str]) -> dict[str, dict]:
    """Every parameter the families ``names`` take, once, with the widest bounds any of
    them allows (``plan/params.py`` then checks the family a step names)."""
    from mlpilot.platform.ml import families

    merged: dict[str, dict] = {}
    for name in names:
        for param in families.get(name).params:
            merged[param.name] = _widest(merged.get(param.name), param.schema())
    return dict(sorted(merged.items()))


def _widest(old: dict | None, new: dict) -> dict:
    if old is None:
        return new
    if "enum" in old and "enum" in new:
        return {"enum": [*old["enum"], *(c for c in new["enum"] if c not in old["enum"])]}
    if "enum" in old or "enum" in new:
        return {}  # a choice in one family and a number in another: any value
    kind = "integer" if old["type"] == new["type"] == "integer" else "number"
    low, high = min(old["minimum"], new["minimum"]), max(old["maximum"], new["maximum"])
    return {"type": kind, "minimum": low, "maximum": high}
