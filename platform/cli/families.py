"""``mlpilot families list``: the model families, their facts and who provided them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from mlpilot.platform.cli._output import console, handle_errors, print_json

if TYPE_CHECKING:
    from mlpilot.platform.ml.families import FamilyRegistry

app = typer.Typer(help="The model families mlpilot trains.", no_args_is_help=True)

COLUMNS = ("name", "family", "plan", "auto", "native categories", "GPU", "default for", "from")


def rows(registry: FamilyRegistry) -> list[tuple[str, ...]]:
    """One row of ``COLUMNS`` per family, in the registry's order."""
    out = []
    for family in registry:
        facts = family.describe()
        out.append(
            (
                f"`{family.name}`",
                family.label,
                "yes" if facts["plan"] else "search only",
                "yes" if facts["auto"] else "no",
                "yes" if facts["native_categorical"] else "no",
                facts["gpu"] or "no",
                ", ".join(facts["defaults"]) or "-",
                facts["provider"],
            )
        )
    return out


def markdown_table(registry: FamilyRegistry) -> str:
    """The README's family table (``tests/unit/test_families.py`` compares the two)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(registry)]
    return "\n".join(lines) + "\n"


@app.command("list")
@handle_errors
def list_families(
    plugins: Annotated[
        list[str] | None,
        typer.Option("--plugins", help="Also load the families of this plugin package."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Every model family: what a plan and a search may use, GPU support, its provider."""
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.ml import families

    families.load_plugins([*get_settings().family_plugins, *(plugins or ())])
    registry = families.registry()
    if json_out:
        print_json([f.describe() for f in registry])
        return
    from rich.table import Table

    table = Table(*COLUMNS)
    for row in rows(registry):
        table.add_row(*(cell.strip("`") for cell in row))
    console().print(table)
