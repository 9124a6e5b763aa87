"""The Dash app: pages under ``dashboards/pages``, data from ``dashboards.queries``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
import flask
from dash import Dash, dcc, html

from mlpilot.dashboards import queries, security
from mlpilot.platform.config import Settings, get_settings

NAV = [
    ("Runs", "/"),
    ("Compare", "/compare"),
    ("GPU speedups", "/speedups"),
    ("Benchmarks", "/benchmarks"),
    ("Studies", "/studies"),
    ("Models", "/models"),
    ("Chat", "/chat"),
]


def max_upload_mb() -> float:
    """MLPILOT_DASH_MAX_UPLOAD_MB: the largest file the chat page takes."""
    return get_settings().dash_max_upload_mb


CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 0; color: #1f2933; background: #f5f7fa; }
.nav { display: flex; gap: 1.2rem; padding: 0.8rem 1.5rem; background: #102a43; }
.nav a { color: #d9e2ec; text-decoration: none; font-weight: 500; }
.nav a:hover { color: #fff; }
.brand { color: #fff !important; font-weight: 700 !important; margin-right: 1rem; }
.page { padding: 1.2rem 1.5rem; }
.card { background: #fff; border-radius: 6px; padding: 0.8rem 1rem; margin-bottom: 1rem; box-shadow: 0 1px 2px rgba(0,0,0,0.08); }
.card h3 { margin-top: 0.2rem; font-size: 1.05rem; }
.badge { color: #fff; border-radius: 10px; padding: 0.1rem 0.55rem; font-size: 0.8rem; font-weight: 600; }
.text-block { white-space: pre-wrap; word-break: break-word; background: #f0f4f8; padding: 0.6rem; border-radius: 4px; max-height: 28rem; overflow: auto; }
.kv th { text-align: left; padding-right: 1rem; font-weight: 500; color: #486581; }
.filters { display: flex; gap: 0.8rem; flex-wrap: wrap; align-items: center; margin-bottom: 0.8rem; }
.filters > * { min-width: 12rem; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.plots img { max-width: 32rem; margin: 0.4rem; border: 1px solid #d9e2ec; }
.empty { color: #829ab1; font-style: italic; }
.chat-message { margin: 0.4rem 0; }
.button { background: #1565c0; color: #fff; border-radius: 4px; padding: 0.3rem 0.8rem; text-decoration: none; font-weight: 500; }
.runs-live-row { margin: 0.2rem 0; font-size: 0.9rem; }
.runs-progress { width: 12rem; vertical-align: middle; }
.compare-swatch { list-style: none; border-left: 0.8rem solid transparent; padding-left: 0.4rem; margin: 0.15rem 0; }
"""


def create_app(settings: Settings | None = None, bind: str = "127.0.0.1") -> Dash:
    """The app, guarded for serving on ``bind`` (whose name joins the allowed Hosts)."""
    settings = settings or get_settings()
    queries.configure(settings)
    here = Path(__file__).resolve().parent
    # Flask cannot find the root of a namespace package (mlpilot) by itself: say where it is.
    server = flask.Flask(
        "mlpilot.dashboards", root_path=str(here), instance_path=str(settings.home / "dashboard")
    )
    app = Dash(
        "mlpilot.dashboards",
        server=server,
        use_pages=True,
        pages_folder=str(here / "pages"),
        assets_folder=str(here / "assets"),
        title="mlpilot",
        suppress_callback_exceptions=True,
        update_title=None,
    )
    app.server.config["MAX_CONTENT_LENGTH"] = int(
        max_upload_mb() * 1024 * 1024 * 1.4
    )  # base64 overhead
    app.index_string = app.index_string.replace("</head>", f"<style>{CSS}</style></head>")
    app.layout = html.Div(
        [
            html.Div(
                [html.A("mlpilot", href="/", className="brand")]
                + [
                    dcc.Link(label, href=href, id=f"nav-{label.lower().replace(' ', '-')}")
                    for label, href in NAV
                ],
                className="nav",
            ),
            html.Div(dash.page_container, className="page"),
        ]
    )
    security.protect(app, settings, bind)
    return app


def serve(host: str = "127.0.0.1", port: int = 8050, settings: Settings | None = None) -> None:
    """Check the address, build the app, warm its queries up, serve it with waitress
    (never Flask's dev server)."""
    settings = settings or get_settings()
    security.check_bind(host, settings)
    app = create_app(settings, host)
    queries.warm_up()  # before listening: the first visit must not pay for it
    security.serve_wsgi(app, host, port)


def upload_folder(session_id: str) -> Path:
    folder = queries.settings().sessions_dir / session_id / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def page_not_found() -> Any:
    return html.Div([html.H2("Not found"), dcc.Link("back to runs", href="/")])
