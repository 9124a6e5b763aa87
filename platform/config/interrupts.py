"""Signals that cancel a command, delivered only where cancelling is safe.

``install`` makes SIGINT, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` in the main
thread — the orchestrator records the run CANCELLED in both stores. Inside ``shielded()``
(importing and opening MLflow, planning, writing the final record) the interrupt waits
until the section ends: an import cut in half leaves a module half-initialised for the
rest of the process, and a record cut in half is the run left RUNNING the user wanted
to avoid. A second signal while the first is handled is ignored.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_state: dict[str, object] = {"installed": False, "depth": 0, "pending": None, "fired": False}


def install() -> None:
    """Cancel the command on SIGINT, SIGTERM and SIGHUP (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        signal.signal(sig, _on_signal)
    _state["installed"] = True


def _on_signal(signum: int, frame: object) -> None:
    if _state["fired"] or _state["pending"] is not None:
        logger.debug("signal %d ignored: a cancel is already under way", signum)
        return
    if int(_state["depth"]) > 0:  # type: ignore[arg-type]
        _state["pending"] = signum
        return
    _state["fired"] = True
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def shielded(*, deliver: bool = True) -> Iterator[None]:
    """Hold a cancelling signal until this block is done, then deliver it — or, with
    ``deliver=False`` (the run's final record), drop it: there is nothing left to cancel."""
    if not _state["installed"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["depth"] = int(_state["depth"]) + 1  # type: ignore[arg-type]
    try:
        yield
    finally:
        _state["depth"] = int(_state["depth"]) - 1  # type: ignore[arg-type]
    pending = _state["pending"]
    if pending is not None and _state["depth"] == 0:
        _state["pending"], _state["fired"] = None, True
        if deliver:
            raise KeyboardInterrupt(signal.Signals(int(pending)).name)  # type: ignore[arg-type]
