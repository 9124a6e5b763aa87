"""The Studies page's data logic on real Optuna trials: states, best-so-far, normalisation
across metrics, importances per model family, parallel-coordinate axes; and the
confusion matrix's text colour by cell luminance."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from helpers import seed_studies

from mlpilot.dashboards import queries
from mlpilot.platform.ml import plots


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("studies") / "journal.log"
    names = seed_studies(path)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    return {
        key: optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
        for key, name in names.items()
    }


def test_every_finished_state_is_a_row_and_pruned_trials_keep_their_last_report(
    trials: dict[str, Any],
) -> None:
    rows = queries.trial_rows(trials["mixed"])
    states = {r["state"] for r in rows}
    assert states == {"COMPLETE", "PRUNED", "FAIL"}
    by_number = {t.number: t for t in trials["mixed"]}
    for row in rows:
        t = by_number[row["number"]]
        if row["state"] == "PRUNED":
            assert row["value"] == t.intermediate_values[max(t.intermediate_values)]
        elif row["state"] == "FAIL":
            assert row["value"] is None and "planted failure" in row["reason"]
        else:
            assert row["value"] == t.value
    elapsed = [r["elapsed_s"] for r in rows]
    assert all(e is not None and e >= 0 for e in elapsed)
    assert elapsed == sorted(elapsed)  # one process: trials end in order
    assert [r["number"] for r in rows] == sorted(r["number"] for r in rows)


def test_best_so_far_counts_complete_trials_only(trials: dict[str, Any]) -> None:
    rows = queries.trial_rows(trials["mixed"])
    best = queries.best_so_far(rows, "minimize")
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    assert best["number"] == [r["number"] for r in complete]
    assert best["value"] == sorted(best["value"], reverse=True)  # never worse
    assert best["value"][-1] == min(r["value"] for r in complete)
    up = queries.best_so_far(queries.trial_rows(trials["single"]), "maximize")
    assert up["value"] == sorted(up["value"])


def test_normalised_puts_the_best_value_at_one_whatever_the_direction() -> None:
    assert queries.normalised([2.0, 4.0, None], "minimize", 2.0, 4.0) == [1.0, 0.0, None]
    assert queries.normalised([2.0, 4.0], "maximize", 2.0, 4.0) == [0.0, 1.0]
    assert queries.normalised([3.0], "minimize", 3.0, 3.0) == [1.0]


def test_studies_of_one_metric_share_their_bounds() -> None:
    def study(metric: str, direction: str, values: list[float]) -> dict[str, Any]:
        rows = [{"state": "COMPLETE", "value": v} for v in values]
        return {"metric": metric, "direction": direction, "rows": rows}

    data = [
        study("rmse", "minimize", [3.0, 5.0]),
        study("rmse", "minimize", [1.0, 4.0]),
        study("r2", "maximize", [0.2, 0.8]),
    ]
    bounds = queries.metric_bounds(data)
    assert bounds == {"rmse (minimize)": (1.0, 5.0), "r2 (maximize)": (0.2, 0.8)}


def test_importances_are_computed_per_family_of_a_mixed_study(trials: dict[str, Any]) -> None:
    complete = [t for t in trials["mixed"] if t.state.name == "COMPLETE"]
    groups = queries.trials_by_family(complete)
    assert set(groups) == {"rf", "xgb"}
    found = {
        f: queries.importances_of(g, optuna.study.StudyDirection.MINIMIZE)
        for f, g in groups.items()
    }
    assert set(found["rf"]) == {"n_estimators", "max_features"}
    assert set(found["xgb"]) == {"learning_rate", "max_depth", "booster"}
    for values in found.values():
        assert sum(values.values()) == pytest.approx(1.0, abs=1e-6)
    # over the whole study only the family is shared: nothing else could be assessed
    assert queries.importances_of(complete, optuna.study.StudyDirection.MINIMIZE) == {}
    single = [t for t in trials["single"] if t.state.name == "COMPLETE"]
    assert set(queries.trials_by_family(single)) == {""}


def test_parallel_axes_of_one_family_and_of_all(trials: dict[str, Any]) -> None:
    complete = [t for t in trials["mixed"] if t.state.name == "COMPLETE"]
    d = {
        "params": sorted({k for t in complete for k in t.params}),
        "log_params": ["xgb.learning_rate"],
        "param_rows": [{**t.params, "value": t.value} for t in complete],
    }
    xgb = queries.parallel_data(d, "xgb")
    kinds = {a["name"]: a["kind"] for a in xgb["axes"]}
    assert kinds == {
        "xgb.booster": "choice",
        "xgb.learning_rate": "log",
        "xgb.max_depth": "number",
        "value": "number",
    }
    assert all(0.0 <= y <= 1.0 for line in xgb["lines"] for y in line)
    every = queries.parallel_data(d, None)
    assert [a["name"] for a in every["axes"]] == ["family", "value"]
    assert every["axes"][0]["choices"] == ["rf", "xgb"]
    assert len(every["lines"]) == len(complete)


def test_text_on_a_confusion_matrix_cell_follows_its_luminance() -> None:
    assert plots.text_colour((0.03, 0.19, 0.42)) == "white"  # Blues' darkest: navy
    assert plots.text_colour((0.97, 0.98, 1.0)) == "black"  # Blues' lightest
    assert plots.relative_luminance((1, 1, 1)) == pytest.approx(1.0)
    figure = plots.confusion_matrix_figure(
        ["a"] * 90 + ["b"] * 10, ["a"] * 90 + ["a"] * 9 + ["b"], ["a", "b"]
    )
    try:
        colours = {t.get_text(): t.get_color() for t in figure.axes[0].texts}
    finally:
        plots.close(figure)
    assert colours["90"] == "white" and colours["0"] == "black"


def test_a_big_study_draws_an_even_sample_with_every_new_best() -> None:
    # values fall by steps at planted trials, noise elsewhere: the new bests are known
    rows = [
        {
            "number": i,
            "state": "COMPLETE",
            "elapsed_s": i * 60.0,
            "value": 100.0 - i // 997 if i % 997 == 0 else 200.0 + i % 7,
        }
        for i in range(5000)
    ]
    line = queries.best_so_far(rows, "minimize")
    steps = queries.best_steps(line)
    # the corners only, yet the same step line: every improvement and the last trial
    assert steps["number"] == [0, 997, 1994, 2991, 3988, 4985, 4999]
    assert steps["value"] == [100.0, 99.0, 98.0, 97.0, 96.0, 95.0, 95.0]
    for number, value in zip(steps["number"], steps["value"], strict=True):
        assert line["value"][line["number"].index(number)] == value
    drawn = queries.drawn_rows(rows, 500, set(steps["number"]))
    numbers = {r["number"] for r in drawn}
    assert 500 <= len(drawn) <= 500 + len(steps["number"]) + 1
    assert set(steps["number"]) <= numbers  # every new best is drawn, the best among them
    assert max(numbers) - min(numbers) == 4999  # spread over the whole study
    assert queries.drawn_rows(rows[:300], 500) == rows[:300]  # under the cap: all of them
