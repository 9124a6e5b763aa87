"""Runs: every agent run, paged, filtered and sorted by the store; rows selected for
comparison, and running runs refreshed live with their search's progress."""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote

import dash
from dash import Input, Output, State, callback, dash_table, dcc, html

from mlpilot.dashboards import comparison, queries
from mlpilot.dashboards.components import STATUS_COLORS
from mlpilot.tracking.vocab import ACTIVE_STATES, TERMINAL_STATES, direction

logger = logging.getLogger(__name__)

dash.register_page(__name__, path="/", name="Runs", title="mlpilot · runs")

STATUSES = [*TERMINAL_STATES, *ACTIVE_STATES]
PAGE_SIZE = 25
#: how often the page reads the store again while a run is in progress
REFRESH_MS = 3000
BAR_CELLS = 10
_TEXT_COLUMNS = ("created", "status", "run", "prompt", "template", "planner", "engine")
_HEX = re.compile(r"^[0-9a-f]{8,64}$")


def columns(metric: str | None) -> list[dict[str, Any]]:
    """The table's columns; ``value`` is named after the metric it holds."""
    cols: list[dict[str, Any]] = [{"id": c, "name": c} for c in _TEXT_COLUMNS]
    cols[2]["presentation"] = "markdown"
    if metric:
        arrow = {"minimize": "↓", "maximize": "↑"}[direction(metric)]
        value: dict[str, Any] = {
            "id": "value",
            "name": f"test_{metric} {arrow}",
            "type": "numeric",
            "format": {"specifier": ".4~g"},
        }
    else:  # runs of different tasks: each value says which metric it is
        value = {"id": "value", "name": "main metric"}
    return [
        *cols,
        value,
        {"id": "progress", "name": "progress"},
        {"id": "experiment", "name": "experiment"},
        {"id": "session", "name": "session"},
    ]


def layout(**_: Any) -> html.Div:
    ui = queries.mlflow_ui_url()
    return html.Div(
        [
            html.H2("Runs"),
            _filters(),
            html.Div(
                [
                    html.Span(id="runs-total"),
                    html.Span(id="runs-selection"),
                    html.Span(id="runs-compare"),
                    html.Button("clear selection", id="runs-clear", n_clicks=0),
                    html.A("open the MLflow UI", href=ui, target="_blank", id="runs-mlflow-link")
                    if ui
                    else None,
                ],
                className="filters",
            ),
            html.Div(id="runs-live"),
            _table(),
            dcc.Store(id="runs-selected", storage_type="session", data=[]),
            dcc.Interval(id="runs-refresh", interval=REFRESH_MS, disabled=True),
        ]
    )


def _filters() -> html.Div:
    return html.Div(
        [
            dcc.Dropdown(
                id="runs-experiment", options=queries.experiments(), placeholder="experiment"
            ),
            dcc.Dropdown(id="runs-status", options=STATUSES, placeholder="status"),
            dcc.Input(id="runs-session", placeholder="session id", debounce=True),
            dcc.Input(id="runs-prompt", placeholder="prompt contains…", debounce=True),
            dcc.Dropdown(
                id="runs-metric", options=queries.metric_names(), placeholder="metric column"
            ),
        ],
        className="filters",
    )


def _table() -> dash_table.DataTable:
    return dash_table.DataTable(
        id="runs-table",
        columns=columns(None),
        row_selectable="multi",
        selected_rows=[],
        page_current=0,
        page_size=PAGE_SIZE,
        page_action="custom",
        sort_action="custom",
        sort_mode="single",
        filter_action="custom",
        filter_query="",
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
    )


