"""The ``@tool`` decorator, the ``Tool`` it builds and the ``ToolRegistry``.

A tool's JSON schema comes from its type hints and the ``Args:`` section of its
docstring (as in smolagents). Arguments are validated against that schema before a tool
is planned or run, and every error is written so that an LLM can repair its call.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from mlpilot.platform.errors import PlanError

ToolKind = Literal["pipeline", "query", "directive"]
TOOL_KINDS: tuple[str, ...] = ("pipeline", "query", "directive")
_CONTEXT_PARAM = "context"


@dataclass(frozen=True)
class Bounds:
    """Inclusive numeric bounds, used as ``Annotated[int, Bounds(1, 10000)]``."""

    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class Tool:
    """A named capability the planner can call, with a JSON schema for its arguments."""

    name: str
    kind: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    stage: str | None = None
    runtime: str | None = None
    arg_docs: dict[str, str] = field(default_factory=dict)

    @property
    def builtin(self) -> bool:
        """One of mlpilot's own tools (a plugin's paths are checked more strictly)."""
        return self.func.__module__.startswith("mlpilot.platform.tools")

    @property
    def argument_names(self) -> list[str]:
        return list(self.parameters["properties"])

    @property
    def defaults(self) -> dict[str, Any]:
        return {
            name: spec["default"]
            for name, spec in self.parameters["properties"].items()
            if "default" in spec
        }

    def function_schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def validate(self, args: dict[str, Any] | None) -> dict[str, Any]:
        """Check ``args`` against the schema; return them with defaults filled in."""
        args = dict(args or {})
        problems: list[str] = []
        props = self.parameters["properties"]
        for name in args:
            if name not in props:
                valid = ", ".join(props) or "none"
                problems.append(f"unknown argument {name!r} (valid arguments: {valid})")
        for name in self.parameters.get("required", []):
            if name not in args:
                problems.append(f"missing required argument {name!r}")
        clean: dict[str, Any] = {}
        for name, spec in props.items():
            if name not in args:
                if "default" in spec:
                    clean[name] = _copy(spec["default"])
                continue
            value, problem = _check_value(args[name], spec)
            if problem:
                problems.append(f"argument {name!r} {problem}")
            else:
                clean[name] = value
        if problems:
            raise PlanError(f"{self.name}: " + "; ".join(problems))
        return clean

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


def _check_value(value: Any, spec: dict[str, Any]) -> tuple[Any, str | None]:
    allowed = spec.get("type", [])
    allowed = [allowed] if isinstance(allowed, str) else list(allowed)
    value = _normalize_number(value, allowed)
    matched = next((t for t in allowed if _is_type(value, t)), None)
    if allowed and matched is None:
        want = " or ".join("null" if t == "null" else f"a {t}" for t in allowed)
        return value, f"must be {want} (got {value!r})"
    if "enum" in spec and value not in spec["enum"] and value is not None:
        choices = ", ".join(repr(c) for c in spec["enum"] if c is not None)
        return value, f"must be one of {choices} (got {value!r})"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in spec and value < spec["minimum"]:
            return value, f"must be at least {spec['minimum']} (got {value!r})"
        if "maximum" in spec and value > spec["maximum"]:
            return value, f"must be at most {spec['maximum']} (got {value!r})"
    if matched == "array" and "items" in spec:
        items = []
        for i, item in enumerate(value):
            checked, problem = _check_value(item, spec["items"])
            if problem:
                return value, f"item {i} {problem}"
            items.append(checked)
        value = items
    return value, None


def _normalize_number(value: Any, allowed: list[str]) -> Any:
    # JSON has one number type; an LLM may send 50.0 for 50 or "50" for 50.
    if isinstance(value, bool):
        return value
    if "integer" in allowed and isinstance(value, float) and value.is_integer():
        return int(value)
    numeric = "integer" in allowed or "number" in allowed
    if (
        isinstance(value, str)
        and numeric
        and "string" not in allowed
        and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", value)
    ):
        number = float(value)
        return int(number) if "integer" in allowed and number.is_integer() else number
    return value


def _is_type(value: Any, json_type: str) -> bool:
    if json_type in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES[json_type])


def _schema_for(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = _schema_for(args[0])
        for meta in args[1:]:
            if isinstance(meta, Bounds):
                if meta.minimum is not None:
                    schema["minimum"] = meta.minimum
                if meta.maximum is not None:
                    schema["maximum"] = meta.maximum
        return schema
    if origin in (typing.Union, types.UnionType):
        parts = [_schema_for(a) for a in args]
        merged: dict[str, Any] = {"type": []}
        for part in parts:
            for t in [part["type"]] if isinstance(part["type"], str) else part["type"]:
                if t not in merged["type"]:
                    merged["type"].append(t)
            for key, val in part.items():
                if key != "type":
                    merged[key] = val
        if "enum" in merged and "null" in merged["type"]:
            merged["enum"] = [*merged["enum"], None]
        return merged
    if origin is Literal:
        kinds = {type(a) for a in args}
        json_type = "string" if kinds == {str} else "integer" if kinds == {int} else "string"
        return {"type": json_type, "enum": list(args)}
    if origin in (list, tuple) or hint in (list, tuple):
        item = _schema_for(args[0]) if args else {"type": "string"}
        return {"type": "array", "items": item}
    if origin is dict or hint is dict:
        return {"type": "object"}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if hint in simple:
        return {"type": simple[hint]}
    if hint is Any:
        return {"type": ["string", "number", "boolean", "object", "array", "null"]}
    raise TypeError(f"@tool cannot build a JSON schema for type hint {hint!r}")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args:`` entries."""
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    description = " ".join(head.split())
    arg_docs: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        if re.match(r"^\S", line):  # a new section (Returns:, Raises:) ends Args
            break
        match = re.match(r"^\s+(\w+)\s*(\([^)]*\))?:\s*(.*)$", line)
        if match:
            current = match.group(1)
            arg_docs[current] = match.group(3).strip()
        elif current and line.strip():
            arg_docs[current] += " " + line.strip()
    return description, arg_docs


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    kind: str = "pipeline",
    stage: str | None = None,
    runtime: str | None = None,
) -> Any:
    """Turn a typed, documented function into a :class:`Tool`.

    ``kind`` is ``pipeline`` (a step of the generated script, run by the function named
    in ``runtime`` as ``module:function``), ``query`` (answered at once in-process by the
    decorated function, which may take a ``context`` first argument), or ``directive``
    (changes how the plan runs, e.g. ``compare_engines``).
    """

    def build(fn: Callable[..., Any]) -> Tool:
        if kind not in TOOL_KINDS:
            raise ValueError(f"tool kind must be one of {', '.join(TOOL_KINDS)}, not {kind!r}")
        if kind == "pipeline" and not runtime:
            raise ValueError(f"pipeline tool {fn.__name__!r} needs runtime='module:function'")
        description, arg_docs = _parse_docstring(fn.__doc__ or "")
        if not description:
            raise ValueError(f"tool {fn.__name__!r} needs a docstring describing it")
        hints = typing.get_type_hints(fn, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in inspect.signature(fn).parameters.values():
            if param.name == _CONTEXT_PARAM:
                continue
            if param.name not in hints:
                raise TypeError(f"tool {fn.__name__!r}: argument {param.name!r} has no type hint")
            if param.name not in arg_docs:
                raise ValueError(
                    f"tool {fn.__name__!r}: argument {param.name!r} is not documented under Args:"
                )
            schema = _schema_for(hints[param.name])
            schema["description"] = arg_docs[param.name]
            if param.default is inspect.Parameter.empty:
                required.append(param.name)
            else:
                schema["default"] = param.default
            properties[param.name] = schema
        parameters = {"type": "object", "properties": properties, "required": required}
        return Tool(
            name=name or fn.__name__,
            kind=kind,
            description=description,
            parameters=parameters,
            func=fn,
            stage=stage,
            runtime=runtime,
            arg_docs=arg_docs,
        )

    return build(func) if func is not None else build


class ToolRegistry:
    """An explicit set of tools, looked up by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, new: Tool, *, replace: bool = False) -> None:
        if new.name in self._tools and not replace:
            raise ValueError(f"a tool named {new.name!r} is already registered")
        self._tools[new.name] = new

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise PlanError(
                f"unknown tool {name!r}",
                hint=f"valid tools: {', '.join(sorted(self._tools))}",
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self, kind: str | None = None) -> list[str]:
        return [t.name for t in self if kind is None or t.kind == kind]

    def function_schemas(self) -> list[dict[str, Any]]:
        return [t.function_schema() for t in self]
