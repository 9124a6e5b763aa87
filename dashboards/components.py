"""Small shared pieces of UI. Text from data or an LLM is always rendered as text."""

from __future__ import annotations

import json
from typing import Any

from dash import dcc, html

from mlpilot.tracking.vocab import RunState

_COLOR_OF = {
    RunState.SUCCEEDED: "#1b873f",
    RunState.FAILED: "#c62828",
    RunState.CANCELLED: "#8d6e63",
    RunState.RUNNING: "#1565c0",
    RunState.RECORDING: "#1565c0",
    RunState.RECEIVED: "#546e7a",
}
#: one colour per run state; the planning states share purple
STATUS_COLORS = {s.value: _COLOR_OF.get(s, "#6a1b9a") for s in RunState}


def status_badge(status: str | None) -> html.Span:
    status = status or "UNKNOWN"
    return html.Span(
        status, className="badge", style={"background": STATUS_COLORS.get(status, "#546e7a")}
    )


def text_block(text: str | None, id: str | None = None, **style: Any) -> html.Pre:
    """Verbatim text: html.Pre escapes everything, so a prompt's <script> stays text."""
    props = {"id": id} if id else {}
    return html.Pre(text or "", className="text-block", style=style, **props)


def json_block(data: Any) -> html.Pre:
    return text_block(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def code_block(source: str | None, language: str = "python") -> dcc.Markdown:
    """Syntax-highlighted code; the fence is longer than any backtick run inside it."""
    source = source or ""
    longest = max(
        (len(run) for run in source.split("\n") for run in _backtick_runs(run)), default=0
    )
    fence = "`" * max(3, longest + 1)
    return dcc.Markdown(
        f"{fence}{language}\n{source}\n{fence}",
        dangerously_allow_html=False,
        className="code-block",
    )


def _backtick_runs(line: str) -> list[str]:
    runs, current = [], ""
    for ch in line:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    if current:
        runs.append(current)
    return runs


def card(title: str, *children: Any, id: str | None = None) -> html.Div:
    props = {"id": id} if id else {}
    return html.Div([html.H3(title), *children], className="card", **props)


def kv_table(pairs: dict[str, Any], id: str | None = None) -> html.Table:
    rows = [html.Tr([html.Th(str(k)), html.Td(_fmt(v))]) for k, v in pairs.items()]
    props = {"id": id} if id else {}
    return html.Table(rows, className="kv", **props)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.5g}"
    return str(value)


def empty(message: str) -> html.P:
    return html.P(message, className="empty")


def plot_text(text: Any) -> str:
    """Data text for a plotly figure (trace names, hover text, tick labels).

    Plotly renders a subset of HTML there (``<b>``, ``<a href>``, ``<span style>``): a
    prompt, a study name or an exception's text is data, shown as typed (DESIGN §8)."""
    import html as _html

    return _html.escape(str(text), quote=False)
