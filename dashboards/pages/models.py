"""Models: registered models, versions, aliases and lineage back to the runs; set, move
or delete an alias.

Moving an alias is a write: it is a Dash callback, so it is a POST that passes the
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

dash.register_page(__name__, path="/models", name="Models", title="mlpilot · models")


def layout(**_: Any) -> html.Div:
    models = queries.registered_models()
    if not models:
        return html.Div(
            [
                html.H2("Registered models"),
                empty("no registered models yet: ask mlpilot to 'register the best model as NAME'"),
            ]
        )
    return html.Div(
        [
            html.H2("Registered models"),
            _alias_form(models),
            html.Div(_cards(models), id="models-list"),
        ]
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
    cards = []
    for model in models:
        aliases = (
            ", ".join(f"@{a} → v{v}" for a, v in sorted(model["aliases"].items())) or "no aliases"
        )
        rows = [
            {
                "version": v["version"],
                "aliases": " ".join(f"@{a}" for a in v["aliases"]),
                "source run": f"[{v['source_run'][:8]}](/run/{v['source_run']})"
                if v["source_run"] and v["source_run"].isalnum()
                else v["source_run"],
                "metric": f"{v['metric']} {v['metric_value']}".strip(),
                "prompt": v["prompt"][:160],
                "dataset": v["fingerprint"][:19],
            }
            for v in model["versions"]
        ]
        columns = [
            {"id": c, "name": c, **({"presentation": "markdown"} if c == "source run" else {})}
            for c in ("version", "aliases", "source run", "metric", "prompt", "dataset")
        ]
        cards.append(
            card(
                model["name"],
                html.P(aliases, className="models-alias-line"),
                dash_table.DataTable(
                    data=rows,
                    columns=columns,
                    markdown_options={"html": False, "link_target": "_self"},
                    style_cell={"textAlign": "left"},
                ),
                id=f"models-{model['name']}",
            )
        )
    return cards


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
