"""``mlpilot runs``: list, show and compare runs (ids may be unique prefixes)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from mlpilot.platform.cli._output import console, handle_errors, print_json
from mlpilot.platform.errors import describe_error
from mlpilot.tracking import vocab
from mlpilot.tracking.vocab import RunState

app = typer.Typer(help="List, show and compare runs.", no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
_STATUS_STYLE = {RunState.SUCCEEDED: "green", RunState.FAILED: "red", RunState.CANCELLED: "yellow"}


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def _text(value: Any, style: str = "") -> Any:
    from rich.text import Text

    return Text("" if value is None else str(value), style=style)


def _status(value: str | None) -> Any:
    return _text(value, _STATUS_STYLE.get(value or "", "cyan"))


def _stores(*, need_mlflow: bool) -> tuple[Any, Any]:
    """(MLflow client or None, metadata store or None); at least one, or an error."""
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.errors import TrackingError
    from mlpilot.tracking.metadata import StoreUnavailable, connect
    from mlpilot.tracking.mlflow_store import make_client

    settings = get_settings()
    store = client = None
    try:
        store = connect(settings)
    except StoreUnavailable as exc:
        _warn(f"{exc.message}; reading MLflow only")
    try:
        client = make_client(settings)
    except TrackingError as exc:
        if need_mlflow or store is None:
            raise
        _warn(f"{exc.one_line()}; showing the metadata store only")
    return client, store


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


@app.command("list")
@handle_errors
def list_runs(
    experiment: Annotated[
        str | None, typer.Option("--experiment", "-e", help="Only this experiment.")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", "-s", help="Only this status, e.g. SUCCEEDED.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 20,
    json_out: JsonOpt = False,
) -> None:
    """The newest runs, from the metadata store (MLflow when the store is down)."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking import runs
    from mlpilot.tracking.metadata import StoreUnavailable, connect

    settings = get_settings()
    runs.check_status(status)
    try:
        rows = runs.list_runs(connect(settings), experiment=experiment, status=status, limit=limit)
    except StoreUnavailable as exc:
        from mlpilot.tracking.mlflow_store import make_client

        _warn(f"{exc.message}; listing from MLflow")
        rows = runs.list_runs_from_mlflow(
            make_client(settings), experiment=experiment, status=status, limit=limit
        )
    if json_out:
        print_json(rows)
        return
    if not rows:
        console().print("no runs yet", markup=False)
        return
    console().print(_runs_table(rows, console().width))


#: (column, the narrowest console that shows it): at 80 columns the id, time, status, metric,
#: duration and the start of the prompt; experiment, template and engine join as room allows
_LIST_COLUMNS = (
    ("run", 0),
    ("created", 0),
    ("experiment", 120),
    ("status", 0),
    ("template", 100),
    ("engine", 140),
    ("metric", 0),
    ("time", 0),
    ("prompt", 0),
)


def _runs_table(rows: list[dict[str, Any]], width: int) -> Any:
    """The runs as a table that fits ``width``: whole cells, one line per run."""
    from rich import box
    from rich.table import Table

    shown = [name for name, narrowest in _LIST_COLUMNS if width >= narrowest]
    cells = [_list_cells(r) for r in rows]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    widths = {n: max([len(n)] + [len(str(c[n])) for c in cells]) for n in shown}
    for name in ("experiment", "template"):
        widths[name] = min(widths.get(name, 0), 16)
    # the prompt is the one cell that gives way: what is left of the line, cut with an ellipsis
    widths["prompt"] = max(12, width - sum(widths[n] + 3 for n in shown if n != "prompt") - 3)
    for name in shown:
        table.add_column(
            name, no_wrap=True, overflow="ellipsis", min_width=widths[name], max_width=widths[name]
        )
    for c in cells:
        table.add_row(*[c[name] for name in shown])
    return table


def _list_cells(r: dict[str, Any]) -> dict[str, Any]:
    metric = (
        f"{r['main_metric']}={_number(r['value'])}"
        if r["main_metric"] and r["value"] is not None
        else ""
    )
    created = (r["created_at"] or "")[:19].replace("T", " ")
    return {
        "run": r["run_id"][:8],
        "created": created[5:16],  # MM-DD HH:MM: the year and seconds rarely tell runs apart
        "experiment": _text(r["experiment"]),
        "status": _status(r["status"]),
        "template": _text(r["template"]),
        "engine": _text(r["engine"]),
        "metric": metric,
        "time": f"{r['duration_s']:.1f} s" if r["duration_s"] is not None else "",
        "prompt": _text(" ".join((r["prompt"] or "").split())),
    }


@app.command("show")
@handle_errors
def show(
    run_id: Annotated[str, typer.Argument(help="Run id or unique prefix.")],
    json_out: JsonOpt = False,
) -> None:
    """One run: plan, code path, metrics, timings, events."""
    from mlpilot.tracking import runs

    client, store = _stores(need_mlflow=False)
    info = runs.show(client, store, run_id)
    if json_out:
        print_json(info)
        return
    for warning in info["warnings"]:
        _warn(warning)
    _print_run(info)


def _fallback(fallback: dict[str, Any] | None) -> str | None:
    """The CPU rerun of an auto run's failed GPU leg: where it failed, and with what."""
    if not fallback:
        return None
    return f"the {fallback.get('from')} leg failed in {fallback.get('stage') or '?'}: {fallback.get('error')}"


