"""Run detail: prompt, plan, generated code, metrics, timings, events, plots, model (its
registered versions and registry changes, and registering it)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import dash
import plotly.graph_objects as go
from dash import Input, Output, State, callback, dash_table, dcc, html

from mlpilot.dashboards import queries
from mlpilot.dashboards.components import (
    card,
    code_block,
    empty,
    json_block,
    kv_table,
    status_badge,
    text_block,
)
from mlpilot.platform.errors import describe_error
from mlpilot.tracking.vocab import TERMINAL_STATES

dash.register_page(__name__, path_template="/run/<run_id>", name="Run", title="mlpilot · run")


def layout(run_id: str | None = None, **_: Any) -> html.Div:
    detail = queries.run_detail(run_id or "") if run_id else None
    if detail is None:
        return html.Div(
            [html.H2("Run not found"), text_block(run_id), dcc.Link("back to runs", href="/")],
            id="run-missing",
        )
    doc = detail["doc"]
    metrics = {k: v for k, v in (doc.get("metrics") or {}).items() if not k.endswith("_std")}
    header = html.Div(
        [
            html.H2(
                ["Run ", html.Code(doc["_id"]), " ", status_badge(doc.get("status"))],
                id="run-title",
            ),
            _cancel(doc),
            html.Div(
                [
                    html.Span(
                        f"experiment {doc.get('experiment', '')} · session {doc.get('session_id', '')} · planner {doc.get('planner') or ''}"
                    ),
                    " · ",
                    html.A("MLflow UI", href=detail["ui_url"], target="_blank")
                    if detail.get("ui_url")
                    else None,
                ]
            ),
        ]
    )
    error = doc.get("error")
    return html.Div(
        [
            header,
            card(
                "Error",
                text_block(f"{describe_error(error)} (stage {error.get('stage') or 'unknown'})"),
                id="run-error",
            )
            if error
            else None,
            _fallback(doc.get("engine") or {}),
            card("Prompt", text_block(doc.get("prompt")), id="run-prompt"),
            html.Div(
                [
                    card(
                        "Metrics",
                        kv_table(metrics, id="run-metrics") if metrics else empty("no metrics"),
                    ),
                    card("Stage timings", _timings_figure(doc.get("timings") or {})),
                ],
                className="grid2",
            ),
            card("Plan", json_block(doc.get("plan")), id="run-plan"),
            card(
                "Generated pipeline.py",
                code_block(detail.get("pipeline"))
                if detail.get("pipeline")
                else empty("not available"),
                id="run-code",
            ),
            card(
                "Plots",
                html.Div(
                    [
                        html.Figure(
                            [html.Img(src=p["src"], alt=p["name"]), html.Figcaption(p["name"])]
                        )
                        for p in detail["plots"]
                    ],
                    className="plots",
                )
                if detail["plots"]
                else empty("no plots"),
                id="run-plots",
            ),
            _search(detail),
            card("Events", _events_table(doc.get("events") or []), id="run-events"),
            card("Model", _model(doc, detail), id="run-model"),
        ]
    )


def _search(detail: dict[str, Any]) -> Any:
    """A search run: its study (a link to the Studies page opened on it) and the Optuna
    plots the search logged."""
    search = detail.get("search")
    if not search:
        return None
    study = search["study"]
    counts = " · ".join(
        f"{study[k]} {label}"
        for k, label in (("n_complete", "complete"), ("n_pruned", "pruned"), ("n_failed", "failed"))
        if study.get(k) is not None
    )
    best = study.get("best_value")
    link = dcc.Link(
        f"study {study['name']}",
        href="/studies?" + urlencode({"study": study["name"]}),
        id="run-study-link",
    )
    plots = [
        html.Figure([html.Img(src=p["src"], alt=p["name"]), html.Figcaption(p["name"])])
        for p in search["plots"]
    ]
    return card(
        "Hyperparameter search",
        html.P(
            [
                link,
                html.Span(
                    f" · {study.get('metric') or 'objective'} {study.get('direction') or ''}"
                    + (f" · best {best:.5g}" if isinstance(best, (int, float)) else "")
                    + (f" · {counts}" if counts else "")
                ),
            ]
        ),
        html.Div(plots, className="plots", id="run-optuna-plots")
        if plots
        else empty("no Optuna plots logged (a search logs them after two complete trials)"),
        html.P(
            f"interactive version: the run's artifact {search['page']} (MLflow UI)",
            className="empty",
        )
        if plots
        else None,
        id="run-search",
    )


def _fallback(engine: dict[str, Any]) -> Any:
    """An auto run whose GPU leg failed and reran on the CPU: why, and the GPU's error."""
    fallback = engine.get("fallback")
    if not fallback:
        return None
    rows = {
        "engine": queries.engine_label(engine),
        "why": fallback.get("reason") or "",
        "failed stage": fallback.get("stage") or "",
        "GPU error": fallback.get("error") or "",
    }
    return card(
        "GPU leg rerun on the CPU", kv_table(rows, id="run-fallback-table"), id="run-fallback"
    )


