"""``mlpilot tools list`` and ``mlpilot templates list``."""

from __future__ import annotations

from typing import Annotated

import typer

from mlpilot.platform.cli._output import console, handle_errors, print_json

tools_app = typer.Typer(help="The tools a plan may use.", no_args_is_help=True)
templates_app = typer.Typer(help="Workflow templates (plan skeletons).", no_args_is_help=True)


def _signature(schema: dict) -> str:
    parts = []
    for name, spec in schema["properties"].items():
        kinds = spec.get("type")
        kinds = "|".join(kinds) if isinstance(kinds, list) else kinds
        default = f"={spec['default']!r}" if "default" in spec else ""
        parts.append(f"{name}: {kinds}{default}")
    return ", ".join(parts)


@tools_app.command("list")
@handle_errors
def list_tools(
    plugins: Annotated[
        list[str] | None, typer.Option("--plugins", help="Also load tools from this module.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Name, kind and arguments of every tool."""
    from mlpilot.platform.tools import default_registry

    registry = default_registry(plugins or ())
    if json_out:
        print_json(
            [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "description": t.description,
                    "parameters": t.parameters,
                }
                for t in registry
            ]
        )
        return
    from rich.table import Table

    table = Table("tool", "kind", "arguments", "description", show_lines=False)
    for t in registry:
        table.add_row(t.name, t.kind, _signature(t.parameters), t.description)
    console().print(table)


@templates_app.command("list")
@handle_errors
def list_templates(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every workflow template with its steps and parameters."""
    from mlpilot.platform.plan.templates import builtin_templates

    catalog = builtin_templates()
    if json_out:
        print_json(
            [
                {"name": t.name, "description": t.description, "params": t.params, "steps": t.steps}
                for t in catalog
            ]
        )
        return
    from rich.table import Table

    table = Table("template", "steps", "parameters", "description")
    for t in sorted(catalog, key=lambda t: t.name):
        params = ", ".join(f"{k}={v!r}" for k, v in t.params.items())
        table.add_row(t.name, " → ".join(t.tools), params, t.description)
    console().print(table)
