"""``mlpilot models``: register, list, version, promote (aliases) and show lineage."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer

from mlpilot.platform.cli._output import console, handle_errors, print_json
from mlpilot.platform.errors import MlpilotError

logger = logging.getLogger(__name__)

app = typer.Typer(
    help="The model registry: versions with lineage, and aliases such as champion.",
    no_args_is_help=True,
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _client() -> Any:
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.mlflow_store import make_client

    return make_client(get_settings())


def _text(value: Any) -> Any:
    from rich.text import Text

    return Text("" if value is None else str(value))


@app.command("register")
@handle_errors
def register(
    run_id: Annotated[str, typer.Argument(help="Run that logged the model (id or unique prefix).")],
    name: Annotated[str, typer.Option("--name", "-n", help="Registered model name.")],
    alias: Annotated[
        str | None, typer.Option("--alias", "-a", help="Alias to point at the new version.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Register the model a run logged as a new version of NAME, with lineage tags."""
    from mlpilot.tracking import registry

    if alias is not None:
        check_alias(alias)  # before anything exists: a refused alias leaves no version behind
    version = registry.register_run(_client(), _store(), run_id, name, alias, by="cli")
    source_run, model_uri = version["source_run"], version["model_uri"]
    if json_out:
        print_json(version)
        return
    console().print(
        f"registered {name} version {version['version']}"
        + (f" as @{alias}" if alias else "")
        + f" from run {source_run} ({model_uri})",
        markup=False,
    )


def check_alias(alias: str) -> None:
    """Refuse an alias MLflow would refuse, in one line, by MLflow's own rules."""
    from mlpilot.tracking import registry

    problem = registry.alias_problem(alias)
    if problem:
        raise MlpilotError(
            f"alias {alias!r} is refused: {problem}",
            hint="an alias is letters, digits, _ and - (e.g. champion), neither latest nor v<N>",
        )


def _store() -> Any:
    """The metadata store the registry's changes are noted on (queued when it is down)."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.metadata import open_store

    try:
        return open_store(get_settings())
    except MlpilotError as exc:  # down, a refused login, a full disk: the registry decides
        logger.info("registry changes not noted in the metadata store: %s", exc)
        return None  # the registry is the record; the document catches up on the next repair


@app.command("list")
@handle_errors
def list_models(json_out: JsonOpt = False) -> None:
    """Registered models with their latest version and aliases."""
    from mlpilot.tracking import registry

    models = registry.list_models(_client())
    if json_out:
        print_json(models)
        return
    from rich.table import Table

    if not models:
        console().print("no registered models yet (mlpilot models register RUN_ID --name NAME)")
        return
    table = Table("name", "versions", "latest", "aliases", "updated")
    for m in models:
        aliases = ", ".join(f"@{a}→v{v}" for a, v in m["aliases"].items())
        table.add_row(
            _text(m["name"]),
            str(m["versions"]),
            str(m["latest_version"] or "—"),
            aliases,
            m["updated_at"] or "",
        )
    console().print(table)


@app.command("versions")
@handle_errors
def versions(
    name: Annotated[str, typer.Argument(help="Registered model name.")], json_out: JsonOpt = False
) -> None:
    """Every version of NAME, newest first: aliases, source run, metric."""
    from mlpilot.tracking import registry

    rows = registry.list_versions(_client(), name)
    if json_out:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("version", "aliases", "source run", "metric", "created", "status")
    for v in rows:
        metric = (
            f"test_{v['metric']}={v['metric_value']:.4g}"
            if v["metric"] and v["metric_value"] is not None
            else ""
        )
        table.add_row(
            v["version"],
            ", ".join(f"@{a}" for a in v["aliases"]),
            (v["source_run"] or "")[:12],
            metric,
            v["created_at"] or "",
            v["status"] or "",
        )
    console().print(table)


@app.command("promote")
@handle_errors
def promote(
    name: Annotated[str, typer.Argument(help="Registered model name.")],
    version: Annotated[str, typer.Argument(help="Version number to promote.")],
    alias: Annotated[str, typer.Option("--alias", "-a", help="Alias to set.")] = "champion",
    json_out: JsonOpt = False,
) -> None:
    """Point NAME@ALIAS (default champion) at VERSION; aliases, never stages."""
    from mlpilot.tracking import registry

    check_alias(alias)
    result = registry.move_alias(_client(), _store(), name, version, alias, by="cli")
    if json_out:
        print_json(result)
        return
    before = f" (was version {result['previous']})" if result["previous"] else ""
    console().print(f"{name}@{alias} → version {version}{before}", markup=False)


@app.command("show")
@handle_errors
def show(
    ref: Annotated[str, typer.Argument(help="NAME@ALIAS, NAME/VERSION or NAME (latest).")],
    json_out: JsonOpt = False,
) -> None:
    """A model version with its lineage: source run, prompt, plan, dataset, metrics."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking import registry
    from mlpilot.tracking.metadata import StoreUnavailable, connect

    settings = get_settings()
    client = _client()
    try:
        store: Any = connect(settings)
    except StoreUnavailable:
        store = None
    info = registry.describe_version(client, registry.parse_model_ref(ref), store)
    if json_out:
        print_json(info)
        return
    _print_version(info)


