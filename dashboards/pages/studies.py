"""Optuna studies: trials by state over trial number or elapsed time, several studies
overlaid (one axis per metric, or normalised so up is better), importances per study and
per model family, intermediate values and parallel coordinates.

Every plot is a Plotly SVG trace (scatter, bar): WebGL traces (``scattergl``,
``parcoords``) need ``'unsafe-eval'``, which the dashboard's CSP does not allow.
"""

from __future__ import annotations

import logging
from typing import Any

import dash
import plotly.graph_objects as go
from dash import Input, Output, State, callback, dash_table, dcc, html, no_update
from plotly.subplots import make_subplots

from mlpilot.dashboards import queries
from mlpilot.dashboards.comparison import PALETTE
from mlpilot.dashboards.components import empty, plot_text

logger = logging.getLogger(__name__)

dash.register_page(__name__, path="/studies", name="Studies", title="mlpilot · Optuna studies")

#: one colour per selected study, the same in every plot of the page
#: how each trial state is drawn: complete filled, pruned hollow, failed a cross
MARKERS = {
    "COMPLETE": {"symbol": "circle", "size": 6, "opacity": 0.55},
    "PRUNED": {"symbol": "diamond-open", "size": 7, "opacity": 0.8},
    "FAIL": {"symbol": "x-thin-open", "size": 8, "opacity": 0.9},
}
STATE_LABELS = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}
#: the most studies overlaid at once (more is unreadable, and slow to read)
MAX_STUDIES = 10
#: trial markers one history figure draws, shared by the studies overlaid: each is an SVG
#: node, and 10 studies of 2,000 trials (20,000 markers) took the browser 6 s to draw
MAX_DRAWN = 2000
ALL_FAMILIES = "__all__"


def _option(s: dict[str, Any]) -> dict[str, str]:
    where = f" · {', '.join(s['experiments'])}" if s["experiments"] else ""
    return {
        "label": f"{s['name']} · {s['n_trials']} trials · {s['metric']}{where}",
        "value": s["name"],
    }


def _controls(summaries: list[dict[str, Any]], chosen: list[str]) -> html.Div:
    """Which studies (by experiment, or by name), against what, on which scale."""
    experiments = sorted({e for s in summaries for e in s["experiments"]})
    return html.Div(
        [
            dcc.Dropdown(
                id="studies-experiment",
                options=experiments,
                multi=True,
                placeholder="studies of these experiments",
            ),
            dcc.Dropdown(
                id="studies-choice",
                options=[_option(s) for s in summaries],
                value=chosen,
                multi=True,
                placeholder="pick one or more studies",
                style={"minWidth": "28rem"},
            ),
            dcc.RadioItems(
                id="studies-x",
                options=[
                    {"label": "trial number", "value": "number"},
                    {"label": "elapsed time", "value": "elapsed"},
                ],
                value="number",
                inline=True,
            ),
            dcc.RadioItems(
                id="studies-mode",
                options=[
                    {"label": "one axis per metric", "value": "raw"},
                    {"label": "normalised (up is better)", "value": "normalised"},
                ],
                value="raw",
                inline=True,
            ),
            dcc.Checklist(
                id="studies-states",
                options=[{"label": STATE_LABELS[s], "value": s} for s in MARKERS],
                value=list(MARKERS),
                inline=True,
            ),
            dcc.Checklist(
                id="studies-log", options=[{"label": "log axis", "value": "log"}], inline=True
            ),
        ],
        className="filters",
    )


def layout(study: str | None = None, studies: str | None = None, **_: Any) -> html.Div:
    """``?study=NAME`` opens one study, ``?studies=A,B,…`` overlays several (a link to an
    overlay); without either, the page opens on the busiest study."""
    summaries = queries.studies()  # most trials first: the page opens on the busiest study
    listed = [n for n in (studies or "").split(",") if n][:MAX_STUDIES]
    chosen = listed or ([study] if study else [s["name"] for s in summaries[:1]])
    controls = _controls(summaries, chosen)
    return html.Div(
        [
            html.H2("Optuna studies"),
            html.P(f"storage: {queries.settings().optuna_storage}"),
            controls,
            dcc.Loading(html.Div(id="studies-body")),
            html.H3("One study in detail"),
            html.Div(
                [
                    dcc.Dropdown(id="studies-focus", placeholder="study"),
                    dcc.Dropdown(id="studies-family", clearable=False),
                ],
                className="filters",
            ),
            dcc.Loading(html.Div(id="studies-detail")),
        ]
    )


