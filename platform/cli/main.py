"""The ``mlpilot`` command line. Heavy libraries are imported inside commands only."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mlpilot.platform.cli import (
    catalog,
    chat,
    dashboard,
    datasets,
    doctor,
    families,
    models,
    runs,
    worker,
)
from mlpilot.platform.cli._output import console, fail, handle_errors, parse_params, print_json
from mlpilot.platform.errors import describe_error

app = typer.Typer(
    name="mlpilot",
    help="Turn one sentence into a tracked machine-learning experiment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

Prompt = Annotated[str, typer.Argument(help="What to do, in plain English or Chinese.")]
DataOpt = Annotated[
    str | None, typer.Option("--data", "-d", help="Data file (CSV, Parquet, JSON lines).")
]
TargetOpt = Annotated[str | None, typer.Option("--target", "-t", help="Column to predict.")]
TemplateOpt = Annotated[
    str | None, typer.Option("--template", help="Use a workflow template instead of planning.")
]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", help="Template parameter key=value (repeatable)."),
]
PluginsOpt = Annotated[
    list[str] | None,
    typer.Option("--plugins", help="Module with extra @tool definitions (repeatable)."),
]
SessionOpt = Annotated[str | None, typer.Option("--session", help="Continue this session.")]
AllowReadOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-read",
        help="A folder the plan may read files from, besides --data (repeatable).",
    ),
]
AdapterOpt = Annotated[
    str | None,
    typer.Option(
        "--adapter",
        help="Domain adapter to use (finance, medical, retail, a plugin's), or 'none' for none.",
    ),
]


@app.command()
@handle_errors
def plan(
    prompt: Prompt = "",
    data: DataOpt = None,
    target: TargetOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the plan object.")] = False,
    template: TemplateOpt = None,
    param: ParamOpt = None,
    plugins: PluginsOpt = None,
    session: SessionOpt = None,
    adapter: AdapterOpt = None,
) -> None:
    """Plan a request and print the plan; nothing runs and no run is created."""
    from mlpilot.platform.agent.planning import plan_request
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.tools import default_registry

    settings = get_settings()
    context = {}
    if session:
        from mlpilot.platform.agent.sessions import load_session
        from mlpilot.tracking.metadata import open_store

        context = load_session(open_store(settings), session).context
    result, _ = plan_request(
        settings,
        prompt,
        data_path=data,
        target=target,
        template=template,
        template_params=parse_params(param),
        registry=default_registry(plugins or ()),
        context=context,
        adapter=adapter,
    )
    if json_out:
        print_json(result.plan.to_dict())
        return
    out = console()
    out.print(
        f"[bold]Plan[/bold] (planner: {result.planner}, template: {result.plan.template}, engine: {result.plan.engine}, adapter: {result.plan.adapter or 'none'})"
    )
    for i, step in enumerate(result.plan.steps, 1):
        args = ", ".join(f"{k}={v!r}" for k, v in step.args.items())
        out.print(f"  {i}. {step.tool}({args})", markup=False)
    for note in result.notes:
        out.print(f"  note: {note}", markup=False)
    if result.plan.rationale:
        out.print(f"  {result.plan.rationale}", markup=False)


@app.command()
@handle_errors
def run(
    prompt: Prompt = "",
    data: DataOpt = None,
    target: TargetOpt = None,
    engine: Annotated[
        str | None,
        typer.Option("--engine", "-e", help="auto, cpu, gpu or compare (overrides the plan)."),
    ] = None,
    experiment: Annotated[
        str | None, typer.Option("--experiment", help="MLflow experiment (default: mlpilot).")
    ] = None,
    template: TemplateOpt = None,
    param: ParamOpt = None,
    plugins: PluginsOpt = None,
    session: SessionOpt = None,
    plan_file: Annotated[
        str | None,
        typer.Option("--plan", help="Run this plan (JSON, as printed by mlpilot plan --json)."),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat",
            min=1,
            help="--engine compare: measured runs per leg after one warm-up, best reported "
            "(default: MLPILOT_COMPARE_REPEAT, 3).",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    allow_read: AllowReadOpt = None,
    adapter: AdapterOpt = None,
) -> None:
    """Plan, generate and run a tracked experiment."""
    from mlpilot.platform.agent.orchestrator import run_request
    from mlpilot.platform.agent.request import RunRequest
    from mlpilot.platform.cli import INVOKED_AT
    from mlpilot.platform.cli.progress import ConsoleProgress, print_outcome

    request = RunRequest(
        prompt=prompt,
        data_path=data,
        target=target,
        engine=engine,
        experiment=experiment,
        template=template,
        template_params=parse_params(param),
        plugins=tuple(plugins or ()),
        session_id=session,
        plan_file=plan_file,
        allow_read=tuple(allow_read or ()),
        adapter=adapter,
        received_at=INVOKED_AT,
    )
    progress = ConsoleProgress(quiet=json_out)
    settings = None
    if repeat is not None:
        from mlpilot.platform.config import get_settings

        settings = get_settings().with_overrides(compare_repeat=repeat)
    outcome = run_request(request, progress=progress, settings=settings)
    if json_out:
        print_json(outcome.to_dict())
    else:
        print_outcome(outcome)
    if outcome.status not in ("SUCCEEDED", "ANSWERED"):
        message = describe_error(outcome.error) or f"the run ended {outcome.status}"
        fail(" ".join(str(message).split()), 130 if outcome.status == "CANCELLED" else 1)


@app.command()
@handle_errors
def predict(
    model: Annotated[
        str, typer.Option("--model", "-m", help="MLflow model URI, e.g. models:/NAME@champion.")
    ],
    data: Annotated[str, typer.Option("--data", "-d", help="File with rows to predict.")],
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="Output file (default: print CSV to stdout).")
    ] = None,
    trust_unverified: Annotated[
        bool,
        typer.Option(
            "--trust-unverified", help="Load a model logged before digests were recorded."
        ),
    ] = False,
    trust_local_model: Annotated[
        bool,
        typer.Option("--trust-local-model", help="Load a model folder from disk (unverified)."),
    ] = False,
    proba: Annotated[
        bool,
        typer.Option(
            "--proba",
            help="Classifiers: also write each class's probability (columns proba_<class>).",
        ),
    ] = False,
) -> None:
    """Predict raw rows with a logged or registered model (loaded in a contained process,
    after its files are checked against the digests recorded when it was logged)."""
    from mlpilot.platform.agent.predicting import predict_file

    path, rows = predict_file(
        model,
        data,
        out,
        trust_unverified=trust_unverified,
        trust_local=trust_local_model,
        proba=proba,
    )
    if out:
        console(stderr=True).print(f"wrote {rows} predictions to {path}", markup=False)


@app.command()
def version() -> None:
    """Print mlpilot's version."""
    from importlib.metadata import version as _version

    typer.echo(_version("mlpilot"))


# After plan/run/predict/version above, in the order `mlpilot --help` lists them.
app.command("chat")(chat.chat)
app.add_typer(runs.app, name="runs")
app.add_typer(models.app, name="models")
app.command("dashboard")(dashboard.dashboard)
app.command("worker")(worker.worker)
app.command("doctor")(doctor.doctor)
app.add_typer(catalog.templates_app, name="templates")
app.add_typer(catalog.tools_app, name="tools")
app.add_typer(families.app, name="families")
app.add_typer(datasets.app, name="datasets")


def main() -> None:
    from mlpilot.platform.cli._output import guard_closed_pipes
    from mlpilot.platform.config import interrupts
    from mlpilot.platform.config.logs import configure_logging

    guard_closed_pipes()
    configure_logging()
    interrupts.install()  # SIGINT, SIGTERM, SIGHUP: the run ends CANCELLED in both stores
    if sys.argv[1:2] != ["run"]:
        app()
        return
    # `mlpilot run` has written and closed every record when the command returns; skip
    # the third of a second the interpreter spends tearing MLflow and pandas down.
    try:
        app()
        code: int = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    from mlpilot.platform.ml.entry import exit_process

    exit_process(code)


if __name__ == "__main__":
    main()
