"""A query's answer for people: a short table per tool (``--json`` keeps the raw answer).

Times are local ``MM-DD HH:MM``, run ids their first 8 characters (a unique prefix that
``runs show`` accepts), metrics 4 significant digits: what a reader compares at a glance.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mlpilot.platform.cli._output import console

log = logging.getLogger(__name__)


def when(value: Any) -> str:
    """Epoch milliseconds or an ISO time as local ``MM-DD HH:MM``."""
    if value in (None, ""):
        return ""
    try:
        stamp = (
            datetime.fromtimestamp(float(value) / 1000)
            if isinstance(value, int | float)
            else datetime.fromisoformat(str(value)).astimezone()
        )
    except (TypeError, ValueError, OverflowError):
        return str(value)[:16]
    return stamp.strftime("%m-%d %H:%M")


def number(value: Any) -> str:
    return (
        f"{value:.4g}" if isinstance(value, int | float) else ("" if value is None else str(value))
    )


def _main_metric(run: dict[str, Any]) -> str:
    metrics = run.get("metrics") or {}
    name = run.get("metric")
    key = f"test_{name}" if name and f"test_{name}" in metrics else None
    key = key or next((k for k in sorted(metrics) if k.startswith("test_")), None)
    return f"{key[5:]}={number(metrics[key])}" if key else ""


@dataclass
class AnswerTable:
    """A query's answer as rows of text: the CLI prints it with Rich, the dashboard's chat
    page as an HTML table, so both show the same cells (one formatter, two renderers)."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    #: columns that keep their width on a narrow terminal (ids, times)
    widths: dict[str, int] = field(default_factory=dict)
    caption: str = ""


def _row(table: AnswerTable, *cells: str) -> None:
    table.rows.append([str(cell) for cell in cells])


def _table(title: str, columns: list[str], widths: dict[str, int] | None = None) -> AnswerTable:
    return AnswerTable(title, columns, widths=dict(widths or {}))


def _runs(answer: dict[str, Any]) -> AnswerTable | str:
    scope = answer.get("scope")
    title = {
        "session": "runs of this conversation, newest first",
        "all": "runs of every experiment, newest first",
    }.get(str(scope), f"runs of experiment {answer.get('experiment')}, newest first")
    widths = {"run": 8, "experiment": 10, "created": 11, "status": 9, "metric": 16}
    table = _table(title, ["run", "experiment", "created", "status", "metric", "prompt"], widths)
    for run in answer.get("runs") or []:
        _row(
            table,
            str(run.get("run_id", ""))[:8],
            str(run.get("experiment") or answer.get("experiment") or ""),
            when(run.get("start_time")),
            str(run.get("state") or run.get("status") or ""),
            _main_metric(run),
            str(run.get("prompt") or "")[:50],
        )
    return table if answer.get("runs") else f"{title}: none yet"


def _best(answer: dict[str, Any]) -> AnswerTable:
    where = "this conversation" if answer.get("scope") == "session" else "the experiment"
    table = _table(f"best run of {where}, by {answer.get('ranked_by')}", ["", ""])
    _row(table, "run", str(answer.get("run_id", ""))[:8])
    _row(table, str(answer.get("ranked_by", "value")), number(answer.get("value")))
    _row(table, "created", when(answer.get("start_time")))
    _row(table, "prompt", str(answer.get("prompt") or "")[:60])
    _row(table, "model", str(answer.get("model_uri") or ""))
    return table


#: rows a side-by-side table shows at most, of metrics and of differing parameters
COMPARE_METRICS = 8
COMPARE_PARAMS = 8


def _compare(answer: dict[str, Any]) -> AnswerTable:
    runs = answer.get("runs") or []
    table = _table("runs side by side", ["", *(str(r.get("run_id", ""))[:8] for r in runs)])
    _row(table, "created", *(when(r.get("start_time")) for r in runs))
    _row(table, "template", *(str(r.get("template") or "") for r in runs))
    keys = [k for k in answer.get("metric_keys") or [] if not k.endswith("_std")]
    keys.sort(key=lambda k: (not k.startswith("test_"), k))  # held-out scores first
    for key in keys[:COMPARE_METRICS]:
        _row(table, key, *(number((r.get("metrics") or {}).get(key)) for r in runs))
    params = list(answer.get("differing_params") or [])
    params.sort(key=lambda p: (p != "model.family", p))
    for param in params[:COMPARE_PARAMS]:
        _row(table, param, *(str((r.get("params") or {}).get(param, ""))[:24] for r in runs))
    hidden = len(keys[COMPARE_METRICS:]) + len(params[COMPARE_PARAMS:])
    if hidden:
        ids = " ".join(str(r.get("run_id", ""))[:8] for r in runs)
        table.caption = f"{hidden} more rows: mlpilot runs compare {ids}"
    return table


def _study(answer: dict[str, Any]) -> AnswerTable:
    table = _table(f"study {answer.get('name')}", ["", ""])
    states = answer.get("states") or {}
    _row(
        table,
        "trials",
        f"{answer.get('n_trials')} ({', '.join(f'{k.lower()} {v}' for k, v in states.items() if v)})",
    )
    _row(table, "direction", str(answer.get("direction")))
    _row(table, "best value", number(answer.get("best_value")))
    for key, value in (answer.get("best_params") or {}).items():
        _row(table, f"  {key}", number(value))
    return table


def _data(answer: dict[str, Any]) -> AnswerTable:
    table = _table(
        f"{answer.get('path')}: {answer.get('rows')} rows", ["column", "kind", "missing", "unique"]
    )
    for column in answer.get("columns") or []:
        _row(
            table,
            str(column["name"]),
            str(column["kind"]),
            str(column["missing"]),
            str(column["unique"]),
        )
    return table


_RENDER = {
    "show_runs": _runs,
    "show_best_model": _best,
    "compare_runs": _compare,
    "show_study": _study,
    "describe_data": _data,
}


def answer_table(tool: str | None, answer: Any) -> AnswerTable | str | None:
    """What query ``tool`` answered, as a table or a line (a question back, "none yet");
    ``None`` when no table fits it (the caller shows it as JSON)."""
    if isinstance(answer, dict) and "question" in answer:
        return str(answer["question"])
    render = _RENDER.get(str(tool))
    if render is None or not isinstance(answer, dict):
        return None
    return render(answer)


def _rich(shown: AnswerTable) -> Any:
    """A borderless Rich table of plain text: run names, prompts and parameters come from
    runs, and a bracket in them is shown, never read as Rich markup (a pipeline could dress
    up lines); the columns not in ``widths`` give way on a narrow terminal."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(shown.title), title_justify="left", box=None, pad_edge=False)
    for column in shown.columns:
        width = shown.widths.get(column)
        table.add_column(Text(column), overflow="ellipsis", no_wrap=True, min_width=width)
    for row in shown.rows:
        table.add_row(*(Text(cell) for cell in row))
    if shown.caption:
        table.caption, table.caption_justify = shown.caption, "left"
    return table


def print_answer(tool: str | None, answer: Any) -> None:
    """The answer of query ``tool`` as a table (a question back as itself)."""
    out = console()
    shown = answer_table(tool, answer)
    if shown is None:
        from mlpilot.platform.cli._output import print_json

        print_json(answer)
    elif isinstance(shown, str):
        out.print(shown, markup=False)
    else:
        out.print(_rich(shown))
