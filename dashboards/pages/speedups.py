"""GPU speedups: per-stage CPU vs GPU for one comparison, and speedups across experiments and sizes."""

from __future__ import annotations

from typing import Any

import dash
import plotly.graph_objects as go
from dash import Input, Output, callback, dcc, html

from mlpilot.dashboards import queries
from mlpilot.dashboards import speedups_view as view
from mlpilot.dashboards.components import empty, text_block

dash.register_page(__name__, path="/speedups", name="GPU speedups", title="mlpilot · GPU speedups")


def layout(**_: Any) -> html.Div:
    # engine comparisons (benchmarks/stages.py documents carry rows of their own)
    benches = [b for b in queries.benchmarks() if b.get("stages")]
    options = [
        {
            "label": f"{b.get('experiment', '')} · {str(b.get('run_id', ''))[:8]} · {(b.get('dataset') or {}).get('rows', '?')} rows",
            "value": str(b["_id"]),
        }
        for b in benches
    ]
    found = view.points(queries.speedup_benchmarks())
    return html.Div(
        [
            html.H2("CPU vs GPU"),
            dcc.Dropdown(
                id="speedups-choice",
                options=options,
                value=options[0]["value"] if options else None,
                placeholder="pick an engine comparison",
            ),
            html.Div(id="speedups-one"),
            html.H3("Speedups across experiments, engines and data sizes"),
            dcc.Dropdown(
                id="speedups-experiments",
                options=[{"label": e, "value": e} for e in view.experiments(found)],
                value=[],
                multi=True,
                placeholder="every experiment",
            ),
            html.Div(id="speedups-across-body"),
        ]
    )


@callback(Output("speedups-one", "children"), Input("speedups-choice", "value"))
def show_one(bench_id: str | None) -> Any:
    bench = next(
        (b for b in queries.benchmarks() if str(b["_id"]) == bench_id and b.get("stages")), None
    )
    if bench is None:
        return empty("no engine comparison yet: run one with --engine compare")
    stages = [s for s in bench.get("stages", {}) if s not in ("total", "wall")]
    cpu = [bench["stages"][s].get("cpu_s") for s in stages]
    gpu = [bench["stages"][s].get("gpu_s") for s in stages]
    fig = go.Figure(
        [go.Bar(name="CPU", x=stages, y=cpu), go.Bar(name="GPU", x=stages, y=[g or 0 for g in gpu])]
    )
    fig.update_layout(barmode="group", yaxis_title="seconds", height=360, margin={"t": 30})
    gpu_info = bench.get("gpu") or {}
    status = (
        "GPU leg ran"
        if gpu_info.get("available")
        else f"GPU leg unavailable: {gpu_info.get('reason', 'unknown')}"
    )
    if not gpu_info.get("available"):
        fig.add_annotation(
            text="GPU unavailable — not estimated",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.95,
        )
    hardware = bench.get("hardware") or {}
    return html.Div(
        [
            text_block(status, id="speedups-status"),
            dcc.Graph(figure=fig, id="speedups-bars"),
            _stage_table(bench),
            html.P(
                f"hardware: {hardware.get('cpu') or '?'}, {hardware.get('cpu_count', '?')} CPU "
                f"cores, GPU: {hardware.get('gpu') or 'none'}"
            ),
        ]
    )


def _stage_table(bench: dict[str, Any]) -> html.Table:
    """Each stage's times, where each leg really ran, and its speedup or why it has none."""
    header = ("stage", "CPU s", "GPU s", "CPU device", "GPU device", "GPU share", "speedup")
    rows = []
    for stage, row in (bench.get("stages") or {}).items():
        speedup = f"{row['speedup']:.2f}×" if row.get("speedup") else (row.get("refused") or "—")
        if row.get("kind") == "mostly_cpu" and row.get("ratio"):
            speedup = f"{row['ratio']:.2f}× (mostly CPU, not a GPU speedup)"
        share = row.get("gpu_share")
        cells = (
            stage,
            _seconds(row.get("cpu_s")),
            _seconds(row.get("gpu_s")),
            row.get("cpu_device") or "—",
            row.get("gpu_device") or "—",
            f"{share:.0%}" if share is not None else "—",
            speedup,
        )
        rows.append(html.Tr([html.Td(str(c)) for c in cells]))
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(rows)],
        id="speedups-table",
        className="table",
    )


def _seconds(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "—"


@callback(Output("speedups-across-body", "children"), Input("speedups-experiments", "value"))
def show_across(chosen: list[str] | None) -> Any:
    found = view.only(view.points(queries.speedup_benchmarks()), chosen or [])
    if not found:
        return empty("no engine comparison or stage benchmark yet")
    return html.Div([_across_figure(found), _across_table(found)])


def _across_figure(found: list[view.StagePoint]) -> Any:
    """Per stage, speedup against rows, labelled with its GPU share; legs that did not run
    have no point (they are in the table below as unavailable)."""
    lines = view.series(found)
    if not lines:
        unavailable = sum(1 for p in found if p.status.startswith("unavailable"))
        return empty(
            f"no GPU leg has run yet ({unavailable} stage(s) with the GPU unavailable): "
            "no speedup is estimated"
        )
    fig = go.Figure()
    for stage, stage_points in lines.items():
        fig.add_trace(
            go.Scatter(
                x=[p.rows for p in stage_points],
                y=[p.speedup for p in stage_points],
                mode="markers+text",  # points of different experiments: no line between them
                text=[view.share_text(p.gpu_share) for p in stage_points],
                textposition="top center",
                hovertext=[view.hover(p) for p in stage_points],
                hoverinfo="text",
                name=stage,
            )
        )
    fig.update_layout(
        xaxis_title="rows",
        xaxis_type="log",
        yaxis_title="speedup (CPU s / GPU s); label: GPU share",
        height=420,
        margin={"t": 30},
    )
    return dcc.Graph(figure=fig, id="speedups-across")


def _across_table(found: list[view.StagePoint]) -> html.Table:
    rows = [html.Tr([html.Td(c) for c in view.point_cells(p)]) for p in found]
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in view.POINT_HEADER])), html.Tbody(rows)],
        id="speedups-across-table",
        className="table",
    )
