"""Benchmarks: the AutoML benchmark's tables (mlpilot against FLAML and AutoGluon) and the
scale benchmark's, from the ``benchmarks`` collection."""

from __future__ import annotations

import logging
from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from mlpilot.dashboards import queries
from mlpilot.dashboards import speedups_view as view
from mlpilot.dashboards.components import empty, kv_table

logger = logging.getLogger(__name__)

dash.register_page(__name__, path="/benchmarks", name="Benchmarks", title="mlpilot · Benchmarks")


def layout(**_: Any) -> html.Div:
    automl = queries.benchmarks_of_kind("automl")
    options = [{"label": view.automl_label(d), "value": str(d["_id"])} for d in automl]
    return html.Div(
        [
            html.H2("AutoML: mlpilot against FLAML and AutoGluon"),
            dcc.Dropdown(
                id="benchmarks-automl-choice",
                options=options,
                value=options[0]["value"] if options else None,
                placeholder="pick an AutoML benchmark run",
                clearable=False,
            ),
            html.Div(id="benchmarks-automl"),
            html.H2("Scale: AutoML as data grows"),
            _scale(queries.benchmarks_of_kind("scale")),
        ]
    )


@callback(Output("benchmarks-automl", "children"), Input("benchmarks-automl-choice", "value"))
def show_automl(doc_id: str | None) -> Any:
    doc = next((d for d in queries.benchmarks_of_kind("automl") if str(d["_id"]) == doc_id), None)
    if doc is None:
        return empty(
            "no AutoML benchmark stored yet: run .venv/bin/python benchmarks/automl.py "
            "(make bench-automl)"
        )
    hardware = doc.get("hardware") or {}
    notes = [html.Li(line) for line in view.automl_counts(doc)]
    if doc.get("over_budget"):
        notes.append(
            html.Li(f"mlpilot over budget × 1.1 + 5 s on: {', '.join(doc['over_budget'])}")
        )
    return html.Div(
        [
            _table(view.automl_header(doc), view.automl_rows(doc), "benchmarks-automl-table"),
            html.Ul(notes, id="benchmarks-automl-counts"),
            html.P(
                f"score, mean whole-process wall time; budget {doc.get('budget_s')} s per run. "
                f"Machine: {hardware.get('cpu') or '?'}, {hardware.get('cpu_count', '?')} CPU "
                f"cores, GPU: {hardware.get('gpu') or 'none'}"
            ),
        ]
    )


def _scale(docs: list[dict[str, Any]]) -> Any:
    """Every scale document as it is: its facts and its rows, whatever their fields."""
    if not docs:
        return empty('no scale benchmark stored yet (kind: "scale" documents)')
    parts = []
    for i, doc in enumerate(docs):
        columns, rows = view.generic_table(doc.get("rows") or [])
        parts.append(
            html.Div(
                [
                    html.H4(str(doc.get("created_at") or doc.get("_id"))[:19]),
                    kv_table(view.doc_facts(doc)),
                    _table(columns, rows, f"benchmarks-scale-table-{i}"),
                ],
                className="benchmarks-scale",
            )
        )
    return html.Div(parts, id="benchmarks-scale")


def _table(header: list[str], rows: list[list[str]], id: str) -> html.Table:
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in header])),
            html.Tbody([html.Tr([html.Td(c) for c in row]) for row in rows]),
        ],
        id=id,
        className="table",
    )
