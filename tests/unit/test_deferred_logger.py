"""The pipeline's deferred MLflow logger and the run-id hand-over (unit tests)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from mlpilot.platform.errors import TrackingError
from mlpilot.platform.ml.deferred_logger import DeferredRunLogger
from mlpilot.tracking.run_logger import NullRunLogger


class Recorder:
    run_id = "r-1"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def log_params(self, params: dict[str, Any]) -> None:
        self.calls.append(("log_params", params))

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        self.calls.append(("log_metrics", metrics))

    def log_text(self, text: str, artifact_file: str) -> None:
        self.calls.append(("log_text", (text, artifact_file)))

    def log_model(self, model: Any, **kwargs: Any) -> str:
        self.calls.append(("log_model", model))
        return "models:/m-1"


def test_calls_wait_for_mlflow_and_are_replayed_in_order() -> None:
    real, opened = Recorder(), threading.Event()

    def opener() -> tuple[Recorder, bool]:
        opened.set()
        return real, True

    logger = DeferredRunLogger(opener)
    params = {"a": 1}
    logger.log_params(params)
    report = {"kept": [1]}
    logger.log_dict(report, "reports/x.json")
    params["a"] = 2  # changed after the call: the call keeps what it was given
    report["kept"].append(2)
    assert not opened.is_set() and real.calls == []
    assert logger.log_model("model") == "models:/m-1"  # needs an answer: opens MLflow
    assert [name for name, _ in real.calls] == ["log_params", "log_text", "log_model"]
    assert real.calls[0][1] == {"a": 1} and '"kept": [\n    1\n  ]' in real.calls[1][1][0]
    assert logger.owns_run is True and logger.run_id == "r-1"
    logger.log_metrics({"m": 1.0})  # once open, calls go straight through
    assert real.calls[-1] == ("log_metrics", {"m": 1.0})


def test_start_opens_in_the_background_once() -> None:
    count, gate = [], threading.Event()

    def opener() -> tuple[Recorder, bool]:
        count.append(1)
        gate.wait(5)
        return Recorder(), False

    logger = DeferredRunLogger(opener)
    logger.start()
    logger.start()
    time.sleep(0.05)
    assert count == [1] and not logger.opened
    gate.set()
    assert logger.resolve().run_id == "r-1" and count == [1] and logger.opened


def test_an_opening_error_is_raised_once_then_nothing_is_logged() -> None:
    def opener() -> tuple[Recorder, bool]:
        raise TrackingError("MLflow tracking server at http://x stopped answering")

    logger = DeferredRunLogger(opener)
    logger.log_params({"a": 1})
    with pytest.raises(TrackingError, match="stopped answering"):
        logger.log_model("model")
    assert isinstance(logger.resolve(), NullRunLogger) and logger.run_id is None


def test_a_failing_held_call_does_not_drop_the_others() -> None:
    class Flaky(Recorder):
        def log_input(self, **kwargs: Any) -> None:
            raise RuntimeError("dataset store refused it")

        def log_text(self, text: str, artifact_file: str) -> None:
            raise TrackingError("artifact store full")

    real = Flaky()
    logger = DeferredRunLogger(lambda: (real, False))
    logger.log_input(name="d", source="s", digest="x", rows=1, columns=[])
    logger.log_text("a", "a.txt")
    logger.log_metrics({"m": 1.0})
    with pytest.raises(TrackingError, match="artifact store full"):
        logger.resolve()
    assert real.calls == [("log_metrics", {"m": 1.0})]  # replayed after the failures
    assert logger.skipped and "dataset store refused it" in logger.skipped[0]
