"""``mlpilot datasets``: generate the bundled sample data."""

from __future__ import annotations

from typing import Annotated

import typer

from mlpilot.platform.cli._output import console, handle_errors

app = typer.Typer(help="Generate sample data sets (no downloads).", no_args_is_help=True)


@app.command("sales")
@handle_errors
def sales(
    rows: Annotated[int, typer.Option("--rows", "-n", min=1, help="Number of rows.")] = 10_000,
    out: Annotated[
        str, typer.Option("--out", "-o", help="Output file (.csv, .parquet or .jsonl).")
    ] = "sales.csv",
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 7,
) -> None:
    """A retail sales table whose true drivers are known (see the module docstring)."""
    from mlpilot.platform.datasets import SALES_TRUE_DRIVERS, make_sales, write_table

    path = write_table(make_sales(rows, seed), out)
    console(stderr=True).print(
        f"wrote {rows} rows to {path} (target: sales; true drivers: {', '.join(SALES_TRUE_DRIVERS)})",
        markup=False,
    )