@callback(
    Output("studies-choice", "options"),
    Output("studies-choice", "value"),
    Input("studies-experiment", "value"),
    prevent_initial_call=True,
)
def _by_experiment(chosen: list[str] | None) -> tuple[Any, Any]:
    """Studies of the chosen experiments, all of them selected (up to ``MAX_STUDIES``)."""
    summaries = queries.studies()
    if not chosen:
        return [_option(s) for s in summaries], no_update
    picked = [s for s in summaries if set(s["experiments"]) & set(chosen)]
    return [_option(s) for s in picked], [s["name"] for s in picked[:MAX_STUDIES]]


@callback(
    Output("studies-body", "children"),
    Input("studies-choice", "value"),
    Input("studies-x", "value"),
    Input("studies-mode", "value"),
    Input("studies-states", "value"),
    Input("studies-log", "value"),
)
def show(
    names: list[str] | None, x: str, mode: str, states: list[str] | None, log: list[str] | None
) -> Any:
    names = (names or [])[:MAX_STUDIES]
    if not names:
        return empty("no study selected (tune a model to create one)")
    data = [d for d in map(queries.study_trials, names) if d is not None]
    if not data:
        return empty("no such study (it may have been deleted), or one of several objectives")
    summary = [_summary_row(d) for d in data]
    return html.Div(
        [
            dash_table.DataTable(
                id="studies-summary",
                data=summary,
                columns=[{"id": c, "name": c} for c in summary[0]],
                style_cell={"textAlign": "left"},
            ),
            _history(data, x, mode, states or [], bool(log)),
            html.H3("Parameter importances"),
            html.Div(
                [g for i, d in enumerate(data) for g in _importances(d, i)],
                className="grid2",
                id="studies-importances",
            ),
        ]
    )


def _summary_row(d: dict[str, Any]) -> dict[str, Any]:
    best = d["best_value"]
    return {
        "study": d["name"],
        "experiment": ", ".join(d["experiments"]),
        "metric": d["metric"],
        "direction": d["direction"],
        "trials": d["n_trials"],
        "complete": d["counts"]["COMPLETE"],
        "pruned": d["counts"]["PRUNED"],
        "failed": d["counts"]["FAIL"],
        "best value": f"{best:.5g}" if best is not None else "",
        "families": ", ".join(d["families"]),
        "drawn": f"{len(d['rows']):,} of {d['n_finished']:,}" if d["downsampled"] else "all",
    }


def _history(data: list[dict[str, Any]], x: str, mode: str, states: list[str], log: bool) -> Any:
    """Every trial of every study by state, with its best-so-far line; one axis per
    metric, or one normalised axis where 1 is the best value of the selected studies.

    The traces are plain dicts set on the figure's dict, not ``go.Scatter`` objects added
    to it: plotly validates and deep-copies every point it is given (2.5 s of a 2.7 s
    callback for 10 studies of 2,000 trials), and these points are already plain numbers.
    """
    normalise = mode == "normalised"
    keys = [queries.metric_key(d) for d in data]
    axes = ["normalised score (1 = best of the selected studies)"] if normalise else keys
    axes = list(dict.fromkeys(axes))
    fig = make_subplots(rows=len(axes), cols=1, shared_xaxes=True, vertical_spacing=0.08)
    bounds = queries.metric_bounds(data)
    divisor, unit = _time_unit(data) if x == "elapsed" else (1.0, "")
    notes: list[str] = []
    traces: list[dict[str, Any]] = []
    drawn = _drawn(data)
    for i, d in enumerate(data):
        row = 1 if normalise else axes.index(keys[i]) + 1
        span = bounds.get(keys[i]) if normalise else None

        def scaled(values: list[Any], d: dict[str, Any] = d, span: Any = span) -> list[Any]:
            return queries.normalised(values, d["direction"], *span) if span else values

        study = {**d, "rows": drawn[i]}
        for trace in _study_traces(study, PALETTE[i % len(PALETTE)], x, divisor, scaled, states):
            # the axes make_subplots gives row ``row``: x/y for the first, x2/y2 below
            suffix = "" if row == 1 else str(row)
            traces.append({**trace, "xaxis": "x" + suffix, "yaxis": "y" + suffix})
    log = log and not normalise
    _place_valueless(traces, log, notes)
    for r, title in enumerate(axes, start=1):
        fig.update_yaxes(title_text=title, type="log" if log else "linear", row=r, col=1)
    if log and normalise:
        notes.append("the log axis applies to raw values only")
    xtitle = f"elapsed time ({unit}) since each study's first trial" if x == "elapsed" else "trial"
    fig.update_xaxes(title_text=xtitle, row=len(axes), col=1)
    sampled = _sampled_notice(data, drawn)
    fig.update_layout(
        height=120 + 280 * len(axes),
        margin={"t": 50 if sampled else 30},
        legend={"groupclick": "toggleitem"},
        title={"text": sampled, "font": {"size": 13}, "x": 0.01} if sampled else None,
    )
    figure = {**fig.to_dict(), "data": traces}
    return html.Div(
        [dcc.Graph(figure=figure, id="studies-history"), *(empty(n) for n in notes)],
        id="studies-history-box",
    )


