"""Models: register a run's model, registered models with their version history (run,
created time, aliases, the alias moves the run documents recorded) and lineage back to the
runs (prompt, template, data set, metric); set, move or delete an alias.

Registering and moving an alias are writes, through the functions ``mlpilot models``
uses (``tracking/registry.py``), recorded in MLflow and on the run's document. Registering
hands the registry the logged model's URI only: no model is downloaded or loaded. Each write is it is a Dash callback, so it is a POST that passes the
dashboard's gate first (Host, credentials when set, same origin and the signed CSRF
token, on localhost without a password too), like the chat page's run requests.
"""

from __future__ import annotations

import logging
from typing import Any

import dash
from dash import Input, Output, State, callback, ctx, dash_table, dcc, html, no_update

from mlpilot.dashboards import queries
from mlpilot.dashboards.components import card, empty

logger = logging.getLogger(__name__)

#: a version's history row: the version, then the lineage of the run that produced it
VERSION_COLUMNS = (
    "version",
    "aliases",
    "source run",
    "created",
    "template",
    "metric",
    "prompt",
    "dataset",
)

dash.register_page(__name__, path="/models", name="Models", title="mlpilot · models")


def layout(run: str | None = None, **_: Any) -> html.Div:
    models = queries.registered_models()
    return html.Div(
        [
            html.H2("Registered models"),
            _register_form(run),
            _alias_form(models) if models else None,
            html.Div(_cards(models), id="models-list"),
        ]
    )


def _register_form(run: str | None) -> html.Div:
    """A run that logged a model, the registered model's name and an optional alias;
    ``?run=ID`` (the Run page's link) chooses the run."""
    options = queries.runs_with_models()
    values = {o["value"] for o in options}
    chosen = run if run in values else (options[0]["value"] if options else None)
    if run and run not in values:  # an older run than the dropdown lists: still offered
        options = [{"label": run[:8], "value": run}, *options]
        chosen = run
    return card(
        "Register a run's model",
        html.Div(
            [
                dcc.Dropdown(
                    id="models-register-run",
                    options=options,
                    value=chosen,
                    clearable=False,
                    placeholder="a run that logged a model",
                ),
                dcc.Input(
                    id="models-register-name",
                    type="text",
                    placeholder="model name, e.g. sales-model",
                    maxLength=255,
                ),
                dcc.Input(
                    id="models-register-alias",
                    type="text",
                    placeholder="alias (optional), e.g. champion",
                    maxLength=255,
                ),
                html.Button("Register", id="models-register-submit", n_clicks=0),
            ],
            className="filters",
        ),
        html.Div(id="models-register-result"),
        id="models-register",
    )


def _alias_form(models: list[dict[str, Any]]) -> html.Div:
    """Point an alias (champion, challenger, …) at a version, or delete one."""
    return card(
        "Aliases",
        html.Div(
            [
                dcc.Dropdown(
                    id="models-alias-model",
                    options=[m["name"] for m in models],
                    value=models[0]["name"],
                    clearable=False,
                ),
                dcc.Dropdown(id="models-alias-version", clearable=False, placeholder="version"),
                dcc.Input(
                    id="models-alias-name",
                    type="text",
                    value="champion",
                    placeholder="alias, e.g. champion",
                    maxLength=255,
                ),
                html.Button("Set / move alias", id="models-alias-set", n_clicks=0),
                html.Button("Delete alias", id="models-alias-delete", n_clicks=0),
            ],
            className="filters",
        ),
        html.Div(id="models-alias-result"),
        id="models-aliases",
    )


def _cards(models: list[dict[str, Any]]) -> list[Any]:
    if not models:
        return [empty("no registered models yet: register a run's model above")]
    cards = []
    for model in models:
        aliases = (
            ", ".join(f"@{a} → v{v}" for a, v in sorted(model["aliases"].items())) or "no aliases"
        )
        history = queries.model_history(model["name"])
        cards.append(
            card(
                model["name"],
                html.P(aliases, className="models-alias-line"),
                _versions_table(history),
                _changes_table(history),
                id=f"models-{model['name']}",
            )
        )
    return cards


def _run_link(run_id: str | None) -> str:
    # a markdown link only for an id that is one: a tag holds whatever was written to it
    if run_id and run_id.isalnum():
        return f"[{run_id[:8]}](/run/{run_id})"
    return run_id or ""


