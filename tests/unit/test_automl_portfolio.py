"""The AutoML search's portfolio and final model: extra trees among the families, kept
out-of-fold output spread over families, more folds on small data, and the chosen model
refitted on every row of the file before it is logged."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
from helpers import loaded_run
from sklearn.base import clone

from mlpilot.platform.ml import families, steps
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.hpo import budget as B
from mlpilot.platform.ml.hpo.objective import (
    CV_FOLDS,
    KEEP_PER_FAMILY,
    SMALL_DATA_FOLDS,
    SMALL_DATA_ROWS,
    CVObjective,
    search_folds,
)
from mlpilot.platform.ml.hpo.spaces import auto_families
from mlpilot.platform.ml.modeling import make_estimator
from mlpilot.platform.ml.steps._model import AllRowsRefit


def _run(tmp_path: Path, rows: int = 200) -> PipelineRun:
    rng = np.random.default_rng(0)
    x = rng.normal(size=rows)
    frame = pd.DataFrame({"x": x, "z": rng.normal(size=rows), "y": 3 * x + rng.normal(size=rows)})
    return loaded_run(tmp_path, frame)


# -- extra trees --------------------------------------------------------------------------------
def test_extra_trees_are_searched_cheap_first_but_not_offered_to_plans() -> None:
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

    assert "et" in auto_families() and "et" not in auto_families("gpu")
    assert families.get("et").tree
    assert "et" not in families.plan_names()  # the plan's model names are the design's list
    et = families.get("et")
    assert et.low_cost is not None and et.rounds == "n_estimators"
    regressor = make_estimator("et", "regression", params={"max_depth": 5}, n_jobs=1)
    assert isinstance(regressor, ExtraTreesRegressor) and regressor.max_depth == 5
    classifier = make_estimator("et", "classification", imbalanced=True)
    assert isinstance(classifier, ExtraTreesClassifier)
    assert classifier.class_weight == "balanced_subsample"
    assert B.grow("et", {"n_estimators": 100}, "regression") == {"n_estimators": 200}


# -- what the ensemble draws from ---------------------------------------------------------------
def _objective(keep: int) -> CVObjective:
    objective = CVObjective.__new__(CVObjective)
    objective.metric, objective.keep_oof = "rmse", keep
    objective.oof, objective.oof_values, objective.oof_families = {}, {}, {}
    return objective


def test_one_family_cannot_fill_the_ensembles_candidates() -> None:
    objective = _objective(keep=20)
    for number in range(10):  # ten linear trials, each better than the last (rmse)
        objective._keep(number, 10.0 - number, np.zeros(3), "linear")
    objective._keep(10, 50.0, np.zeros(3), "et")  # a much worse, but different, model
    linear = [n for n, f in objective.oof_families.items() if f == "linear"]
    assert sorted(linear) == [7, 8, 9][-KEEP_PER_FAMILY:]  # the family's best
    assert 10 in objective.oof and set(objective.oof) == set(objective.oof_values)


def test_over_the_total_the_largest_family_gives_way() -> None:
    objective = _objective(keep=4)
    for number, (family, value) in enumerate(
        [("rf", 1.0), ("rf", 2.0), ("rf", 3.0), ("et", 9.0), ("hgb", 8.0)]
    ):
        objective._keep(number, value, np.zeros(2), family)
    assert set(objective.oof) == {0, 1, 3, 4}  # rf's worst went, not et or hgb (worse still)


# -- folds --------------------------------------------------------------------------------------
def test_small_timed_searches_score_trials_on_more_folds() -> None:
    assert search_folds(SMALL_DATA_ROWS, timed=True) == SMALL_DATA_FOLDS > CV_FOLDS
    assert search_folds(SMALL_DATA_ROWS + 1, timed=True) == CV_FOLDS
    assert search_folds(100, timed=False) == CV_FOLDS  # a trial-count search as before


# -- refit on every row -------------------------------------------------------------------------
def _fitted(run: PipelineRun) -> object:
    X, y = run.data.train()
    pipeline = run.build_pipeline("linear").fit(X, y)
    run.model.pipeline = pipeline
    return pipeline


def test_the_chosen_model_is_refitted_on_every_row_before_logging(tmp_path: Path) -> None:
    run = _run(tmp_path)
    pipeline = _fitted(run)
    run.deadline = time.time() + 60
    AllRowsRefit(pipeline, fit_s=0.01)(run)
    assert run.model.pipeline is not pipeline
    expected = clone(pipeline).fit(run.data.X, run.data.y)
    X_test, _ = run.data.test()
    np.testing.assert_allclose(run.model.pipeline.predict(X_test), expected.predict(X_test))
    assert not np.allclose(pipeline.predict(X_test), expected.predict(X_test))
    assert f"refitted on all {len(run.data.y)} rows" in run.notes[-1]


def test_a_refit_that_would_pass_the_deadline_is_skipped_with_a_note(tmp_path: Path) -> None:
    run = _run(tmp_path)
    pipeline = _fitted(run)
    run.deadline = time.time() + 3.0
    AllRowsRefit(pipeline, fit_s=5.0)(run)
    assert run.model.pipeline is pipeline and "refit on all" in run.notes[-1]
    assert "skipped" in run.notes[-1]


def test_a_logged_or_replaced_model_is_not_refitted(tmp_path: Path) -> None:
    run = _run(tmp_path)
    pipeline = _fitted(run)
    run.model.logged = True
    AllRowsRefit(pipeline, fit_s=0.01)(run)
    assert run.model.pipeline is pipeline
    run.model.logged = False
    AllRowsRefit(clone(pipeline), fit_s=0.01)(run)  # another model became the run's
    assert run.model.pipeline is pipeline and not run.notes


def test_a_timed_search_refits_before_the_model_is_logged(tmp_path: Path) -> None:
    run = _run(tmp_path)
    # the budget counts from here: a cold worker's first imports took 1.8 s of a 9 s
    # budget once, which left no time to search (6.4 s are kept for the finish)
    run.started_at = time.time()
    steps.optimize_model(run, model="linear", trials=None, timeout_s=14, early_stopping=True)
    kinds = [
        type(f).__name__ if isinstance(f, AllRowsRefit) else f.__name__ for f in run._finishers
    ]
    assert kinds.index("AllRowsRefit") < kinds.index("_log_final_model")
    assert run.result.study is not None
    fitted = run.model.pipeline
    run._finish()
    assert run.model.pipeline is not fitted and "refitted on all" in " ".join(run.notes)


def test_a_trial_count_search_keeps_its_training_rows_model(tmp_path: Path) -> None:
    run = _run(tmp_path)
    steps.optimize_model(run, model="linear", trials=3, timeout_s=None, early_stopping=False)
    assert not any(isinstance(f, AllRowsRefit) for f in run._finishers)
