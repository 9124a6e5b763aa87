"""Which installed distributions provide which top-level modules, cached per environment.

MLflow needs this map to check a logged model's pip requirements, and builds it with
``importlib.metadata.packages_distributions()`` in every process that logs a model: it
reads the file list of every installed distribution, about 0.8 s beside MLflow's own
dependencies, for a map that only changes when packages are installed or removed.

The orchestrator (``refresh``) writes the map under ``$MLPILOT_HOME/cache`` while a pipeline
runs; a pipeline (``seed_mlflow``) hands it to MLflow when its key still matches this
environment: the interpreter, and the name and version of every installed distribution.
The pipeline only reads the cache; a stale or missing cache leaves MLflow to build the map.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CACHE_FILE = Path("cache") / "python-packages.json"


def environment_key() -> str:
    """A digest of the interpreter and every ``*.dist-info``/``*.egg-info`` in its
    site-packages folders (not all of ``sys.path``: its first entry is the script's folder)."""
    import site

    digest = hashlib.sha256(f"{sys.prefix}\n{sys.version}\n".encode())
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    for entry in folders:
        try:
            names = sorted(n for n in os.listdir(entry) if n.endswith((".dist-info", ".egg-info")))
        except OSError:  # zip files, missing folders
            continue
        digest.update(f"{entry}\n{chr(0).join(names)}\n".encode())
    return digest.hexdigest()


def load(home: Path) -> dict[str, list[str]] | None:
    """The cached module → distributions map, or None when missing or stale."""
    try:
        data = json.loads((home / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != environment_key():
        return None
    modules = data.get("modules")
    return modules if isinstance(modules, dict) else None


def distributions_function() -> Callable[[], Mapping[str, list[str]]]:
    """``packages_distributions`` from the backport, as MLflow uses (its map differs in
    small ways from the stdlib's), else from the stdlib.

    Call it on the thread that will import MLflow, before handing the function to another
    thread: importing ``importlib_metadata`` puts its finder on ``sys.meta_path`` before the
    module has finished executing, and an ``importlib.metadata`` lookup on another thread
    in that window fails with ``NameError: PathDistribution``.
    """
    try:
        from importlib_metadata import packages_distributions
    except ImportError:
        from importlib.metadata import packages_distributions
    return packages_distributions


def refresh(home: Path, distributions: Callable[[], Mapping[str, list[str]]] | None = None) -> bool:
    """Build and write the map unless a current one is cached; True when it wrote one."""
    if load(home) is not None:
        return False
    packages_distributions = distributions or distributions_function()
    key = environment_key()
    modules = {name: list(dict.fromkeys(d)) for name, d in packages_distributions().items()}
    path = home / CACHE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"key": key, "modules": modules}), encoding="utf-8")
    tmp.replace(path)  # readers see the old file or the whole new one
    return True


def seed_mlflow(home: Path) -> bool:
    """Give MLflow the cached map before it builds its own; True when it took it.

    Mirrors ``mlflow.utils.requirements_utils._init_modules_to_packages_map``: the
    distributions' map plus MLflow's fixed entries. Any difference in MLflow's internals
    (or a Databricks runtime, which adds its own entries) leaves MLflow to build the map.
    """
    try:
        from mlflow.utils import requirements_utils as ru
        from mlflow.utils.databricks_utils import is_in_databricks_runtime

        if ru._MODULES_TO_PACKAGES is not None or is_in_databricks_runtime():
            return False
        cached = load(home)
        if cached is None:
            return False
        fixed: Any = ru.DATABRICKS_MODULES_TO_PACKAGES
        owners = {name: list(dists) for name, dists in cached.items()}
        owners.update(ru.MLFLOW_MODULES_TO_PACKAGES)
        owners.update(fixed)
        if "databricks" in owners:
            scoped = {p for dists in fixed.values() for p in dists}
            owners["databricks"] = [p for p in owners["databricks"] if p not in scoped]
        ru._MODULES_TO_PACKAGES = owners
        return True
    except Exception as exc:  # MLflow changed: it builds the map itself, as it always could
        logger.debug("MLflow changed: it builds the map itself, as it always could: %s", exc)
        return False