def _print_version(info: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    lineage = info["lineage"]
    aliases = ", ".join(f"@{a}" for a in info["aliases"]) or "no alias"
    out.print(
        f"{info['name']} version {info['version']} ({aliases}, {info['status']})", markup=False
    )
    rows = [
        ("model uri", info["model_uri"]),
        ("load with", f"models:/{info['name']}/{info['version']}"),
        ("source run", f"{lineage['source_run']} ({lineage['run_status']})"),
        ("prompt", lineage["prompt"]),
        ("target / task", f"{lineage['target'] or '?'} / {lineage['task'] or '?'}"),
        ("dataset", _dataset_line(lineage)),
        ("created", info["created_at"]),
    ]
    if lineage["metric"]:
        rows.append(("ranked by", f"test_{lineage['metric']} = {lineage['metric_value']}"))
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(key, _text(value))
    out.print(table)
    plan = lineage.get("plan")
    if plan:
        out.print(f"plan ({plan.get('template')}):", markup=False)
        for i, step in enumerate(plan.get("steps", []), 1):
            args = ", ".join(f"{k}={v!r}" for k, v in step.get("args", {}).items())
            out.print(f"  {i}. {step.get('tool')}({args})", markup=False)
    metrics = {
        k: v for k, v in lineage["metrics"].items() if k.startswith(("test_", "cv_", "hpo_"))
    }
    if metrics:
        out.print("metrics: " + ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()), markup=False)


def _dataset_line(lineage: dict[str, Any]) -> str:
    dataset = lineage.get("dataset") or {}
    parts = [
        lineage.get("dataset_fingerprint") or dataset.get("fingerprint") or dataset.get("digest")
    ]
    where = dataset.get("path") or dataset.get("source")
    if where:
        parts.append(str(where))
    if dataset.get("rows"):
        parts.append(f"{dataset['rows']} rows")
    return "  ".join(p for p in parts if p) or "?"


@app.command("verify")
@handle_errors
def verify(
    ref: Annotated[str, typer.Argument(help="NAME/VERSION, NAME@ALIAS or a models:/ URI.")],
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Record the files' digests now in this home's private store (you vouch "
            "for the model as it is; with a shared tracking server, for this home only).",
        ),
    ] = False,
) -> None:
    """Check a model's files against the digests this home recorded when it was logged."""
    import tempfile
    from pathlib import Path

    from mlpilot.platform.agent.predicting import normalize_model_uri
    from mlpilot.tracking import trust

    client = _client()
    uri = normalize_model_uri(ref)
    with tempfile.TemporaryDirectory() as tmp:
        actual = trust.digest_folder(trust.download(uri, Path(tmp), client))
    expected = trust.recorded_digests(client, uri)
    out = console()
    if record:
        trust.vouch(client, uri, actual)
        differs = expected is not None and trust.compare(expected, actual)
        out.print(
            f"recorded the digests of {len(actual)} files of {uri} in this home's private store"
            + (f" (they replace a different record: {differs})" if differs else ""),
            markup=False,
        )
        return
    if expected is None:
        raise trust.unverified_error(client, uri)
    problem = trust.compare(expected, actual)
    if problem:
        raise MlpilotError(
            f"{uri} does not match its recorded digests: {problem}",
            hint="its files changed after they were recorded: predict refuses to load it",
        )
    out.print(f"{uri}: all {len(actual)} files match their recorded digests", markup=False)
