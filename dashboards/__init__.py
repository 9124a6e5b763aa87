"""The Dash dashboard: runs, run detail, compare, GPU speedups, Optuna studies, models, chat.

``create_app()`` builds the app (``use_pages=True``; one small file per page under
``pages/``; all data access in ``queries``); ``serve()`` runs it on 127.0.0.1 by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

__all__ = ["create_app", "serve"]


def create_app(settings: Settings | None = None) -> Any:
    from mlpilot.dashboards.app import create_app as _create

    return _create(settings)


def serve(host: str = "127.0.0.1", port: int = 8050, settings: Settings | None = None) -> None:
    from mlpilot.dashboards.app import serve as _serve

    _serve(host, port, settings)
