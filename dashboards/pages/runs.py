"""Runs: every agent run, paged, filtered and sorted by the store."""

from __future__ import annotations

import re
from typing import Any

import dash
from dash import Input, Output, callback, dash_table, dcc, html

from mlpilot.dashboards import queries
from mlpilot.dashboards.components import STATUS_COLORS
from mlpilot.tracking.vocab import ACTIVE_STATES, TERMINAL_STATES

dash.register_page(__name__, path="/", name="Runs", title="mlpilot · runs")

STATUSES = [*TERMINAL_STATES, *ACTIVE_STATES]
PAGE_SIZE = 25
COLUMNS = [
    {"id": "created", "name": "created"},
    {"id": "status", "name": "status"},
    {"id": "run", "name": "run", "presentation": "markdown"},
    {"id": "prompt", "name": "prompt"},
    {"id": "template", "name": "template"},
    {"id": "engine", "name": "engine"},
    {"id": "metric", "name": "metric"},
    {"id": "value", "name": "value", "type": "numeric", "format": {"specifier": ".5g"}},
    {"id": "experiment", "name": "experiment"},
    {"id": "session", "name": "session"},
]
_HEX = re.compile(r"^[0-9a-f]{8,64}$")


def layout(**_: Any) -> html.Div:
    ui = queries.mlflow_ui_url()
    return html.Div(
        [
            html.H2("Runs"),
            html.Div(
                [
                    dcc.Dropdown(
                        id="runs-experiment",
                        options=queries.experiments(),
                        placeholder="experiment",
                    ),
                    dcc.Dropdown(id="runs-status", options=STATUSES, placeholder="status"),
                    dcc.Input(id="runs-session", placeholder="session id", debounce=True),
                    dcc.Input(id="runs-prompt", placeholder="prompt contains…", debounce=True),
                    dcc.Dropdown(
                        id="runs-metric",
                        options=queries.metric_names(),
                        placeholder="metric column",
                    ),
                ],
                className="filters",
            ),
            html.Div(id="runs-total"),
            html.A("open the MLflow UI", href=ui, target="_blank", id="runs-mlflow-link")
            if ui
            else None,
            dash_table.DataTable(
                id="runs-table",
                columns=COLUMNS,
                page_current=0,
                page_size=PAGE_SIZE,
                page_action="custom",
                sort_action="custom",
                sort_mode="single",
                sort_by=[{"column_id": "created", "direction": "desc"}],
                markdown_options={"html": False, "link_target": "_self"},
                style_cell={
                    "textAlign": "left",
                    "maxWidth": "28rem",
                    "overflow": "hidden",
                    "textOverflow": "ellipsis",
                    "fontSize": "0.9rem",
                },
                style_data_conditional=[
                    {
                        "if": {"filter_query": f'{{status}} = "{s}"', "column_id": "status"},
                        "color": "white",
                        "backgroundColor": c,
                        "fontWeight": "600",
                    }
                    for s, c in STATUS_COLORS.items()
                ],
                tooltip_duration=None,
            ),
        ]
    )


_SORT_KEYS = {
    "created": "created_at",
    "status": "status",
    "experiment": "experiment",
    "session": "session_id",
    "template": "template",
}


@callback(
    Output("runs-table", "data"),
    Output("runs-table", "page_count"),
    Output("runs-total", "children"),
    Input("runs-table", "page_current"),
    Input("runs-table", "page_size"),
    Input("runs-table", "sort_by"),
    Input("runs-experiment", "value"),
    Input("runs-status", "value"),
    Input("runs-session", "value"),
    Input("runs-prompt", "value"),
    Input("runs-metric", "value"),
)
def load_page(
    page: int,
    size: int,
    sort_by: list[dict[str, str]],
    experiment: str | None,
    status: str | None,
    session: str | None,
    prompt: str | None,
    metric: str | None,
) -> tuple[list[dict[str, Any]], int, str]:
    sort = (sort_by or [{"column_id": "created", "direction": "desc"}])[0]
    column = sort["column_id"]
    key = _SORT_KEYS.get(column, f"test_{metric}" if column == "value" and metric else "created_at")
    result = queries.list_runs(
        experiment=experiment,
        status=status,
        session=(session or "").strip() or None,
        prompt=(prompt or "").strip() or None,
        sort_by=key,
        descending=sort["direction"] == "desc",
        page=page or 0,
        page_size=size or PAGE_SIZE,
        metric=metric,
    )
    rows = []
    for row in result.rows:
        run_id = row["run_id"]
        link = f"[{run_id[:8]}](/run/{run_id})" if _HEX.match(run_id) else run_id
        created = row["created_at"]
        rows.append(
            {
                "created": created.strftime("%Y-%m-%d %H:%M:%S")
                if hasattr(created, "strftime")
                else str(created or ""),
                "status": row["status"],
                "run": link,
                "prompt": row["prompt"][:200],
                "template": row["template"],
                "engine": row["engine"],
                "metric": row["metric"],
                "value": row["value"],
                "experiment": row["experiment"],
                "session": row["session_id"],
            }
        )
    pages = max(1, -(-result.total // (size or PAGE_SIZE)))
    return rows, pages, f"{result.total} runs"
