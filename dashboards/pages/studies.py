"""Optuna studies: histories overlaid, best values, parameter importances, parallel coordinates."""

from __future__ import annotations

from typing import Any

import dash
import plotly.graph_objects as go
from dash import Input, Output, callback, dash_table, dcc, html

from mlpilot.dashboards import queries
from mlpilot.dashboards.components import empty

dash.register_page(__name__, path="/studies", name="Studies", title="mlpilot · Optuna studies")


def layout(study: str | None = None, **_: Any) -> html.Div:
    summaries = queries.studies()
    options = [
        {"label": f"{s['name']} ({s['n_trials']} trials)", "value": s["name"]} for s in summaries
    ]
    chosen = [study] if study else [o["value"] for o in options[:1]]
    return html.Div(
        [
            html.H2("Optuna studies"),
            html.P(f"storage: {queries.settings().optuna_storage}"),
            dcc.Dropdown(
                id="studies-choice",
                options=options,
                value=chosen,
                multi=True,
                placeholder="pick one or more studies",
            ),
            dcc.Loading(html.Div(id="studies-body")),
        ]
    )


@callback(Output("studies-body", "children"), Input("studies-choice", "value"))
def show(names: list[str] | None) -> Any:
    names = names or []
    if not names:
        return empty("no study selected (tune a model to create one)")
    data = [queries.study_trials(n) for n in names]
    history = go.Figure()
    for d in data:
        h = d["history"]
        history.add_trace(
            go.Scatter(
                x=h["number"],
                y=h["value"],
                mode="markers",
                name=f"{d['name']} trials",
                opacity=0.35,
            )
        )
        history.add_trace(
            go.Scatter(x=h["number"], y=h["best"], mode="lines", name=f"{d['name']} best")
        )
    history.update_layout(
        xaxis_title="trial", yaxis_title="objective", height=380, margin={"t": 30}
    )
    summary = [
        {
            "study": d["name"],
            "direction": d["direction"],
            "trials": d["n_trials"],
            "complete": d["n_complete"],
            "best value": d["best_value"],
            "shown": "downsampled" if d["downsampled"] else "all",
        }
        for d in data
    ]
    first = data[0]
    return html.Div(
        [
            dash_table.DataTable(
                id="studies-summary",
                data=summary,
                columns=[{"id": c, "name": c} for c in summary[0]],
                style_cell={"textAlign": "left"},
            ),
            dcc.Graph(figure=history, id="studies-history"),
            html.Div([_importances(first), _parallel(first)], className="grid2"),
        ]
    )


def _importances(d: dict[str, Any]) -> Any:
    items = sorted(d["importances"].items(), key=lambda kv: kv[1])
    if not items:
        return empty("parameter importances need at least three complete trials")
    fig = go.Figure(go.Bar(x=[v for _, v in items], y=[k for k, _ in items], orientation="h"))
    fig.update_layout(title=f"parameter importances · {d['name']}", height=340, margin={"t": 40})
    return dcc.Graph(figure=fig, id="studies-importances")


def _parallel(d: dict[str, Any]) -> Any:
    """Parallel coordinates drawn as SVG lines, each axis scaled to its own range.

    Plotly's Parcoords draws with WebGL, which takes seconds in a browser without a GPU;
    a few hundred polylines in SVG draw at once. The best quarter of trials is highlighted.
    """
    rows = d["param_rows"]
    numeric = [
        p for p in d["params"] if rows and all(isinstance(r.get(p), (int, float)) for r in rows)
    ]
    if not rows or not numeric:
        return empty("no numeric parameters to draw")
    axes = [*numeric[:8], "value"]
    ranges = {a: (min(r[a] for r in rows), max(r[a] for r in rows)) for a in axes}

    def scaled(row: dict[str, Any], axis: str) -> float:
        low, high = ranges[axis]
        return 0.5 if high == low else (row[axis] - low) / (high - low)

    ordered = sorted(rows, key=lambda r: r["value"], reverse=d["direction"] == "maximize")
    cut = max(1, len(ordered) // 4)
    fig = go.Figure()
    for group, color, name in (
        (ordered[cut:], "rgba(120,144,156,0.35)", "other trials"),
        (ordered[:cut], "#d62728", "best quarter"),
    ):
        xs: list[Any] = []
        ys: list[Any] = []
        for row in group:
            xs += [*range(len(axes)), None]
            ys += [*(scaled(row, a) for a in axes), None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": color, "width": 1},
                name=name,
                hoverinfo="skip",
            )
        )
    labels = [f"{a}<br>{ranges[a][0]:.3g} – {ranges[a][1]:.3g}" for a in axes[:-1]] + [
        f"objective<br>{ranges['value'][0]:.4g} – {ranges['value'][1]:.4g}"
    ]
    fig.update_xaxes(tickvals=list(range(len(axes))), ticktext=labels, showgrid=True)
    fig.update_yaxes(
        range=[-0.02, 1.02], showticklabels=False, title="each axis: its own min → max"
    )
    fig.update_layout(
        title=f"parallel coordinates · {d['name']}",
        height=360,
        margin={"t": 50, "l": 40, "r": 20, "b": 70},
    )
    return dcc.Graph(figure=fig, id="studies-parallel")
