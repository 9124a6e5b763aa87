"""Compare: up to 100 runs side by side — model metrics, timings, the parameters that
differ and the data sets, the best value per metric marked, and plots in which each run
keeps its colour.

The plots are plotly SVG traces (lines and bars) built here on the server: plotly's
``parcoords`` draws with WebGL (blank in a browser without one, and its shader compiler
needs ``'unsafe-eval'``, which the dashboard's content security policy refuses).
"""

from __future__ import annotations

import logging
from typing import Any

import dash
import plotly.graph_objects as go
from dash import Input, Output, State, callback, dash_table, dcc, html, no_update

from mlpilot.dashboards import comparison, queries
from mlpilot.dashboards.components import empty, plot_text

logger = logging.getLogger(__name__)

dash.register_page(__name__, path="/compare", name="Compare", title="mlpilot · compare")

#: axes of the parallel-coordinates plot, and bar charts: more stop being readable
MAX_AXES = 8
MAX_BARS = 12
#: bars labelled with their value up to this many runs; beyond it the value is in the
#: hover and the tables: Plotly measures each label to place it (100 runs x 3 charts took
#: the browser 0.6 s), and a hundred labels a chart are more than anyone reads
LABELLED_BARS = 20
BEST_STYLE = {"backgroundColor": "#e3f4e8", "fontWeight": "700", "color": "#1b5e20"}
_TABLE_STYLE = {
    "style_cell": {"textAlign": "left", "minWidth": "7rem", "fontSize": "0.9rem"},
    "style_table": {"overflowX": "auto"},
    "style_header": {"fontWeight": "600", "whiteSpace": "normal", "height": "auto"},
}


def layout(runs: str | None = None, **_: Any) -> html.Div:
    chosen = [r for r in (runs or "").split(",") if r][: queries.MAX_COMPARE]
    options = queries.run_options(chosen)
    return html.Div(
        [
            html.H2("Compare runs"),
            dcc.Dropdown(
                id="compare-runs",
                options=options,
                value=chosen,
                multi=True,
                placeholder=f"pick two or more runs (up to {queries.MAX_COMPARE}): type an id or"
                " words of a prompt to search every run",
            ),
            dcc.Checklist(
                id="compare-diff-only",
                options=[{"label": " only the parameters that differ", "value": "diff"}],
                value=["diff"],
                inline=True,
            ),
            dcc.Loading(html.Div(id="compare-body")),
        ]
    )


@callback(
    Output("compare-runs", "options"),
    Input("compare-runs", "search_value"),
    State("compare-runs", "value"),
    prevent_initial_call=True,
)
def _search(text: str | None, chosen: list[str] | None) -> Any:
    """Runs matching what is typed, from the whole store (the picker starts with the
    chosen runs and a few recent ones); the chosen ones stay, or they would lose their
    names."""
    if not isinstance(text, str) or not text.strip():
        return no_update
    return queries.run_options(list(chosen or []), text, queries.SEARCH_OPTIONS)


@callback(
    Output("compare-body", "children"),
    Input("compare-runs", "value"),
    Input("compare-diff-only", "value"),
)
def show(run_ids: list[str] | None, diff_only: list[str] | None) -> Any:
    run_ids = run_ids or []
    if len(run_ids) < 2:
        return empty("pick at least two runs")
    data = queries.compare_view(run_ids)
    rows = data["rows"]
    note = (
        html.P(f"only the first {queries.MAX_COMPARE} runs are compared", className="empty")
        if data["dropped"]
        else None
    )
    params = data["differing_params"] if diff_only else data["param_keys"]
    return html.Div(
        [
            note,
            _legend(rows),
            html.H3("Model metrics"),
            _table("compare-metrics", "metric", rows, data["metric_keys"], "metrics"),
            html.H3("Timings (seconds) and speedups"),
            _table("compare-timings", "timing", rows, data["timing_keys"], "timings", _timing),
            html.H3("Other figures of the runs"),
            _table("compare-other", "figure", rows, data["other_keys"], "metrics", _no_best),
            html.H3("Parameters" + (" that differ" if diff_only else "")),
            _table("compare-params", "parameter", rows, params, "params", lambda _: None)
            if params
            else empty("no parameter differs" if diff_only else "no parameters logged"),
            html.H3("Data set"),
            _table("compare-dataset", "field", rows, list(rows[0]["dataset"]), "dataset", _no_best),
            html.H3("Parallel coordinates"),
            _parallel(rows, data["metric_keys"]),
            html.H3("Per metric"),
            _bars(rows, data["metric_keys"]),
        ]
    )


def _no_best(_: str) -> None:
    return None


def _timing(key: str) -> str | None:
    """Less time is better; a larger speedup is better."""
    if comparison.is_timing(key):
        return "minimize"
    return "maximize" if key.startswith("speedup_") else None


def _legend(rows: list[dict[str, Any]]) -> html.Ul:
    """Each run's colour, readable name, status and a link to its page.

    Two components a run (the colour is the item's own border, the details a plain
    string): each Dash component costs the browser its own render, and the legend of 100
    runs with a swatch, a ``dcc.Link`` and a span each took 0.5 s. A plain link opens
    the run's page as a ``dcc.Link`` would, with a page load."""
    return html.Ul(
        [
            html.Li(
                [
                    html.A(r["label"], href=f"/run/{r['run_id']}"),
                    f" · {r['run_id'][:8]} · {r['status'] or 'not found'}"
                    + (f" · {r['planner']}" if r["planner"] else ""),
                ],
                className="compare-swatch",
                style={"borderLeftColor": r["colour"]},
            )
            for r in rows
        ],
        id="compare-legend",
    )