@callback(
    Output("runs-table", "data"),
    Output("runs-table", "page_count"),
    Output("runs-total", "children"),
    Output("runs-table", "columns"),
    Output("runs-table", "selected_rows"),
    Output("runs-refresh", "disabled"),
    Output("runs-live", "children"),
    Input("runs-table", "page_current"),
    Input("runs-table", "page_size"),
    Input("runs-table", "sort_by"),
    Input("runs-table", "filter_query"),
    Input("runs-experiment", "value"),
    Input("runs-status", "value"),
    Input("runs-session", "value"),
    Input("runs-prompt", "value"),
    Input("runs-metric", "value"),
    Input("runs-refresh", "n_intervals"),
    State("runs-selected", "data"),
)
def load_page(
    page: int,
    size: int,
    sort_by: list[dict[str, str]],
    filter_query: str | None,
    experiment: str | None,
    status: str | None,
    session: str | None,
    prompt: str | None,
    metric: str | None,
    _tick: int | None,
    selected: list[str] | None,
) -> tuple[Any, ...]:
    sort = (sort_by or [{"column_id": "created", "direction": "desc"}])[0]
    result = queries.list_runs(
        experiment=experiment,
        status=status,
        session=(session or "").strip() or None,
        prompt=(prompt or "").strip() or None,
        sort_by=sort["column_id"],
        descending=sort["direction"] == "desc",
        page=page or 0,
        page_size=size or PAGE_SIZE,
        metric=metric,
        filter_query=filter_query,
    )
    rows = [table_row(r, metric) for r in result.rows]
    chosen = set(selected or [])
    pages = max(1, -(-result.total // (size or PAGE_SIZE)))
    running = queries.active_run_count()
    return (
        rows,
        pages,
        f"{result.total} runs",
        columns(metric),
        [i for i, r in enumerate(rows) if r["id"] in chosen],
        running == 0,  # the refresh stops when nothing runs
        _live(result.rows),
    )


def table_row(row: dict[str, Any], metric: str | None) -> dict[str, Any]:
    run_id = row["run_id"]
    created = row["created_at"]
    value: Any = row["value"]
    if not metric:
        value = f"{row['metric']} {comparison.sig(value)}" if row["metric"] else ""
    return {
        "id": run_id,
        "created": created.strftime("%Y-%m-%d %H:%M:%S")
        if hasattr(created, "strftime")
        else str(created or ""),
        "status": row["status"],
        "run": f"[{run_id[:8]}](/run/{run_id})" if _HEX.match(run_id) else run_id,
        "prompt": row["prompt"][:200],
        "template": row["template"],
        "planner": row["planner"],
        "engine": row["engine"],
        "value": value,
        "progress": progress_text(row.get("progress")),
        "experiment": row["experiment"],
        "session": row["session_id"],
    }


def progress_text(progress: dict[str, Any] | None) -> str:
    """``▰▰▰▱▱▱▱▱▱▱ 12/40 trials`` (or the share of a time budget used)."""
    if not progress:
        return ""
    share = _share(progress)
    bar = "" if share is None else "▰" * round(share * BAR_CELLS)
    bar += "" if share is None else "▱" * (BAR_CELLS - len(bar))
    total = progress.get("total")
    count = f"{progress['done']}/{total}" if total else f"{progress['done']}"
    return f"{bar} {count} trials".strip()


def _share(progress: dict[str, Any]) -> float | None:
    total, budget, elapsed = (
        progress.get("total"),
        progress.get("budget_s"),
        progress.get("elapsed_s"),
    )
    if total:
        return min(1.0, progress["done"] / total)
    if budget and elapsed is not None:
        return min(1.0, elapsed / budget)
    return None


def _live(rows: list[dict[str, Any]]) -> Any:
    """A progress bar per running search on this page."""
    bars = []
    for row in rows:
        progress = row.get("progress")
        if not progress or row["status"] not in ACTIVE_STATES:
            continue
        share = _share(progress)
        bars.append(
            html.Div(
                [
                    html.Span(f"{row['run_id'][:8]} · {row['prompt'][:60]} "),
                    html.Progress(
                        value=str(round((share or 0) * 100)),
                        max="100",
                        className="runs-progress",
                    ),
                    html.Span(f" {progress_text(progress).split(' ', 1)[-1]}"),
                ],
                className="runs-live-row",
            )
        )
    return html.Div(bars, id="runs-live-bars") if bars else None


@callback(
    Output("runs-selected", "data"),
    Input("runs-table", "selected_rows"),
    State("runs-table", "data"),
    State("runs-selected", "data"),
    prevent_initial_call=True,
)
def select(
    selected_rows: list[int] | None, data: list[dict[str, Any]] | None, kept: list[str] | None
) -> list[str]:
    """The selection across pages and filters: this page's ticks replace this page's part."""
    data = data or []
    on_page = {r["id"] for r in data}
    ticked = [data[i]["id"] for i in selected_rows or [] if i < len(data)]
    others = [r for r in kept or [] if r not in on_page]
    return [*others, *ticked]


@callback(
    Output("runs-selected", "data", allow_duplicate=True),
    Output("runs-table", "selected_rows", allow_duplicate=True),
    Input("runs-clear", "n_clicks"),
    prevent_initial_call=True,
)
def clear(_clicks: int) -> tuple[list[str], list[int]]:
    return [], []


@callback(
    Output("runs-selection", "children"),
    Output("runs-compare", "children"),
    Input("runs-selected", "data"),
)
def compare_link(selected: list[str] | None) -> tuple[str, Any]:
    selected = selected or []
    count = f"{len(selected)} selected" if selected else ""
    if len(selected) < 2:
        return count, html.Span("tick two or more runs to compare them", className="empty")
    chosen = selected[: queries.MAX_COMPARE]
    label = f"compare selected ({len(chosen)})"
    if len(selected) > len(chosen):
        label += f": the first {queries.MAX_COMPARE}"
    href = "/compare?runs=" + quote(",".join(chosen), safe=",")
    return count, dcc.Link(label, href=href, id="runs-compare-link", className="button")
