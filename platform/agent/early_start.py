"""Starting a pipeline before its MLflow run exists (DESIGN §2, RUNNING).

Opening MLflow and creating the run takes the parent a second or two; the pipeline spends
that time reading its data instead of waiting. Its folder is created first, under a name
of its own, and linked as ``runs/<run id>`` once the run exists; the run id reaches the
pipeline through that folder (``StartedLeg.hand_over_run``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any


@dataclass
class EarlyStart:
    """A pipeline started before its MLflow run, and what its start decided."""

    leg: Any  # mlpilot.platform.execution.StartedLeg
    choice: Any  # mlpilot.platform.execution.EngineChoice
    script: Path
    notes: list[str]
    events: list[dict[str, Any]]


def new_run_dir(runs_dir: Path) -> Path:
    """A run folder for a pipeline whose MLflow run does not exist yet."""
    path = runs_dir / f"{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    path.mkdir(parents=True)
    return path


def link_run_dir(real: Path, run_id: str) -> Path:
    """``runs/<run id>`` for a folder created before the run: a link to it where links work."""
    link = real.parent / run_id
    try:
        link.symlink_to(real.name, target_is_directory=True)
    except OSError:
        return real
    return link
