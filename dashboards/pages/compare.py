"""Compare: two or more runs side by side — metrics, parameter differences, parallel coordinates."""

from __future__ import annotations

from typing import Any

import dash
import plotly.graph_objects as go
from dash import Input, Output, callback, dash_table, dcc, html

from mlpilot.dashboards import queries
from mlpilot.dashboards.components import empty

dash.register_page(__name__, path="/compare", name="Compare", title="mlpilot · compare")


def layout(runs: str | None = None, **_: Any) -> html.Div:
    chosen = [r for r in (runs or "").split(",") if r]
    options = queries.recent_run_options()
    known = {o["value"] for o in options}
    options += [{"label": r, "value": r} for r in chosen if r not in known]
    return html.Div(
        [
            html.H2("Compare runs"),
            dcc.Dropdown(
                id="compare-runs",
                options=options,
                value=chosen,
                multi=True,
                placeholder="pick two or more runs",
            ),
            html.Div(id="compare-body"),
        ]
    )


@callback(Output("compare-body", "children"), Input("compare-runs", "value"))
def show(run_ids: list[str] | None) -> Any:
    run_ids = run_ids or []
    if len(run_ids) < 2:
        return empty("pick at least two runs")
    data = queries.compare_runs(run_ids)
    rows = data["rows"]
    short = {r["run_id"]: r["run_id"][:8] for r in rows}
    metric_rows = [
        {"metric": key, **{short[r["run_id"]]: r["metrics"].get(key) for r in rows}}
        for key in data["metric_keys"]
    ]
    param_rows = [
        {"parameter": key, **{short[r["run_id"]]: r["params"].get(key) for r in rows}}
        for key in data["differing_params"]
    ]
    columns = [{"id": short[r["run_id"]], "name": short[r["run_id"]]} for r in rows]
    return html.Div(
        [
            html.H3("Metrics"),
            dash_table.DataTable(
                id="compare-metrics",
                data=metric_rows,
                columns=[{"id": "metric", "name": "metric"}, *columns],
                style_cell={"textAlign": "left"},
            ),
            html.H3("Parameters that differ"),
            dash_table.DataTable(
                id="compare-params",
                data=param_rows,
                columns=[{"id": "parameter", "name": "parameter"}, *columns],
                style_cell={"textAlign": "left"},
            )
            if param_rows
            else empty("no parameter differs"),
            html.H3("Parallel coordinates"),
            _parallel(rows, data["metric_keys"]),
        ]
    )


def _parallel(rows: list[dict[str, Any]], keys: list[str]) -> Any:
    keys = [
        k
        for k in keys
        if k.startswith(("test_", "cv_"))
        and all(isinstance(r["metrics"].get(k), (int, float)) for r in rows)
    ][:8]
    if not keys:
        return empty("no metric shared by all runs")
    dims = [{"label": k, "values": [r["metrics"][k] for r in rows]} for k in keys]
    fig = go.Figure(
        go.Parcoords(
            line={"color": list(range(len(rows))), "colorscale": "Viridis"}, dimensions=dims
        )
    )
    fig.update_layout(height=360, margin={"l": 60, "r": 60, "t": 40, "b": 20})
    return dcc.Graph(figure=fig, id="compare-parcoords")
