"""The one exception type of mlpilot, with a few subclasses to catch by cause.

Every message says what went wrong in one line; ``hint`` says what to do about it.
"""

from __future__ import annotations

__all__ = [
    "DataError",
    "ExecutionError",
    "MissingExtraError",
    "MlpilotError",
    "PlanError",
    "SettingsError",
    "TrackingError",
    "UnplacedRequestError",
    "describe_error",
]


class MlpilotError(Exception):
    """Base class: a problem the user can act on."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and the hint on one line, for the CLI and stored errors."""
        text = " ".join(self.message.split())
        return f"{text} — {self.hint}" if self.hint else text

    def to_dict(self, stage: str | None = None) -> dict[str, str | None]:
        return {"type": type(self).__name__, "message": self.one_line(), "stage": stage}


class SettingsError(MlpilotError):
    """An environment variable or mlpilot.toml value is invalid."""


class DataError(MlpilotError):
    """The data file cannot be used as asked (unreadable, empty, no such column, ...)."""


class PlanError(MlpilotError):
    """A plan (or a step's arguments) does not validate against the tools or the data."""


class UnplacedRequestError(PlanError):
    """The request names no task and no column: chat asks it back instead of running."""


class ExecutionError(MlpilotError):
    """The pipeline process failed, timed out or was killed."""


class TrackingError(MlpilotError):
    """MLflow or the metadata store cannot be reached or refused a write."""


class MissingExtraError(MlpilotError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed",
            hint=f"install it with: pip install 'mlpilot[{extra}]'",
        )


def describe_error(error: dict[str, object] | None) -> str:
    """One line for a stored ``{type, message, stage}`` error: the message, after the
    exception's class when that is not one of ours (``ValueError: …``), never twice."""
    if not error:
        return ""
    kind, message = str(error.get("type") or ""), str(error.get("message") or "")
    ours = kind in {name for name in __all__ if name.endswith("Error")} or kind in (
        "RunFailed",
        "Timeout",
        "Cancelled",
        "ChildProcessError",
    )
    if not kind or ours or message.startswith(f"{kind}:"):
        return message or kind
    return f"{kind}: {message}" if message else kind
