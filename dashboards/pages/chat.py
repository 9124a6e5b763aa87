"""Chat: a prompt box with data upload; runs launch in the background with live progress.

The empty page offers example requests (a click fills the prompt) and a picker of the data
files already at hand; an answer to a question is the table the CLI prints, from the same
rows (``platform/cli/answers.answer_table``), never raw JSON.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Any

import dash
from dash import ALL, Input, Output, State, callback, ctx, dcc, html, no_update

from mlpilot.dashboards import jobs, queries
from mlpilot.dashboards.app import max_upload_mb, upload_folder
from mlpilot.dashboards.components import card, empty, json_block, kv_table, text_block
from mlpilot.platform.cli.answers import AnswerTable, answer_table

logger = logging.getLogger(__name__)

dash.register_page(__name__, path="/chat", name="Chat", title="mlpilot · chat")

_SAFE_NAME = re.compile(r"[^\w.\-]+")
ALLOWED_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".json", ".xlsx")
#: what a newcomer can ask, in the words the planner knows (a Chinese one among them)
EXAMPLES = (
    "find the key features driving sales and tune a random forest",
    "找出影响销量的关键特征并调优随机森林",
    "compare cpu and gpu for a random forest on sales",
    "describe the data",
    "show the last 5 runs of every experiment",
    "compare the last two runs",
)


def layout(**_: Any) -> html.Div:
    return html.Div(
        [
            html.H2("Chat"),
            dcc.Store(id="chat-session", storage_type="local"),
            dcc.Store(id="chat-job"),
            dcc.Store(id="chat-done"),
            dcc.Interval(id="chat-tick", interval=700, disabled=True),
            dcc.Upload(
                id="chat-upload",
                children=html.Div(["Drop a data file here or ", html.A("choose one")]),
                max_size=int(max_upload_mb() * 1024 * 1024),
                style={"border": "1px dashed #9fb3c8", "padding": "0.8rem", "borderRadius": "6px"},
            ),
            html.Div(id="chat-upload-status"),
            _start(),
            dcc.Textarea(
                id="chat-prompt",
                placeholder="e.g. find the key features driving sales and tune a random forest",
                style={"width": "100%", "height": "4rem"},
            ),
            html.Button("Send", id="chat-send", n_clicks=0),
            html.Div(id="chat-history"),
            html.Div(id="chat-live"),
        ]
    )


def _start() -> html.Div:
    """The empty page's help: a data file already at hand, and requests to start from."""
    examples = [
        html.Button(
            text,
            id={"type": "chat-example", "index": i},
            n_clicks=0,
            className="chat-example",
            style={"margin": "0.2rem", "fontSize": "16px"},
        )
        for i, text in enumerate(EXAMPLES)
    ]
    return html.Div(
        [
            dcc.Dropdown(
                id="chat-data",
                placeholder="or pick a data file used before",
                clearable=False,
                style={"margin": "0.4rem 0"},
            ),
            html.Div(id="chat-data-status"),
            html.Div([html.Span("Try: "), *examples], id="chat-examples"),
        ],
        id="chat-start",
    )


def _ensure_session(session_id: str | None) -> str:
    from mlpilot.platform.agent.sessions import Session, save_session

    if session_id and queries.store().get_session(session_id) is not None:
        return session_id
    session = Session.new()
    save_session(queries.store(), session)
    return session.id


@callback(
    Output("chat-session", "data"),
    Output("chat-history", "children"),
    Output("chat-examples", "style"),
    Output("chat-data", "options"),
    Input("chat-session", "data"),
    Input("chat-done", "data"),
)
def load_session(session_id: str | None, _job: Any) -> tuple[str, Any, Any, Any]:
    session_id = _ensure_session(session_id)
    doc = queries.store().get_session(session_id) or {}
    messages = [
        html.Div(
            [html.B(f"{m.get('role')}: "), html.Span(str(m.get("content", "")))],
            className="chat-message",
        )
        for m in doc.get("messages", [])
    ]
    context = doc.get("context") or {}
    data = context.get("data_path")
    header = html.P(
        f"session {session_id}" + (f" · data {data}" if data else " · no data file yet"),
        id="chat-session-id",
    )
    # the examples are for the empty page; a conversation under way has its own thread
    examples = {"display": "none"} if messages else {}
    conversation = card("Conversation", header, *(messages or [empty("no messages yet")]))
    return session_id, conversation, examples, queries.data_file_choices(session_id)


@callback(
    Output("chat-prompt", "value", allow_duplicate=True),
    Input({"type": "chat-example", "index": ALL}, "n_clicks"),
    prevent_initial_call=True,
)
def use_example(clicks: list[int | None]) -> Any:
    index = (ctx.triggered_id or {}).get("index")
    # a button drawn anew fires with no click: only a real click fills the prompt
    if not isinstance(index, int) or not 0 <= index < len(EXAMPLES) or not any(clicks):
        return no_update
    return EXAMPLES[index]


@callback(
    Output("chat-data-status", "children"),
    Input("chat-data", "value"),
    State("chat-session", "data"),
    prevent_initial_call=True,
)
def pick_data(path: str | None, session_id: str | None) -> Any:
    if not path:
        return no_update
    if not queries.choose_data_file(_ensure_session(session_id), path):
        return text_block("not used: pick a file the list offers", id="chat-data-refused")
    name = path.rsplit("/", 1)[-1]
    return text_block(f"using {name} — it is this session's data file now", id="chat-data-used")


