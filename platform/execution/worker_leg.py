"""``mlpilot worker``'s trial loop in a contained child, like any pipeline leg (DESIGN §8).

The worker process is trusted (it may hold storage and tracking credentials); the trials
replay a recipe read from shared storage, so they run where a pipeline runs: a child
started through ``Executor.start_leg`` (user drop, limits, network namespace where the
stores allow, parent-death signal), with the data handed over as a descriptor and the
study reachable only through the storage proxy. The proxy's policy: load only this one
study (create none), and a recipe only with the functions the worker allows. The child
writes its report into its folder; the worker reads it without following links, takes the
trial count from the proxy (the trials the child created), and logs the trials itself.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import ExecutionError
from mlpilot.platform.execution import Executor, Limits
from mlpilot.platform.execution.optuna_proxy import StudyPolicy
from mlpilot.platform.ml.hpo.worker import JOB_FILE, REPORT_FILE
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

logger = logging.getLogger(__name__)

SCRIPT_NAME = "worker.py"
REPORT_LIMIT = 64 * 1024
#: beyond a worker's own --timeout: preparing the data, the last trial, the report
TIMEOUT_MARGIN_S = 600.0
_SCRIPT = '''"""The contained trial loop of `mlpilot worker` (written by mlpilot; reads worker-job.json)."""

from mlpilot.platform.ml.entry import exit_process
from mlpilot.platform.ml.hpo.worker import child_main

if __name__ == "__main__":
    exit_process(child_main())
'''


def contained_launcher(settings: Any, storage_url: str) -> Callable[..., tuple[dict, list[int]]]:
    """``run_worker``'s ``launch``: each call runs one contained trial loop."""

    def launch(
        job: dict[str, Any], data_path: str | None, engine: str, on_event: Any
    ) -> tuple[dict[str, Any], list[int]]:
        return run_contained(settings, storage_url, job, data_path, engine, on_event)

    return launch


def run_contained(
    settings: Any,
    storage_url: str,
    job: dict[str, Any],
    data_path: str | None,
    engine: str,
    on_event: Any = None,
) -> tuple[dict[str, Any], list[int]]:
    """Run ``job`` in a contained child; (its report, the ids of the trials it created)."""
    folder = settings.home / "workers"
    folder.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"{time.strftime('%Y%m%d-%H%M%S')}-", dir=folder))
    script = run_dir / SCRIPT_NAME
    script.write_text(_SCRIPT, encoding="utf-8")
    (run_dir / JOB_FILE).write_text(json.dumps(job), encoding="utf-8")
    leg_settings = dataclasses.replace(settings, optuna_storage=storage_url)
    timeout = max(settings.run_timeout_s, float(job.get("timeout_s") or 0) + TIMEOUT_MARGIN_S)
    executor = Executor(
        leg_settings,
        Limits(
            timeout_s=timeout,
            file_size_mb=settings.max_file_mb,
            run_disk_mb=settings.max_run_disk_mb,
        ),
    )
    policy = StudyPolicy(names=frozenset({job["study"]}), functions=frozenset(job["allowed"]))
    leg = executor.start_leg(
        script=script,
        run_dir=run_dir,
        engine=engine,
        data_path=data_path,
        mlflow_run_id=None,
        track=False,
        study_policy=policy,
    )
    proxy = leg.proxy
    result = leg.finish(on_event=on_event)
    trial_ids = sorted(proxy.own) if proxy is not None else []
    if not result.ok:
        failure = result.failure()
        logger.debug("the contained trial loop failed; its folder stays: %s", run_dir)
        raise ExecutionError(
            f"the worker's trials failed: {failure['message']}",
            hint=f"its output is in {run_dir}",
        )
    report = _read_report(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    return report, trial_ids


def _read_report(run_dir: Path) -> dict[str, Any]:
    try:
        with RunFolder(run_dir) as folder:
            text = folder.read_text(REPORT_FILE, REPORT_LIMIT)
        data = json.loads(text) if text else {}
    except (UnsafeFile, ValueError) as exc:
        logger.warning("the worker's report is not read: %s", exc)
        return {}
    return data if isinstance(data, dict) else {}


__all__ = ["contained_launcher", "run_contained"]
