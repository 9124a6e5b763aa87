"""Console helpers shared by CLI commands: Rich consoles and one-line errors."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


class _ClosedPipeGuard:
    """A text stream that goes quiet when its reader goes away (``mlpilot run … | head``):
    the run still finishes and is recorded, where a BrokenPipeError would have left it
    RUNNING in both stores."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False

    def _quiet(self) -> None:
        import os

        self._closed = True
        self._stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._quiet()
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._quiet()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_closed_pipes() -> None:
    """Make stdout and stderr survive a reader that closes early (see ``_ClosedPipeGuard``)."""
    if not isinstance(sys.stdout, _ClosedPipeGuard):
        sys.stdout = _ClosedPipeGuard(sys.stdout)
    if not isinstance(sys.stderr, _ClosedPipeGuard):
        sys.stderr = _ClosedPipeGuard(sys.stderr)


def fail(message: str, code: int = 1) -> None:
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code)


def handle_errors(func: F) -> F:
    """Turn mlpilot errors (and a few common ones) into a one-line message and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from mlpilot.platform.errors import MlpilotError

        try:
            return func(*args, **kwargs)
        except MlpilotError as exc:
            fail(exc.one_line())
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except FileNotFoundError as exc:
            fail(f"file not found: {exc.filename}")

    return wrapper  # type: ignore[return-value]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values are read as JSON when they parse (numbers, true, null)."""
    params: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--param expects key=value, got {item!r}", 2)
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params