def _drawn(data: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each study's trials to draw as markers, ``MAX_DRAWN`` shared among the studies
    (``queries.drawn_rows``: evenly spread, every new best kept)."""
    share = max(1, MAX_DRAWN // len(data))
    return [queries.drawn_rows(d["rows"], share, set(d["best"]["number"])) for d in data]


def _sampled_notice(data: list[dict[str, Any]], drawn: list[list[dict[str, Any]]]) -> str:
    """Says so when fewer trials are drawn than finished: what the figure shows must not
    pass for every trial. Empty when every trial is drawn."""
    shown = sum(map(len, drawn))
    finished = sum(d["n_finished"] for d in data)
    if shown >= finished:
        return ""
    return (
        f"{shown:,} of {finished:,} trials drawn (evenly spread, every new best included);"
        " best-so-far lines and the table count every trial"
    )


def _time_unit(data: list[dict[str, Any]]) -> tuple[float, str]:
    longest = max((r["elapsed_s"] or 0 for d in data for r in d["rows"]), default=0)
    if longest > 3 * 3600:
        return 3600.0, "h"
    return (60.0, "min") if longest > 600 else (1.0, "s")


def _study_traces(
    d: dict[str, Any], color: str, x: str, divisor: float, scaled: Any, states: list[str]
) -> list[dict[str, Any]]:
    """The study's trials, one scatter trace (a plotly trace dict) per drawn state, and
    its best-so-far line."""
    key = "elapsed_s" if x == "elapsed" else "number"

    def xs(rows: list[dict[str, Any]]) -> list[Any]:
        return [
            r[key] / divisor if key == "elapsed_s" and r[key] is not None else r[key] for r in rows
        ]

    traces = []
    for state in (s for s in MARKERS if s in states):
        rows = [r for r in d["rows"] if r["state"] == state]
        if not rows:
            continue
        values = scaled([r["value"] for r in rows])
        label = STATE_LABELS[state]
        traces.append(
            {
                "type": "scatter",
                "x": xs(rows),
                "y": values,
                "mode": "markers",
                "name": f"{plot_text(d['name'])} · {label}",
                "legendgroup": d["name"],
                "marker": {**MARKERS[state], "color": color},
                "customdata": [[r["number"], label, plot_text(r["reason"] or "")] for r in rows],
                "hovertemplate": "trial %{customdata[0]} (%{customdata[1]}): %{y:.5g}"
                "<br>%{customdata[2]}<extra>" + plot_text(d["name"]) + "</extra>",
                "meta": {"state": state, "valueless": [v is None for v in values]},
            }
        )
    best = d["best"]
    if best["value"]:
        bx = [v / divisor if key == "elapsed_s" and v is not None else v for v in best[key]]
        traces.append(
            {
                "type": "scatter",
                "x": bx,
                "y": scaled(best["value"]),
                "mode": "lines",
                "line": {"color": color, "shape": "hv", "width": 2},
                "name": f"{plot_text(d['name'])} · best",
                "legendgroup": d["name"],
                "hoverinfo": "skip",
            }
        )
    return traces


def _place_valueless(traces: list[dict[str, Any]], log: bool, notes: list[str]) -> None:
    """Trials without a value (failed ones, pruned ones that reported nothing) sit on a
    rug at the bottom of their axis, so they are seen and counted rather than lost; on a
    log axis, values <= 0 cannot be drawn and are said to be missing."""
    floors: dict[str, float] = {}
    for trace in traces:
        drawn = [v for v in (trace.get("y") or ()) if v is not None and (not log or v > 0)]
        if drawn:
            axis = trace.get("yaxis") or "y"
            floors[axis] = min(floors.get(axis, drawn[0]), *drawn)
    hidden = 0
    for trace in traces:
        meta = trace.get("meta") or {}
        if "valueless" not in meta:
            continue
        floor = floors.get(trace.get("yaxis") or "y", 1.0 if log else 0.0)
        ys = list(trace["y"])
        hidden += sum(1 for v in ys if v is not None and log and v <= 0)
        trace["y"] = [
            floor if missing else v for v, missing in zip(ys, meta["valueless"], strict=True)
        ]
    if hidden:
        notes.append(f"{hidden} trial values <= 0 are not drawn on the log axis")


def _importances(d: dict[str, Any], index: int) -> list[Any]:
    """One bar chart per family (one for a single-family study), every label shown and
    every bar labelled with its value."""
    found = d["importances"]
    if not found:
        return [empty(f"{d['name']}: parameter importances need three complete trials of a family")]
    graphs = []
    for family, values in sorted(found.items()):
        items = sorted(values.items(), key=lambda kv: kv[1])
        labels = [k for k, _ in items]
        fig = go.Figure(
            go.Bar(
                x=[v for _, v in items],
                y=labels,
                orientation="h",
                text=[f"{v:.3f}" for _, v in items],
                textposition="auto",
                marker={"color": PALETTE[index % len(PALETTE)]},
            )
        )
        title = d["name"] + (f" · {family}" if family else "")
        # every category gets its tick: Plotly drops labels that it thinks crowd the axis
        fig.update_yaxes(tickmode="array", tickvals=labels, ticktext=labels, automargin=True)
        fig.update_layout(
            title=title, height=90 + 26 * len(items), margin={"t": 40, "b": 30, "r": 20}
        )
        graphs.append(
            dcc.Graph(
                figure=fig, id={"type": "studies-importance", "index": len(graphs) + 100 * index}
            )
        )
    missing = [f for f in d["families"] if f not in found]
    if missing:
        graphs.append(empty(f"{d['name']}: too few complete trials for {', '.join(missing)}"))
    return graphs


@callback(
    Output("studies-focus", "options"),
    Output("studies-focus", "value"),
    Input("studies-choice", "value"),
    State("studies-focus", "value"),
)
def _focus(names: list[str] | None, current: str | None) -> tuple[list[str], str | None]:
    names = names or []
    return names, current if current in names else (names[0] if names else None)


@callback(
    Output("studies-family", "options"),
    Output("studies-family", "value"),
    Output("studies-family", "style"),
    Input("studies-focus", "value"),
)
def _families(name: str | None) -> tuple[Any, Any, dict[str, str]]:
    """A mixed-family study's parallel coordinates are drawn one family at a time (each
    family has its own parameters); the best trial's family first."""
    d = queries.study_trials(name) if name else None
    families = d["families"] if d else []
    if not d or not families:
        return [], ALL_FAMILIES, {"display": "none"}
    options = [{"label": f"family {f}", "value": f} for f in families]
    options.append({"label": "all families (family axis)", "value": ALL_FAMILIES})
    return options, d["best_family"] or families[0], {}