def _study(study: Any) -> str | None:
    if not isinstance(study, dict) or not study.get("name"):
        return None
    trials = study.get("n_trials")
    return f"{study['name']}" + (f" ({trials} trials)" if trials is not None else "")


def _run_fields(info: dict[str, Any]) -> list[tuple[str, Any]]:
    """The rows of ``runs show``'s table, in order (empty ones are left out when printed)."""
    engine = info.get("engine") or {}
    fields = [
        ("experiment", info["experiment"]),
        ("prompt", info["prompt"]),
        ("planner", info["planner"]),
        ("template", info["template"]),
        (
            "engine",
            f"{engine.get('used')} (requested {engine.get('requested')})" if engine else None,
        ),
        ("GPU rerun", _fallback(engine.get("fallback"))),
        ("target / task", f"{info['target'] or '?'} / {info['task'] or '?'}"),
        ("created", info["created_at"]),
        ("finished", info["finished_at"]),
        ("duration", f"{info['duration_s']} s" if info["duration_s"] is not None else None),
        ("pipeline", info["pipeline_path"]),
        ("run dir", info["run_dir"]),
        ("artifacts", info["artifact_uri"]),
        ("model", (info.get("model") or {}).get("uri")),
        ("study", _study(info.get("study"))),
        ("session", info["session_id"]),
    ]
    dataset = info.get("dataset") or {}
    if dataset:
        fields.append(
            (
                "dataset",
                "  ".join(
                    str(dataset[k]) for k in ("path", "fingerprint", "rows") if dataset.get(k)
                ),
            )
        )
    if info.get("error"):
        fields.append(("error", describe_error(info["error"])))
    contained = info.get("containment")
    if contained:
        fields.append(("contained", f"user {contained['user']}; network {contained['network']}"))
    return fields


def _print_run(info: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    out.print(_text(f"run {info['run_id']}  ", "bold") + _status(info["status"]))
    table = Table(show_header=False, box=None)
    for key, value in _run_fields(info):
        if value not in (None, ""):
            table.add_row(key, _text(value))
    out.print(table)
    plan = info.get("plan") or {}
    if plan.get("steps"):
        out.print("plan:", markup=False)
        for i, step in enumerate(plan["steps"], 1):
            args = ", ".join(f"{k}={v!r}" for k, v in step.get("args", {}).items())
            out.print(f"  {i}. {step.get('tool')}({args})", markup=False)
    shown = {k: v for k, v in info["metrics"].items() if not k.startswith("time_")}
    if shown:
        metrics = Table("metric", "value")
        for key, value in shown.items():
            metrics.add_row(key, _number(value))
        out.print(metrics)
    if info["timings"]:
        timings = Table("stage", "seconds")
        for stage, seconds in info["timings"].items():
            timings.add_row(stage, _number(seconds))
        out.print(timings)
    if info["events"]:
        events = Table("at", "state", "message")
        for event in info["events"]:
            events.add_row(
                (event["at"] or "")[11:19], _status(event["state"]), _text(event["message"])
            )
        out.print(events)


@app.command("compare")
@handle_errors
def compare(
    run_ids: Annotated[list[str], typer.Argument(help="Two or more run ids (or unique prefixes).")],
    json_out: JsonOpt = False,
) -> None:
    """Runs side by side: status, template, engine, metrics, timings, differing params."""
    from mlpilot.tracking import runs

    client, store = _stores(need_mlflow=False)
    result = runs.compare(client, store, run_ids)
    if json_out:
        print_json(result)
        return
    from rich.table import Table

    columns = result["runs"]
    table = Table("", *[c["run_id"][:12] for c in columns])

    def row(label: str, values: list[Any], style: str = "") -> None:
        table.add_row(
            _text(label, style), *[v if not isinstance(v, str) else _text(v) for v in values]
        )

    row("status", [_status(c["status"]) for c in columns])
    row("template", [c["template"] or "" for c in columns])
    row("engine", [(c["engine"] or {}).get("used") or "" for c in columns])
    row("planner", [c["planner"] or "" for c in columns])
    row("rows", [str((c["dataset"] or {}).get("rows") or "") for c in columns])
    row(
        "duration", [f"{c['duration_s']} s" if c["duration_s"] is not None else "" for c in columns]
    )
    for key in result["metric_keys"]:
        best = result["best"].get(key)
        row(
            key,
            [
                _text(_number(c["metrics"].get(key)), "bold green" if c["run_id"] == best else "")
                for c in columns
            ],
        )
    for stage in result["stages"]:
        row(f"time {stage} (s)", [_number(c["timings"].get(stage)) for c in columns], "dim")
    for param in result["differing_params"]:
        row(f"param {param}", [str(c["params"].get(param, "")) for c in columns], "dim")
    console().print(table)


@app.command("cancel")
@handle_errors
def cancel(
    run_id: Annotated[str, typer.Argument(help="Run id (a unique prefix is enough).")],
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait for the run to stop.")
    ] = 30.0,
) -> None:
    """Stop a run started elsewhere: CANCELLED in MongoDB, KILLED in MLflow."""
    from mlpilot.platform.agent.cancelling import cancel_run
    from mlpilot.platform.config import get_settings

    report = cancel_run(get_settings(), run_id, wait_s=wait)
    console().print(report.message, markup=False)
    if report.status not in vocab.TERMINAL_STATES:
        raise typer.Exit(2)
