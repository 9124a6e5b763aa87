"""Where mlpilot's module loggers write: stderr, at ``MLPILOT_LOG_LEVEL`` (default WARNING).

Every module logs through ``logging.getLogger(__name__)``; all of them sit under the
``mlpilot`` logger configured here once per process (the CLI and each pipeline process).
"""

from __future__ import annotations

import logging

from mlpilot.platform.config.settings import get_settings
from mlpilot.platform.errors import SettingsError

_FORMAT = "mlpilot %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str | None = None) -> None:
    """Send the ``mlpilot`` loggers to stderr at ``level`` (default: the setting)."""
    if level is None:
        try:
            level = get_settings().log_level
        except SettingsError:  # the command itself reports the bad setting in one line
            level = "WARNING"
    root = logging.getLogger("mlpilot")
    root.setLevel(level)
    if not any(getattr(h, "_mlpilot", False) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._mlpilot = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