def _versions_table(history: list[dict[str, Any]]) -> Any:
    """Every version with its run, created time, aliases and the run's lineage."""
    rows = [
        {
            "version": v["version"],
            "aliases": " ".join(f"@{a}" for a in v["aliases"]),
            "source run": _run_link(v["run_id"]),
            "created": (v["created_at"] or "").replace("T", " ")[:19],
            "template": v["template"],
            "metric": f"{v['metric']} {_number(v['metric_value'])}".strip(),
            "prompt": v["prompt"][:160],
            "dataset": " ".join(p for p in (v["dataset"], v["fingerprint"][:19]) if p),
        }
        for v in history
    ]
    columns = [
        {"id": c, "name": c, **({"presentation": "markdown"} if c == "source run" else {})}
        for c in VERSION_COLUMNS
    ]
    return dash_table.DataTable(
        data=rows,
        columns=columns,
        markdown_options={"html": False, "link_target": "_self"},
        style_cell={"textAlign": "left", "whiteSpace": "normal"},
    )


def _changes_table(history: list[dict[str, Any]]) -> Any:
    """Registrations and alias moves, as the run documents recorded them, newest first."""
    # versions of one run share its document, hence its changes: each shown once
    unique = {str(c.get("id")): c for v in history for c in v["changes"]}
    # newest first; of one document's changes at the same instant, the later written first
    changes = sorted(list(unique.values())[::-1], key=lambda c: str(c.get("at")), reverse=True)
    if not changes:
        return None
    rows = [
        {
            "at": str(c.get("at") or "").replace("T", " ")[:19],
            "change": str(c.get("action") or ""),
            "alias": f"@{c['alias']}" if c.get("alias") else "",
            "version": f"v{c['version']}" if c.get("version") else "",
            "was": f"v{c['previous']}" if c.get("previous") else "",
            "by": str(c.get("by") or ""),
        }
        for c in changes
    ]
    return html.Details(
        [
            html.Summary(f"registry changes ({len(rows)})"),
            dash_table.DataTable(
                data=rows,
                columns=[{"id": c, "name": c} for c in rows[0]],
                page_size=20,
                style_cell={"textAlign": "left"},
            ),
        ],
        open=True,
        className="models-changes",
    )


def _number(value: Any) -> str:
    if isinstance(value, (int, float)):
        return f"{value:.4g}"
    return str(value or "")


@callback(
    Output("models-alias-version", "options"),
    Output("models-alias-version", "value"),
    Input("models-alias-model", "value"),
)
def _versions(name: str | None) -> tuple[list[dict[str, str]], str | None]:
    model = next((m for m in queries.registered_models() if m["name"] == name), None)
    if model is None:
        return [], None
    options = [
        {
            "label": f"v{v['version']}" + "".join(f" @{a}" for a in v["aliases"]),
            "value": str(v["version"]),
        }
        for v in model["versions"]
    ]
    return options, options[0]["value"] if options else None  # the newest version


@callback(
    Output("models-alias-result", "children"),
    Output("models-list", "children"),
    Input("models-alias-set", "n_clicks"),
    Input("models-alias-delete", "n_clicks"),
    State("models-alias-model", "value"),
    State("models-alias-version", "value"),
    State("models-alias-name", "value"),
    prevent_initial_call=True,
)
def _write(
    _set: int, _delete: int, name: str | None, version: str | None, alias: str | None
) -> tuple[Any, Any]:
    if not name:
        return html.P("choose a model", className="empty"), no_update
    if ctx.triggered_id == "models-alias-delete":
        ok, line = queries.delete_model_alias(name, alias or "")
    elif version:
        ok, line = queries.set_model_alias(name, alias or "", str(version))
    else:
        ok, line = False, "choose a version"
    result = html.P(line, id="models-alias-done" if ok else "models-alias-refused")
    return result, _cards(queries.registered_models()) if ok else no_update


@callback(
    Output("models-register-result", "children"),
    Output("models-list", "children", allow_duplicate=True),
    Input("models-register-submit", "n_clicks"),
    State("models-register-run", "value"),
    State("models-register-name", "value"),
    State("models-register-alias", "value"),
    prevent_initial_call=True,
)
def _register(_clicks: int, run_id: str | None, name: str | None, alias: str | None) -> Any:
    ok, line = queries.register_run_model(run_id or "", name or "", alias)
    result = html.P(line, id="models-register-done" if ok else "models-register-refused")
    return result, _cards(queries.registered_models()) if ok else no_update
