"""Query answers in a session, ranking the session's runs, and run id prefixes."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.tools import queries

IDS = [
    "3fa9c2d41b7e4c0e9d1a2b3c4d5e6f70",
    "3fa9c2e81b7e4c0e9d1a2b3c4d5e6f71",
    "7b01de9a1b7e4c0e9d1a2b3c4d5e6f72",
]


class FakeClient:
    """Just enough of MlflowClient for prefix lookups (unit test: no MLflow behind it)."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def search_runs(self, experiment_ids: list[str], filter_string: str = "", **_: Any) -> list:
        prefix = re.search(r"LIKE '([0-9a-f]+)%'", filter_string).group(1)  # type: ignore[union-attr]
        return [
            SimpleNamespace(info=SimpleNamespace(run_id=i))
            for i in self.ids
            if i.startswith(prefix)
        ]

    def search_experiments(self, **_: Any) -> list:
        return _Page([SimpleNamespace(experiment_id="0")])


class _Page(list):
    """A page of MLflow search results: a list with a continuation token."""

    token = None


def test_a_unique_prefix_resolves() -> None:
    assert queries._resolve_prefix(FakeClient(IDS), "0", "7B01DE") == IDS[2]


def test_an_ambiguous_prefix_lists_the_runs_it_matches() -> None:
    with pytest.raises(MlpilotError) as info:
        queries._resolve_prefix(FakeClient(IDS), "0", "3fa9c2")
    text = info.value.one_line()
    assert "matches 2 runs" in text and IDS[0][:12] in text and IDS[1][:12] in text


def test_an_unknown_prefix_says_so() -> None:
    with pytest.raises(MlpilotError, match="no run with id 'abc123'"):
        queries._resolve_prefix(FakeClient(IDS), "0", "abc123")


def _entry(run_id: str, value: float | None, metric: str = "rmse", **extra: Any) -> dict:
    metrics = {} if value is None else {f"test_{metric}": value}
    return {
        "run_id": run_id,
        "status": "SUCCEEDED",
        "metric": metric,
        "metrics": metrics,
        "model_uri": f"models:/m-{run_id}",
        **extra,
    }


def test_best_entry_ranks_by_the_latest_runs_metric_and_its_direction() -> None:
    runs = [_entry("a", 3.0), _entry("b", 2.0), _entry("c", 2.5)]
    assert queries.best_entry(runs)["run_id"] == "b"  # rmse: lower is better
    runs.append(_entry("d", 0.7, metric="roc_auc"))
    runs.append(_entry("e", 0.9, metric="roc_auc"))
    assert queries.best_entry(runs)["run_id"] == "e"  # the session moved on to a new task
    assert queries.best_entry(runs, "rmse")["run_id"] == "b"


def test_best_entry_skips_failed_runs_and_runs_without_a_model() -> None:
    runs = [
        _entry("a", 0.1, status="FAILED"),
        _entry("b", 0.5, model_uri=None),
        _entry("c", 0.9),
        _entry("r", None, metric=None),  # a registration: no metric
    ]
    assert queries.best_entry(runs)["run_id"] == "c"
    assert queries.best_entry(runs[:2]) is None