def _table(
    id: str,
    title: str,
    rows: list[dict[str, Any]],
    keys: list[str],
    field: str,
    direction_of: Any = comparison.metric_direction,
) -> Any:
    """One row per key, one column per run (named by its label, edged in its colour)."""
    if not keys:
        return empty(f"no {title} recorded")
    data, best = comparison.metric_table(rows, keys, field, direction_of)
    directed = any(line["better"] for line in data)  # no empty "better" column
    columns = [
        {"id": "key", "name": title},
        *([{"id": "better", "name": "better"}] if directed else []),
        *({"id": r["run_id"], "name": r["label"]} for r in rows),
    ]
    return dash_table.DataTable(
        id=id,
        data=data,
        columns=columns,
        style_header_conditional=[
            {"if": {"column_id": r["run_id"]}, "borderTop": f"4px solid {r['colour']}"}
            for r in rows
        ],
        style_data_conditional=[
            {"if": {"row_index": i, "column_id": run_id}, **BEST_STYLE} for i, run_id in best
        ],
        **_TABLE_STYLE,
    )


def _axes(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """Scores the vocabulary knows, those most runs share first; each in two runs at least."""
    scored = [k for k in keys if comparison.metric_direction(k)]
    count = {
        k: sum(comparison.numeric(r["metrics"].get(k)) is not None for r in rows) for k in scored
    }
    ranked = sorted((k for k in scored if count[k] >= 2), key=lambda k: (-count[k], k))
    return sorted(ranked[:MAX_AXES])


def _parallel(rows: list[dict[str, Any]], keys: list[str]) -> Any:
    """One polyline per run in its colour, every axis its own range with the better end on
    top (so a run that is best everywhere runs along the top)."""
    axes = _axes(rows, keys)
    if len(axes) < 2:
        return empty("parallel coordinates need two metrics shared by two runs or more")
    ranges = comparison.scaled_axes(rows, axes)
    fig = go.Figure()
    # plain trace dicts, not go.Scatter: plotly validates and copies every trace it is
    # given (0.1 s for 100 runs on an idle machine), and these are plain numbers and text
    traces: list[dict[str, Any]] = []
    for row in rows:
        ys: list[float | None] = []
        text: list[str] = []
        for key in axes:
            value = comparison.numeric(row["metrics"].get(key))
            low, high = ranges[key]
            direction = comparison.metric_direction(key)
            ys.append(None if value is None else comparison.position(value, low, high, direction))
            text.append(f"{plot_text(row['label'])}<br>{key}: {comparison.sig(value)}")
        traces.append(
            {
                "type": "scatter",
                "x": list(range(len(axes))),
                "y": ys,
                "mode": "lines+markers",
                "line": {"color": row["colour"], "width": 2},
                "marker": {"size": 6},
                "name": plot_text(row["label"]),
                "text": text,
                "hoverinfo": "text",
                "connectgaps": False,
            }
        )
    fig.update_xaxes(tickvals=list(range(len(axes))), ticktext=_axis_labels(axes, ranges))
    fig.update_yaxes(range=[-0.05, 1.05], showticklabels=False, title="better ↑ (each axis)")
    fig.update_layout(
        height=420,
        showlegend=len(rows) <= 20,
        margin={"t": 20, "l": 40, "r": 20, "b": 80},
    )
    figure = {**fig.to_dict(), "data": traces}
    return dcc.Graph(figure=figure, id="compare-parallel", config={"displaylogo": False})


def _axis_labels(axes: list[str], ranges: dict[str, tuple[float, float]]) -> list[str]:
    labels = []
    for key in axes:
        low, high = ranges[key]
        top, bottom = (low, high) if comparison.metric_direction(key) == "minimize" else (high, low)
        labels.append(f"{key}<br>{comparison.sig(top)} (top)<br>{comparison.sig(bottom)}")
    return labels


def _bars(rows: list[dict[str, Any]], keys: list[str]) -> Any:
    """A bar chart per model metric, runs in their colours, the best one outlined."""
    charts = []
    for key in [k for k in keys if k.startswith(comparison.SCORE_PREFIXES)][:MAX_BARS]:
        values = {r["run_id"]: r["metrics"].get(key) for r in rows}
        shown = [r for r in rows if comparison.numeric(values[r["run_id"]]) is not None]
        if not shown:
            continue
        best = comparison.best_of(values, comparison.metric_direction(key))
        bar = go.Bar(
            x=[values[r["run_id"]] for r in shown],
            y=[plot_text(r["label"]) for r in shown],
            orientation="h",
            marker={
                "color": [r["colour"] for r in shown],
                "line": {
                    "color": ["#111" if r["run_id"] in best else "rgba(0,0,0,0)" for r in shown],
                    "width": 2,
                },
            },
            text=[
                comparison.sig(values[r["run_id"]]) + (" ★" if r["run_id"] in best else "")
                for r in shown
            ],
            textposition="auto" if len(shown) <= LABELLED_BARS else "none",
            hoverinfo="y+text",
        )
        fig = go.Figure(bar)
        arrow = {"maximize": " (higher is better)", "minimize": " (lower is better)"}
        fig.update_layout(
            title=key + arrow.get(comparison.metric_direction(key) or "", ""),
            height=90 + 22 * len(shown),
            margin={"t": 40, "l": 10, "r": 10, "b": 30},
            yaxis={"automargin": True, "autorange": "reversed"},
        )
        charts.append(dcc.Graph(figure=fig, id=f"compare-bar-{key}", config={"displaylogo": False}))
    return (
        html.Div(charts, className="grid2", id="compare-bars")
        if charts
        else empty("no metric to chart")
    )
