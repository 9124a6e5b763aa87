"""Models: registered models, versions, aliases, and lineage back to the runs."""

from __future__ import annotations

from typing import Any

import dash
from dash import dash_table, html

from mlpilot.dashboards import queries
from mlpilot.dashboards.components import card, empty

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
                html.P(aliases),
                dash_table.DataTable(
                    data=rows,
                    columns=columns,
                    markdown_options={"html": False, "link_target": "_self"},
                    style_cell={"textAlign": "left"},
                ),
                id=f"models-{model['name']}",
            )
        )
    return html.Div([html.H2("Registered models"), *cards], id="models-list")
