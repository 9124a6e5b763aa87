"""``mlpilot doctor``: are MLflow, MongoDB, the LLM endpoint and the GPU usable? ``--repair``
replays the outbox and makes MongoDB agree with MLflow."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mlpilot.platform.cli._output import console, fail, handle_errors, print_json

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.health import Check

LLM_TIMEOUT_S = 5.0
_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}


def check_llm(settings: Settings) -> Check:
    """The planner in use; with a key, ``GET {base_url}/models`` answers within 5 s."""
    from mlpilot.tracking.health import FAIL, INFO, OK, WARN, Check

    if settings.llm == "offline":
        return Check("LLM", INFO, "offline planner in use (MLPILOT_LLM=offline)")
    if not settings.llm_api_key:
        if settings.llm == "openai":
            return Check(
                "LLM",
                FAIL,
                "MLPILOT_LLM=openai but no API key is set",
                "set NVIDIA_API_KEY (or OPENAI_API_KEY), or use MLPILOT_LLM=offline",
            )
        return Check("LLM", INFO, "offline planner in use (no NVIDIA_API_KEY / OPENAI_API_KEY)")
    base = settings.llm_base_url.rstrip("/")
    request = urllib.request.Request(
        f"{base}/models",
        headers={"Authorization": f"Bearer {settings.llm_api_key}", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=LLM_TIMEOUT_S) as response:
            body = response.read(2_000_000)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check("LLM", FAIL, f"{base} rejected the API key ({exc.code})", "check the key")
        return Check(
            "LLM", FAIL, f"{base}/models answered {exc.code}", "check MLPILOT_LLM_BASE_URL"
        )
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check(
            "LLM",
            FAIL,
            f"{base} is unreachable ({reason})",
            "check MLPILOT_LLM_BASE_URL, or use MLPILOT_LLM=offline",
        )
    try:
        models = [str(m.get("id")) for m in json.loads(body).get("data", [])]
    except (ValueError, AttributeError):
        return Check("LLM", WARN, f"{base}/models answered, but not with a model list")
    if settings.llm_model in models:
        return Check("LLM", OK, f"{base} answers; model {settings.llm_model} is available")
    return Check(
        "LLM",
        WARN,
        f"{base} answers, but does not list {settings.llm_model} ({len(models)} models)",
        "set MLPILOT_LLM_MODEL to one it serves",
    )


def check_gpu(refresh: bool = False) -> Check:
    """A usable CUDA device and the GPU probe's verdict (``refresh``: a new probe) decide
    whether engine auto picks the GPU."""
    from mlpilot.platform.execution import cuda_device_status, gpu_libraries_status
    from mlpilot.tracking.health import INFO, OK, WARN, Check

    device = cuda_device_status()
    if not device.usable:
        return Check("GPU", INFO, f"no usable GPU ({device.reason}); engine auto runs on the CPU")
    ok, why = gpu_libraries_status(refresh=refresh)
    name = f"{device.devices} × {device.name or 'CUDA device'}"
    if ok:
        return Check("GPU", OK, f"{name}; {why}")
    return Check("GPU", WARN, f"{name}, but {why}", "pip install 'mlpilot[gpu]'")


def run_checks(settings: Settings, *, refresh_gpu: bool = False) -> list[Check]:
    from mlpilot.tracking.health import check_metadata, check_mlflow, check_outbox, timed

    return [
        check_mlflow(settings),
        check_metadata(settings),
        timed("outbox", lambda: check_outbox(settings)),
        timed("LLM", lambda: check_llm(settings)),
        timed("GPU", lambda: check_gpu(refresh_gpu)),
    ]


def _print_checks(checks: list[Check]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table("check", "status", "detail", "time")
    for check in checks:
        detail = Text(check.detail)
        if check.hint:
            detail.append(f"\n→ {check.hint}", style="dim")
        table.add_row(
            check.name,
            Text(check.status, style=_STYLE.get(check.status, "")),
            detail,
            f"{check.seconds:.2f} s",
        )
    console().print(table)


def _print_repair(result: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    out = console()
    verb = "would change" if result["dry_run"] else "changed"
    out.print(
        f"Repair: replayed {result['replayed']} queued writes"
        f" ({result['still_queued']} still queued); checked {result['checked']} runs,"
        f" {verb} {len(result['changes'])}"
        + (f", {len(result['in_progress'])} in progress" if result["in_progress"] else ""),
        markup=False,
    )
    if result["changes"]:
        table = Table("run", "action", "detail")
        for change in result["changes"]:
            table.add_row(change["run_id"][:12], change["action"], Text(change["detail"]))
        out.print(table)
    for skipped in result["skipped"]:
        out.print(f"  skipped {skipped['run_id'][:12]}: {skipped['detail']}", markup=False)
    if result.get("rejected_file"):
        out.print(f"  writes the store refused are kept in {result['rejected_file']}", markup=False)


@handle_errors
def doctor(
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Replay the outbox and make MongoDB agree with MLflow."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --repair: report, change nothing.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    refresh_gpu: Annotated[
        bool,
        typer.Option(
            "--refresh-gpu", help="Run the GPU probe again instead of reading its cached verdict."
        ),
    ] = False,
) -> None:
    """Check MLflow, MongoDB, the outbox, the LLM endpoint and the GPU."""
    from mlpilot.platform.config import get_settings
    from mlpilot.tracking.health import FAIL

    settings = get_settings()
    checks = run_checks(settings, refresh_gpu=refresh_gpu)
    failed = [c for c in checks if c.status == FAIL]
    result: dict[str, Any] = {"checks": [c.to_dict() for c in checks]}
    repair_error = None
    if repair:
        blocking = [c for c in failed if c.name in ("MLflow", "MongoDB")]
        if blocking:
            repair_error = "cannot repair: " + "; ".join(c.detail for c in blocking)
        else:
            from mlpilot.platform.ml.protocol import RESULT_FILE
            from mlpilot.tracking.health import repair as run_repair

            result["repair"] = run_repair(settings, dry_run=dry_run, result_file=RESULT_FILE)
    if json_out:
        print_json(result)
    else:
        _print_checks(checks)
        if "repair" in result:
            _print_repair(result["repair"])
    if repair_error:
        fail(repair_error)
    if failed:
        fail(f"{len(failed)} check(s) failed: " + ", ".join(c.name for c in failed))