@callback(
    Output("studies-detail", "children"),
    Input("studies-focus", "value"),
    Input("studies-family", "value"),
    Input("studies-log", "value"),
)
def detail(name: str | None, family: str | None, log: list[str] | None) -> Any:
    if not name:
        return empty("no study selected")
    d = queries.study_trials(name)
    if d is None:
        return empty(f"no study named {name!r}")
    return html.Div(
        [_intermediate(d, bool(log)), _parallel(d, None if family == ALL_FAMILIES else family)],
        className="grid2",
    )


def _intermediate(d: dict[str, Any], log: bool) -> Any:
    """What trials reported while they ran (pruning decides on these), pruned in orange."""
    if not d["curves"]:
        return empty("no intermediate values reported (pruning reports one per fold)")
    fig = go.Figure()
    for state, color in (("COMPLETE", "rgba(31,119,180,0.45)"), ("PRUNED", "#ff7f0e")):
        xs: list[Any] = []
        ys: list[Any] = []
        for curve in (c for c in d["curves"] if c["state"] == state):
            xs += [*curve["steps"], None]
            ys += [*curve["values"], None]
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    name=STATE_LABELS[state],
                    line={"color": color, "width": 1},
                    marker={"size": 4},
                    connectgaps=False,
                )
            )
    fig.update_layout(
        title=f"intermediate values · {d['name']}",
        height=360,
        margin={"t": 50},
        xaxis={"title": "step reported", "tickformat": "d", "dtick": _step_tick(d["curves"])},
        yaxis={"title": d["metric"], "type": "log" if log else "linear"},
    )
    return dcc.Graph(figure=fig, id="studies-intermediate")