def _cancel(doc: dict[str, Any]) -> Any:
    """A cancel button while the run has not ended (the same as ``mlpilot runs cancel``)."""
    if doc.get("status") in TERMINAL_STATES:
        return None
    return html.Div(
        [
            dcc.Store(id="run-cancel-id", data=doc["_id"]),
            html.Button("Cancel run", id="run-cancel", n_clicks=0),
            html.Span(id="run-cancel-result", className="empty", style={"marginLeft": "0.8rem"}),
        ]
    )


@callback(
    Output("run-cancel-result", "children"),
    Output("run-cancel", "disabled"),
    Input("run-cancel", "n_clicks"),
    State("run-cancel-id", "data"),
    prevent_initial_call=True,
)
def _on_cancel(clicks: int, run_id: str) -> tuple[str, bool]:
    if not clicks or not run_id:
        return "", False
    return queries.cancel_run(run_id) + " (reload the page to see it)", True


def _timings_figure(timings: dict[str, float]) -> Any:
    stages = [k for k in timings if k != "total"]
    if not stages:
        return empty("no timings")
    fig = go.Figure(go.Bar(x=[timings[s] for s in stages], y=stages, orientation="h"))
    fig.update_layout(
        height=60 + 28 * len(stages),
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        xaxis_title="seconds",
    )
    return dcc.Graph(figure=fig, config={"displayModeBar": False}, id="run-timings")


def _events_table(events: list[dict[str, Any]]) -> Any:
    rows = [
        {
            "at": str(e.get("at", ""))[:23],
            "state": e.get("state", ""),
            "message": str(e.get("message", ""))[:300],
        }
        for e in events
    ]
    return dash_table.DataTable(
        data=rows,
        columns=[{"id": c, "name": c} for c in ("at", "state", "message")],
        page_size=15,
        style_cell={"textAlign": "left", "whiteSpace": "normal"},
    )


def _model(doc: dict[str, Any], detail: dict[str, Any]) -> Any:
    """The logged model, the versions registered from it (each linking to its history on
    the Models page) and, for a run that logged one, a form to register it."""
    model = doc.get("model") or {}
    uri = model.get("uri") if isinstance(model, dict) else None
    registered = {"versions": detail["registry"], "changes": queries.registry_changes(doc)}
    return html.Div(
        [
            kv_table({"model URI": uri or "—"}),
            html.Div(_registered(registered), id="run-model-versions"),
            _register_form(doc["_id"]) if uri and str(uri).startswith("models:/") else None,
        ]
    )


def _registered(registered: dict[str, Any]) -> list[Any]:
    rows = [
        html.Li(
            [
                dcc.Link(f"{v['name']} version {v['version']}", href="/models"),
                "".join(f" @{a}" for a in v["aliases"]),
            ]
        )
        for v in registered["versions"]
    ]
    changes = [
        html.Li(
            f"{str(c.get('at') or '')[:19].replace('T', ' ')} · {c.get('action')} · "
            f"{c.get('name')}"
            + (f" v{c['version']}" if c.get("version") else "")
            + (f" @{c['alias']}" if c.get("alias") else "")
            + (f" (was v{c['previous']})" if c.get("previous") else "")
            + f" · by {c.get('by') or '?'}"
        )
        for c in reversed(registered["changes"])
    ]
    return [
        html.Ul(rows, id="run-registered") if rows else empty("not registered"),
        html.Details(
            [html.Summary(f"registry changes ({len(changes)})"), html.Ul(changes)],
            id="run-registry-changes",
        )
        if changes
        else None,
    ]


def _register_form(run_id: str) -> html.Div:
    """Register this run's model (the same function as ``mlpilot models register``);
    the registry is handed the logged model's URI, nothing is loaded."""
    return html.Div(
        [
            dcc.Store(id="run-register-id", data=run_id),
            dcc.Input(
                id="run-register-name",
                type="text",
                placeholder="model name, e.g. sales-model",
                maxLength=255,
            ),
            dcc.Input(
                id="run-register-alias",
                type="text",
                placeholder="alias (optional), e.g. champion",
                maxLength=255,
            ),
            html.Button("Register model", id="run-register", n_clicks=0),
            html.Div(id="run-register-result"),
        ],
        className="filters",
    )


@callback(
    Output("run-register-result", "children"),
    Output("run-model-versions", "children"),
    Input("run-register", "n_clicks"),
    State("run-register-id", "data"),
    State("run-register-name", "value"),
    State("run-register-alias", "value"),
    prevent_initial_call=True,
)
def _on_register(_clicks: int, run_id: str, name: str | None, alias: str | None) -> Any:
    ok, line = queries.register_run_model(run_id or "", name or "", alias)
    result = html.P(line, id="run-register-done" if ok else "run-register-refused")
    return result, _registered(queries.run_registrations(run_id)) if ok else dash.no_update
