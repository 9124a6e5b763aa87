"""The exact command line and environment of one leg (DESIGN §6, §8).

Both engines run the same script; the GPU engine runs it under ``cudf.pandas`` and
``cuml.accel``. Options travel in the environment, never after the script: the chained
``-m`` command hands what follows the script to the accelerators' own parsers in some
releases, and ``python -m cudf.pandas -m cuml.accel -v`` is refused outright (cudf.pandas
parses ``-v`` itself), which is why cuml.accel's logging is turned on in the child.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import ExecutionError
from mlpilot.platform.execution.sandbox import scrubbed_env
from mlpilot.platform.ml import protocol

GPU_MODULES = ("cudf.pandas", "cuml.accel")
#: set for GPU legs: cuml.accel ≥ 26.02 reads it at install (older releases: see devices.py)
GPU_ENV = {"CUML_ACCEL_LOG_LEVEL": "info"}
#: never passed to a CPU leg: cuml.accel ≥ 25.10 installs itself in any Python that has it
#: (``python/cuml/_cuml_accel.pth``)
CPU_DENY = ("CUML_ACCEL_ENABLED", "CUML_ACCEL_LOG_LEVEL")


def engine_command(
    engine: str, script: str, args: list[str], python: str = sys.executable
) -> list[str]:
    """cpu runs the script; gpu runs it under cudf.pandas + cuml.accel."""
    if engine == "cpu":
        return [python, script, *args]
    if engine == "gpu":
        return [python, "-m", GPU_MODULES[0], "-m", GPU_MODULES[1], script, *args]
    raise ExecutionError(f"no command for engine {engine!r}")


def leg_env(
    settings: Settings,
    engine: str,
    extra: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allow-listed environment of a ``engine`` leg, with what the child reads."""
    values = {
        protocol.ENV_HOME: str(settings.home),
        protocol.ENV_OPTUNA_STORAGE: settings.optuna_storage,
        protocol.ENV_EXPERIMENT: settings.experiment,
        protocol.ENV_ENGINE_USED: engine,
        protocol.ENV_TRACKING_URI: settings.tracking_uri,
        protocol.ENV_LAUNCHED_AT: f"{time.time():.6f}",
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    }
    if settings.memory_budget_mb is not None:  # the child reads the table within it
        values["MLPILOT_MEMORY_BUDGET_MB"] = f"{settings.memory_budget_mb:g}"
    if engine == "gpu":
        values.update(GPU_ENV)
    values.update(extra or {})
    env = scrubbed_env(values, source)
    if engine != "gpu":
        for name in CPU_DENY:
            env.pop(name, None)
    return env