@callback(
    Output("chat-upload-status", "children"),
    Input("chat-upload", "contents"),
    State("chat-upload", "filename"),
    State("chat-session", "data"),
    prevent_initial_call=True,
)
def upload(contents: str | None, filename: str | None, session_id: str | None) -> Any:
    from mlpilot.platform.agent.sessions import load_session as load
    from mlpilot.platform.agent.sessions import save_session

    if not contents or not filename:
        return no_update
    name = (
        _SAFE_NAME.sub("_", filename.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).strip("._")
        or "data.csv"
    )
    if not name.lower().endswith(ALLOWED_SUFFIXES):
        return text_block(
            f"not uploaded: {filename} is not a CSV, TSV, Parquet, JSON-lines or Excel file"
        )
    payload = base64.b64decode(contents.split(",", 1)[1])
    if len(payload) > max_upload_mb() * 1024 * 1024:
        return text_block(f"not uploaded: larger than {max_upload_mb():g} MB")
    session_id = _ensure_session(session_id)
    path = upload_folder(session_id) / name
    path.write_bytes(payload)
    session = load(queries.store(), session_id)
    session.remember(data_path=str(path))
    save_session(queries.store(), session)
    return text_block(
        f"uploaded {name} ({len(payload) / 1024:.0f} KiB) — it is this session's data file now",
        id="chat-uploaded",
    )


@callback(
    Output("chat-job", "data"),
    Output("chat-tick", "disabled"),
    Output("chat-prompt", "value"),
    Input("chat-send", "n_clicks"),
    State("chat-prompt", "value"),
    State("chat-session", "data"),
    prevent_initial_call=True,
)
def send(_clicks: int, prompt: str | None, session_id: str | None) -> tuple[Any, bool, str]:
    if not prompt or not prompt.strip():
        return no_update, True, no_update
    job = jobs.start(prompt.strip()[:4000], _ensure_session(session_id))
    return job.id, False, ""


@callback(
    Output("chat-live", "children"),
    Output("chat-tick", "disabled", allow_duplicate=True),
    Output("chat-done", "data"),
    Input("chat-tick", "n_intervals"),
    State("chat-job", "data"),
    prevent_initial_call=True,
)
def progress(_n: int, job_id: str | None) -> tuple[Any, bool, Any]:
    job = jobs.get(job_id)
    if job is None:
        return no_update, True, no_update
    parts: list[Any] = [
        html.P(["you: ", html.Span(job.prompt)]),
        text_block("\n".join(job.lines), id="chat-progress"),
    ]
    if job.done:
        parts.append(_result(job))
    # a finished job reloads the conversation, which now holds the answer
    return card("Latest request", *parts), job.done, job.id if job.done else no_update


def _result(job: jobs.Job) -> Any:
    if job.error:
        return text_block(f"error: {job.error}", id="chat-error")
    outcome = job.outcome or {}
    status = outcome.get("status")
    if status == "ANSWERED":
        steps = (outcome.get("plan") or {}).get("steps") or [{}]
        answer = answer_view(steps[0].get("tool"), outcome.get("answer"))
        return html.Div([html.H4("Answer"), answer], id="chat-result")
    metrics = {
        k: v
        for k, v in (outcome.get("metrics") or {}).items()
        if k.startswith(("test_", "cv_", "hpo_")) and not k.endswith("_std")
    }
    steps = " → ".join(s["tool"] for s in (outcome.get("plan") or {}).get("steps", []))
    plots = []
    if outcome.get("run_id"):
        detail = queries.run_detail(outcome["run_id"]) or {}
        plots = detail.get("plots", [])
    error = outcome.get("error") or {}
    return html.Div(
        [
            html.H4(f"Run {status}", id="chat-status"),
            text_block(error.get("message")) if error else None,
            html.P(["plan: ", html.Span(steps)]),
            kv_table(metrics) if metrics else None,
            dcc.Link("open the run", href=f"/run/{outcome['run_id']}")
            if outcome.get("run_id")
            else None,
            html.Div([html.Img(src=p["src"], alt=p["name"]) for p in plots], className="plots"),
        ],
        id="chat-result",
    )


def answer_view(tool: str | None, answer: Any) -> Any:
    """A query's answer as the CLI shows it: its table, a line, or JSON where no table fits."""
    shown = answer_table(tool, answer)
    if shown is None:
        return json_block(answer)
    if isinstance(shown, str):
        return html.P(shown, id="chat-answer-line")
    return _html_table(shown)


def _html_table(shown: AnswerTable) -> html.Div:
    """Cells as text (html.Td escapes them): prompts and parameters come from runs."""
    head = html.Thead(html.Tr([html.Th(column) for column in shown.columns]))
    body = html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in shown.rows])
    return html.Div(
        [
            html.Table(
                [html.Caption(shown.title, style={"textAlign": "left"}), head, body],
                className="kv",
                id="chat-answer",
            ),
            html.P(shown.caption, className="empty") if shown.caption else None,
        ]
    )