def _step_tick(curves: list[dict[str, Any]]) -> int | None:
    """Steps are whole numbers (a fold's index, offset): one tick each when they are few."""
    steps = [s for c in curves for s in c["steps"]]
    return 1 if steps and max(steps) - min(steps) <= 20 else None


def _parallel(d: dict[str, Any], family: str | None) -> Any:
    """Parallel coordinates as SVG lines, each axis its own range (categorical axes one
    tick per choice); the best quarter of trials in red."""
    shape = queries.parallel_data(d, family)
    axes, lines = shape["axes"], shape["lines"]
    if not lines or len(axes) < 2:
        return empty("no parameter varies across these trials")
    order = sorted(
        range(len(lines)), key=lambda i: shape["values"][i], reverse=d["direction"] == "maximize"
    )
    cut = max(1, len(order) // 4)
    fig = go.Figure()
    for group, color, name in (
        (order[cut:], "rgba(120,144,156,0.35)", "other trials"),
        (order[:cut], "#d62728", "best quarter"),
    ):
        xs: list[Any] = []
        ys: list[Any] = []
        for i in group:
            xs += [*range(len(axes)), None]
            ys += [*lines[i], None]
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
    _choice_labels(fig, axes)
    fig.update_xaxes(
        tickvals=list(range(len(axes))), ticktext=[_axis_label(a) for a in axes], showgrid=True
    )
    fig.update_yaxes(
        range=[-0.05, 1.05], showticklabels=False, title="each axis: its own min → max"
    )
    title = d["name"] + (f" · {family}" if family else "")
    fig.update_layout(
        title=f"parallel coordinates · {title}",
        height=380,
        margin={"t": 50, "l": 40, "r": 20, "b": 80},
    )
    return dcc.Graph(figure=fig, id="studies-parallel")


def _axis_label(axis: dict[str, Any]) -> str:
    name = "objective" if axis["name"] == "value" else axis["name"]
    if axis["kind"] == "choice":
        return name
    scale = " (log)" if axis["kind"] == "log" else ""
    return f"{name}{scale}<br>{axis['low']:.4g} – {axis['high']:.4g}"


def _choice_labels(fig: go.Figure, axes: list[dict[str, Any]]) -> None:
    """A categorical axis's choices written beside it, at the height its lines cross."""
    xs, ys, texts = [], [], []
    for i, axis in enumerate(axes):
        if axis["kind"] != "choice":
            continue
        count = len(axis["choices"])
        for k, choice in enumerate(axis["choices"]):
            xs.append(i)
            ys.append(k / (count - 1) if count > 1 else 0.5)
            texts.append(str(choice))
    if xs:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="text",
                text=texts,
                textposition="middle right",
                showlegend=False,
                hoverinfo="skip",
            )
        )
