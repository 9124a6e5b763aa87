"""``mlpilot chat``: a multi-turn REPL over one session stored in the metadata store."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from mlpilot.platform.cli._output import console, handle_errors

HELP = """Type a request ("train a random forest to predict sales", "now try xgboost",
"tune it with 50 trials", "which run was best?", "compare the last two",
"compare with xgboost", "register the best one", "用xgboost再试一次"). Questions about
runs answer from this conversation's runs as a table ("show the last 5 runs of every
experiment" looks further); "compare with X" runs X, then shows it beside the earlier
runs; a line mlpilot cannot place is asked back, never trained. Commands:
  /data FILE     use this data file from now on
  /target COL    predict this column from now on
  /context       show what the session remembers
  /history       show the conversation so far
  /quit          leave (also quit, exit, bye, 退出 or Ctrl-D; the session stays stored,
                 resume it with --session ID)"""
#: a line that is only one of these ends the chat: it is never planned as a request
EXIT_WORDS = frozenset(
    {"quit", "exit", "bye", "goodbye", "q", ":q", "/quit", "/exit", "/q", "quit()", "exit()"}
    | {"退出", "再见", "拜拜", "结束"}
)


def is_exit(line: str) -> bool:
    """Whether ``line`` asks to leave ("quit", "Bye!", "退出。")."""
    return re.sub(r"[\s.!。！~]+$", "", line.strip().lower()) in EXIT_WORDS


@handle_errors
def chat(
    data: Annotated[
        str | None, typer.Option("--data", "-d", help="Data file for this session.")
    ] = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Column to predict.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Resume this session.")] = None,
    experiment: Annotated[
        str | None, typer.Option("--experiment", help="MLflow experiment.")
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", "-e", help="auto, cpu, gpu or compare.")
    ] = None,
) -> None:
    """Talk to mlpilot: every message plans and runs against the session's context."""
    from pathlib import Path

    from mlpilot.platform.agent.sessions import load_session, save_session
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.metadata import open_store

    settings = get_settings()
    store = open_store(settings)
    current = load_session(store, session)
    if data:
        current.remember(data_path=str(Path(data).expanduser().resolve()))
    if target:
        current.remember(target=target)
    if experiment:
        current.remember(experiment=experiment)
    save_session(store, current)
    out = console()
    out.print(
        f"mlpilot chat — session {current.id} (/help for commands, /quit to leave)", markup=False
    )
    while True:
        try:
            line = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            out.print("")
            break
        if not line:
            continue
        if is_exit(line):
            break
        if line.startswith("/"):
            _command(line, store, current.id)
            continue
        _request(line, current.id, engine, experiment, settings, store)
    out.print(
        f"session {current.id} saved; resume with: mlpilot chat --session {current.id}",
        markup=False,
    )


def _command(line: str, store: Any, session_id: str) -> None:
    """One ``/command`` line: it changes or shows the session, and plans nothing."""
    from pathlib import Path

    from mlpilot.platform.agent.sessions import load_session, save_session

    out = console()
    command, _, rest = line.partition(" ")
    if command == "/help":
        out.print(HELP, markup=False)
    elif command == "/data" and rest:
        path = Path(rest.strip()).expanduser().resolve()
        if not path.exists():
            out.print(f"error: data file not found: {path}", markup=False)
            return
        current = load_session(store, session_id)
        current.remember(data_path=str(path))
        save_session(store, current)
        out.print(f"data: {path}", markup=False)
    elif command == "/target" and rest:
        current = load_session(store, session_id)
        current.remember(target=rest.strip())
        save_session(store, current)
        out.print(f"target: {rest.strip()}", markup=False)
    elif command == "/context":
        out.print_json(data=load_session(store, session_id).context)
    elif command == "/history":
        for message in load_session(store, session_id).messages:
            out.print(f"{message['role']}: {message['content']}", markup=False)
    else:
        out.print(f"unknown command {command!r}; /help lists them", markup=False)


def _request(
    line: str,
    session_id: str,
    engine: str | None,
    experiment: str | None,
    settings: Any,
    store: Any,
) -> None:
    """One request line: planned and run (or answered, or asked back) in the session."""
    from mlpilot.platform.agent.orchestrator import run_request
    from mlpilot.platform.agent.request import RunRequest
    from mlpilot.platform.agent.sessions import load_session
    from mlpilot.platform.cli.progress import ConsoleProgress, print_outcome
    from mlpilot.platform.errors import MlpilotError
    from mlpilot.platform.llm.offline import asks_to_compare

    try:
        # the runs before this line, read only when the line compares (the run adds itself)
        earlier = _scored_runs(load_session(store, session_id)) if asks_to_compare(line) else []
        outcome = run_request(
            RunRequest(
                prompt=line,
                session_id=session_id,
                engine=engine,
                experiment=experiment,
                ask_back=True,
            ),
            progress=ConsoleProgress(),
            settings=settings,
        )
        print_outcome(outcome)
        if earlier and outcome.status == "SUCCEEDED" and outcome.run_id:
            _compare_after(outcome, earlier, settings, store)
    except MlpilotError as exc:
        console().print(f"error: {exc.one_line()}", markup=False)


#: how many earlier runs a follow-up comparison shows beside the new one
COMPARED_RUNS = 3


def _scored_runs(session: Any) -> list[str]:
    """The session's runs that have metrics (trained models), oldest first."""
    return [r["run_id"] for r in session.context.get("runs") or [] if r.get("metrics")]


def _compare_after(outcome: Any, earlier: list[str], settings: Any, store: Any) -> None:
    """After "compare with X": the new run beside the conversation's earlier runs."""
    from mlpilot.platform.cli.answers import print_answer
    from mlpilot.platform.tools import queries

    context = queries.QueryContext(settings=settings, store=store, experiment=outcome.experiment)
    ids = [*earlier[-COMPARED_RUNS:], outcome.run_id]
    print_answer("compare_runs", queries.compare_runs(context, ids))
