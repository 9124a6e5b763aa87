"""The Runs and Compare pages' logic without a store: significant digits, the best value by
the metric's direction, the parameters that differ, labels and colours, the per-column
filter turned into a store query, both projection shapes, and a search's progress."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from mlpilot.dashboards import comparison, queries


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.6851992409867173, "0.6852"),
        (0.5, "0.5"),
        (12.345678, "12.35"),
        (1234.5678, "1,235"),
        (123456.7, "123,457"),
        (0.000123456, "0.0001235"),
        (1.23456e-7, "1.235e-07"),
        (9.87654e9, "9.877e+09"),
        (-0.04321987, "-0.04322"),
        (0.0, "0"),
        (50, "50"),
        (12000, "12,000"),
        (None, ""),
        ("xgb", "xgb"),
        (float("nan"), "nan"),
    ],
)
def test_figures_have_four_significant_digits(value: object, text: str) -> None:
    assert comparison.sig(value) == text


def test_the_best_value_follows_the_metric_direction() -> None:
    assert comparison.metric_direction("test_rmse") == "minimize"
    assert comparison.metric_direction("cv_roc_auc") == "maximize"
    assert comparison.metric_direction("hpo_best_value") is None  # rmse for one, recall for another
    assert comparison.metric_direction("time_train_s") is None
    values = {"a": 0.9, "b": 0.7, "c": None}
    assert comparison.best_of(values, "maximize") == {"a"}
    assert comparison.best_of(values, "minimize") == {"b"}
    assert comparison.best_of({"a": 1.0, "b": 1.0}, "minimize") == set()  # all equal: none
    assert comparison.best_of({"a": 1.0, "b": 2.0, "c": 1.0}, "minimize") == {"a", "c"}
    assert comparison.best_of({"a": 1.0}, "minimize") == set()  # alone: best of nothing
    assert comparison.best_of({"a": 1.0, "b": 2.0}, None) == set()


def test_metric_table_marks_the_best_cell_per_row() -> None:
    rows = [
        {"run_id": "r1", "metrics": {"test_rmse": 2.123456, "test_r2": 0.8, "hpo_trials": 6}},
        {"run_id": "r2", "metrics": {"test_rmse": 1.5, "test_r2": 0.91234, "hpo_trials": 9}},
    ]
    table, best = comparison.metric_table(rows, ["hpo_trials", "test_r2", "test_rmse"], "metrics")
    assert table[2] == {"key": "test_rmse", "better": "↓ lower", "r1": "2.123", "r2": "1.5 ★"}
    assert table[1]["r2"] == "0.9123 ★" and table[1]["better"] == "↑ higher"
    assert table[0] == {"key": "hpo_trials", "better": "", "r1": "6", "r2": "9"}  # no direction
    assert best == [(1, "r2"), (2, "r2")]


def test_only_the_parameters_that_differ() -> None:
    rows = [
        {"params": {"model.family": "rf", "seed": "0", "model.depth": "4"}},
        {"params": {"model.family": "xgb", "seed": "0"}},
    ]
    assert comparison.differing(rows, "params") == ["model.depth", "model.family"]
    assert comparison.differing([rows[0], rows[0]], "params") == []


def test_runs_get_readable_unique_names_and_distinct_colours() -> None:
    rows = [
        {"run_id": "aaaa1111", "model": "xgb", "prompt": "tune xgboost for 6 trials to predict"},
        {"run_id": "bbbb2222", "template": "train", "prompt": "train a random forest"},
        {"run_id": "cccc3333", "template": "train", "prompt": "train a random forest"},
        {"run_id": "dddd4444", "prompt": ""},
    ]
    labels = comparison.unique_labels(rows)
    assert labels[0] == "xgb · tune xgboost for 6 trials…"
    assert labels[1] == "train · train a random forest (bbbb22)"
    assert labels[2] == "train · train a random forest (cccc33)"
    assert labels[3] == "run · dddd4444"
    palette = comparison.colours(100)
    assert len(set(palette)) == 100 and palette[0] == comparison.PALETTE[0]


def test_axis_positions_put_the_better_end_on_top() -> None:
    assert comparison.position(1.0, 1.0, 3.0, "minimize") == 1.0
    assert comparison.position(3.0, 1.0, 3.0, "maximize") == 1.0
    assert comparison.position(2.0, 2.0, 2.0, "maximize") == 0.5


# -- the Runs query -----------------------------------------------------------------------------
def test_field_of_reads_both_projection_shapes() -> None:
    embedded = {"_id": "r", "plan.template": "hpo", "planner": "offline"}  # neosqlite: flat
    mongo = {"_id": "r", "plan": {"template": "hpo"}, "planner": "offline"}  # pymongo: nested
    for doc in (embedded, mongo):
        row = queries.run_row(doc)
        assert row["template"] == "hpo" and row["planner"] == "offline"
    assert queries.field_of({"plan": None}, "plan.template") is None


def test_the_value_column_reads_the_chosen_metric() -> None:
    doc = {"_id": "r", "main_metric": "rmse", "metrics": {"test_rmse": 2.0, "test_mae": 1.0}}
    assert queries.run_row(doc)["value"] == 2.0 and queries.run_row(doc)["metric"] == "rmse"
    assert queries.run_row(doc, "mae")["value"] == 1.0


def test_sorting_by_column() -> None:
    assert queries.sort_field("template") == "plan.template"
    assert queries.sort_field("planner") == "planner"
    assert queries.sort_field("engine") == "engine.used"
    assert queries.sort_field("value", "rmse") == "metrics.test_rmse"
    assert queries.sort_field("value") == "main_metric"
    assert queries.sort_field("created_at") == "created_at"
    assert queries.sort_field("test_rmse") == "metrics.test_rmse"
    assert queries.sort_field("x; drop") == "created_at"
    # a column computed per row: sorting on a missing field would have matched no run
    assert queries.sort_field("progress") == "created_at"


def test_only_text_from_the_browser_is_matched() -> None:
    hostile = {"$regex": "(a+)+$"}
    assert queries.runs_query(experiment=hostile, status=["x"], session=hostile) == {}  # type: ignore[arg-type]
    assert queries.runs_query(experiment="sales", prompt="a.b") == {
        "experiment": "sales",
        "prompt": {"$regex": r"a\.b", "$options": "i"},
    }


def test_the_column_filter_becomes_a_store_query() -> None:
    q = queries.column_filters
    assert q("") == {}
    assert q('{status} = "FAILED"') == {"status": {"$eq": "FAILED"}}
    assert q("{template} contains hp") == {"plan.template": {"$regex": "hp", "$options": "i"}}
    assert q("{prompt} icontains a.b") == {"prompt": {"$regex": r"a\.b", "$options": "i"}}
    assert q("{value} < 0.5", "rmse") == {"metrics.test_rmse": {"$lt": 0.5}}
    assert q("{value} contains rmse") == {"main_metric": {"$regex": "rmse", "$options": "i"}}
    both = q("{planner} = offline && {value} >= 2", "rmse")
    assert both == {"$and": [{"planner": {"$eq": "offline"}}, {"metrics.test_rmse": {"$gte": 2.0}}]}
    day = q("{created} datestartswith 2026-12-07")
    start = datetime(2026, 12, 7, tzinfo=timezone.utc)
    assert day == {"created_at": {"$gte": start, "$lt": datetime(2026, 12, 8, tzinfo=timezone.utc)}}
    assert q("{created} > 2026-12") == {
        "created_at": {"$gte": datetime(2027, 1, 1, tzinfo=timezone.utc)}
    }
    # what the store must never see: unknown columns, operators, non-numbers
    assert q("{$where} = 1") == {}
    assert q("{value} < abc", "rmse") == {}
    assert q("{status} > b") == {}
    assert q("garbage") == {}
    # the table's case toggle writes s= / i= (and scontains): the same query
    assert q("{status} s= FAILED") == q("{status} i= FAILED") == {"status": {"$eq": "FAILED"}}
    assert q("{prompt} scontains hp") == {"prompt": {"$regex": "hp", "$options": "i"}}
    # no such date, no such filter (it raised before)
    assert q("{created} > 2026-13") == {} and q("{created} = 2026-02-30") == {}


def test_a_running_search_reports_its_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queries, "_trials_done", lambda name: 17 if name == "s1" else None)
    plan = {"steps": [{"tool": "optimize_model", "args": {"model": "rf", "trials": 40}}]}
    event = {"state": "RUNNING", "detail": {"type": "trial", "n": 10, "total": 40}}
    doc = {"_id": "r", "plan": plan, "events": [event], "study": {"name": "s1"}}
    assert queries.trial_progress(doc)["done"] == 17  # from the study itself
    assert queries.trial_progress({**doc, "study": None})["done"] == 10  # from the events
    assert queries.trial_progress({**doc, "study": None})["total"] == 40
    assert queries.trial_progress({"_id": "r", "plan": {"steps": []}}) is None


def test_parameters_read_as_numbers_are_rounded_too() -> None:
    assert comparison.as_number("0.5752867891211308") == pytest.approx(0.57528678912)
    assert comparison.as_number("245") == 245 and comparison.as_number("encoded") == "encoded"
    assert comparison.as_number("1e-3") == 0.001 and comparison.as_number("1.2.3") == "1.2.3"
    rows = [{"run_id": "r1", "params": {"lr": "0.02692655251486473"}}, {"run_id": "r2"}]
    table, best = comparison.metric_table(rows, ["lr"], "params", lambda _: None)
    assert table == [{"key": "lr", "better": "", "r1": "0.02693", "r2": ""}] and best == []


def test_model_metrics_are_scores_not_run_facts() -> None:
    assert comparison.is_model_metric("test_rmse") and comparison.is_model_metric("hpo_trials")
    assert not comparison.is_model_metric("peak_memory_mb")
    assert not comparison.is_model_metric("clean_rows_removed")


def test_data_text_in_a_figure_is_shown_as_typed() -> None:
    from mlpilot.dashboards.components import plot_text

    # plotly renders <a href>, <b> and entities in trace names and hover text
    assert plot_text('<a href="x">p</a> & q') == '&lt;a href="x"&gt;p&lt;/a&gt; &amp; q'
    assert plot_text(None) == "None" and plot_text("rf · 0.5") == "rf · 0.5"
