"""The Runs and Compare queries on each metadata store the tests have: the embedded file
(neosqlite returns a projected ``plan.template`` as a flat key) and pymongo over TCP against
a real MongoDB-wire-protocol server (nx-27017, which nests it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import NxServer

from mlpilot.dashboards import queries
from mlpilot.platform.config import Settings
from mlpilot.tracking.metadata import new_event

pytestmark = pytest.mark.integration

PLAN = {
    "template": "hpo",
    "steps": [{"tool": "optimize_model", "args": {"model": "xgb", "trials": 40}}],
}


@pytest.fixture(params=["embedded", "mongodb"])
def store_settings(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    env = {
        "MLPILOT_HOME": str(tmp_path / "home"),
        "MLFLOW_TRACKING_URI": "",
        "MLPILOT_MONGO_URI": "",
    }
    if request.param == "mongodb":
        server: NxServer = request.getfixturevalue("nx_server")
        env |= {"MLPILOT_MONGO_URI": server.uri, "MLPILOT_MONGO_DB": f"dash{uuid.uuid4().hex[:8]}"}
    settings = Settings.from_env(env)
    queries.configure(settings)
    monkeypatch.setattr(queries, "_trials_done", lambda name: None)  # no Optuna storage here
    seed(queries.store())
    assert queries.store().kind == request.param
    yield settings
    queries.configure(Settings.from_env({"MLPILOT_HOME": str(tmp_path / "unused")}))


def seed(store: object) -> None:
    runs = {
        "a1": ("SUCCEEDED", "train", "offline", "rmse", 2.5, "train a forest"),
        "b2": ("SUCCEEDED", "hpo", "openai:nemotron", "rmse", 1.5, "tune xgboost"),
        "c3": ("FAILED", "train", "offline", "roc_auc", 0.8, "classify churn"),
        "d4": ("RUNNING", "hpo", "offline", "rmse", None, "tune a forest for 40 trials"),
    }
    for run_id, (status, template, planner, metric, value, prompt) in runs.items():
        plan = PLAN if template == "hpo" else {"template": template, "steps": []}
        store.create_run(  # type: ignore[attr-defined]
            run_id,
            {"status": "RECEIVED", "experiment": "e", "prompt": prompt, "planner": planner},
            [new_event("RECEIVED")],
        )
        fields = {"status": status, "plan": plan, "main_metric": metric}
        if value is not None:
            fields["metrics"] = {f"test_{metric}": value, "time_train_s": 0.25}
        events = [new_event("RUNNING", "trial 10", detail={"type": "trial", "n": 10, "total": 40})]
        store.update_run(run_id, fields, events if status == "RUNNING" else [])  # type: ignore[attr-defined]


def test_template_and_planner_columns_are_filled(store_settings: Settings) -> None:
    rows = {r["run_id"]: r for r in queries.list_runs().rows}
    assert {r["template"] for r in rows.values()} == {"train", "hpo"}
    assert rows["b2"]["planner"] == "openai:nemotron" and rows["a1"]["planner"] == "offline"
    assert rows["d4"]["progress"] == {
        "done": 10,
        "total": 40,
        "budget_s": None,
        "elapsed_s": pytest.approx(rows["d4"]["progress"]["elapsed_s"]),
    }
    assert rows["a1"]["progress"] is None  # only running rows are read again
    assert queries.active_run_count() == 1


def test_column_filters_and_sorting_run_in_the_store(store_settings: Settings) -> None:
    page = queries.list_runs(filter_query="{template} = hpo", sort_by="prompt", descending=False)
    assert [r["run_id"] for r in page.rows] == ["d4", "b2"] and page.total == 2
    page = queries.list_runs(metric="rmse", sort_by="value", descending=False)
    assert [r["run_id"] for r in page.rows[:2]] == ["b2", "a1"]
    page = queries.list_runs(metric="rmse", filter_query="{value} < 2")
    assert [r["run_id"] for r in page.rows] == ["b2"]
    page = queries.list_runs(filter_query="{planner} contains OPENAI && {status} = SUCCEEDED")
    assert [r["run_id"] for r in page.rows] == ["b2"]
    page = queries.list_runs(sort_by="template", descending=True, page_size=2)
    assert {r["template"] for r in page.rows} == {"train"} and page.total == 4


def test_compare_reads_every_run_in_one_query(store_settings: Settings) -> None:
    view = queries.compare_view(["b2", "a1", "b2", "gone"])
    assert [r["run_id"] for r in view["rows"]] == ["b2", "a1", "gone"]
    b2, a1, gone = view["rows"]
    assert b2["template"] == "hpo" and b2["model"] == "xgb" and b2["label"].startswith("xgb ·")
    assert a1["label"] == "train · train a forest" and not gone["found"]
    assert view["metric_keys"] == ["test_rmse"]  # the timing is not a model metric
    assert view["timing_keys"] == ["time_train_s"]
    assert len({r["colour"] for r in view["rows"]}) == 3


def test_the_compare_picker_searches_every_run_and_keeps_the_chosen_first(
    store_settings: Settings,
) -> None:
    values = [o["value"] for o in queries.run_options(["c3"], "tune", queries.SEARCH_OPTIONS)]
    assert values[0] == "c3" and sorted(values[1:]) == ["b2", "d4"]  # prompt words match
    assert [o["value"] for o in queries.run_options([], "a1")] == ["a1"]  # an id's start
    assert queries.run_options([], "(.*") == []  # typed text is text, not a pattern
    recent = queries.run_options(["gone"], limit=2)
    assert recent[0] == {"label": "gone", "value": "gone"} and len(recent) == 3
    assert "classify churn" in next(o["label"] for o in queries.run_options([], "churn"))
