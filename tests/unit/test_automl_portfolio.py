"""The AutoML search's portfolio: extra trees among the families, and kept out-of-fold
output spread over families for the ensemble; more folds on small data."""

from __future__ import annotations

import numpy as np

from mlpilot.platform.ml.hpo import budget as B
from mlpilot.platform.ml.hpo.objective import (
    CV_FOLDS,
    KEEP_PER_FAMILY,
    SMALL_DATA_FOLDS,
    SMALL_DATA_ROWS,
    CVObjective,
    search_folds,
)
from mlpilot.platform.ml.hpo.spaces import AUTO_FAMILIES, GPU_AUTO_FAMILIES
from mlpilot.platform.ml.modeling import PLAN_FAMILIES, TREE_FAMILIES, make_estimator


# -- extra trees --------------------------------------------------------------------------------
def test_extra_trees_are_searched_cheap_first_but_not_offered_to_plans() -> None:
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

    assert "et" in AUTO_FAMILIES and "et" not in GPU_AUTO_FAMILIES and "et" in TREE_FAMILIES
    assert "et" not in PLAN_FAMILIES  # the plan's model names are the design's list
    assert "et" in B.LOW_COST and B.ROUNDS["et"] == "n_estimators"
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
