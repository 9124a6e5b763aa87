"""``mlpilot dashboard``: serve the Dash app (127.0.0.1 by default, never in debug mode)."""

from __future__ import annotations

from typing import Annotated

import typer

from mlpilot.platform.cli._output import console, handle_errors


@handle_errors
def dashboard(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Interface to bind; any but 127.0.0.1/localhost/::1 needs MLPILOT_DASH_USER and MLPILOT_DASH_PASSWORD.",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8050,
) -> None:
    """Compare runs, GPU speedups and Optuna studies in the browser."""
    from mlpilot.dashboards import serve
    from mlpilot.dashboards.security import check_bind
    from mlpilot.platform.config import get_settings

    settings = get_settings()
    check_bind(host, settings)  # before anything is imported or printed
    console(stderr=True).print(
        f"mlpilot dashboard on http://{host}:{port}/ (Ctrl-C to stop)", markup=False
    )
    serve(host=host, port=port, settings=settings)
