"""``DeferredRunLogger``: a pipeline's MLflow calls, held until MLflow is open.

Importing MLflow and opening its store costs a pipeline about a second of CPU, nearly all
of it Python code under the GIL. While the pipeline reads and cleans data (pandas, also
under the GIL) the two run one after the other; while a model fits (native code that
releases the GIL) they mostly overlap. So the pipeline opens MLflow when training starts
(``start()``), and the calls made before are replayed in order once it is open. Calls
that need an answer (``log_model``, ``child``, ``run_id``…) wait for it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

logger = logging.getLogger(__name__)

#: calls that return nothing and whose arguments are plain data: these can wait
_HELD = frozenset(
    {"log_params", "log_metrics", "set_tags", "log_text", "log_file", "log_input", "flush"}
)
#: held calls whose failure is never a reason to fail the run (the data set record)
_OPTIONAL = frozenset({"log_input"})


class DeferredRunLogger:
    """Forwards to the logger ``opener`` returns; holds plain-data calls until it is open."""

    def __init__(self, opener: Callable[[], tuple[Any, bool]]) -> None:
        self._opener = opener
        self._future: Future[tuple[Any, bool]] | None = None
        self._lock = threading.Lock()
        self._held: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._real: Any = None
        self.owns_run = False
        #: held calls that failed without failing the run, to be reported as notes
        self.skipped: list[str] = []

    def start(self) -> None:
        """Begin opening MLflow on a thread (idempotent)."""
        with self._lock:
            if self._future is not None:
                return
            future: Future[tuple[Any, bool]] = Future()
            self._future = future

        def open_() -> None:
            try:
                future.set_result(self._opener())
            except BaseException as exc:  # handed to whoever waits for the logger
                logger.debug("handed to whoever waits for the logger: %s", exc)
                future.set_exception(exc)

        from mlpilot.tracking.packages import distributions_function

        distributions_function()  # MLflow's metadata backport, imported before the thread
        threading.Thread(target=open_, name="mlflow-open", daemon=True).start()

    @property
    def opened(self) -> bool:
        return self._real is not None

    def resolve(self) -> Any:
        """The real logger, with the held calls replayed; an opening error is raised once."""
        if self._real is not None:
            return self._real
        self.start()
        assert self._future is not None
        try:
            real, self.owns_run = self._future.result()
        except BaseException:
            from mlpilot.tracking.run_logger import NullRunLogger

            with self._lock:
                self._real, self._held = NullRunLogger(), []  # nothing more is logged
            raise
        with self._lock:  # from here on, calls go straight through
            self._real, held, self._held = real, self._held, []
        first_error: BaseException | None = None
        for name, args, kwargs in held:
            try:
                getattr(self._real, name)(*args, **kwargs)
            except Exception as exc:  # replay the rest: each call stands on its own
                logger.debug("replay the rest: each call stands on its own: %s", exc)
                if name in _OPTIONAL:
                    self.skipped.append(f"{name}: {type(exc).__name__}: {exc}")
                elif first_error is None:
                    first_error = exc
        if first_error is not None:
            raise first_error
        return self._real

    def log_dict(self, data: Any, artifact_file: str) -> None:
        # serialised now: the caller may change ``data`` before it is replayed
        self.log_text(json.dumps(data, indent=2, default=str, ensure_ascii=False), artifact_file)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _HELD and self._real is None:

            def hold(*args: Any, **kwargs: Any) -> None:
                with self._lock:
                    if self._real is None:
                        self._held.append((name, _copied(args), _copied(kwargs)))
                        return
                getattr(self._real, name)(*args, **kwargs)

            return hold
        return getattr(self.resolve(), name)


def _copied(values: Any) -> Any:
    if isinstance(values, tuple):
        return tuple(dict(v) if isinstance(v, dict) else v for v in values)
    return {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
