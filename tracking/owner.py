"""Which process owns a run, and whether it is still alive (for cancel and repair).

A run's MongoDB document records its owner — host, pid and the process's start time
(the pid alone could have been reused by another process since).
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # the command name (field 2) may hold spaces: count from the closing parenthesis
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def current_owner() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": process_start(os.getpid())}


def owner_state(owner: dict[str, Any] | None) -> str:
    """``alive``, ``gone`` (this host, process ended) or ``unknown`` (another host, no record)."""
    if not owner or owner.get("host") != socket.gethostname():
        return "unknown"
    pid = int(owner.get("pid") or 0)
    if pid <= 0:
        return "unknown"
    started = process_start(pid)
    if started is None:
        return "gone"
    recorded = owner.get("started")
    return "alive" if recorded is None or recorded == started else "gone"
