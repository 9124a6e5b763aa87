"""Categorical columns handled natively by LightGBM, XGBoost and HistGradientBoosting, or
one-hot/target encoded: a searched parameter the validation score decides, not a rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from helpers import loaded_run

from mlpilot.platform.ml import families
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.features import NATIVE_MAX_CATEGORIES
from mlpilot.platform.ml.hpo.objective import CVObjective
from mlpilot.platform.ml.hpo.spaces import sample
from mlpilot.platform.ml.modeling import CATEGORICAL_PARAM, build_pipeline
from mlpilot.platform.ml.transformers import CategoryCodes, CategoryColumns


def _frame(rows: int = 400, classify: bool = False, cities: int = 40) -> pd.DataFrame:
    """A target that depends on a set of categories no single one-hot column carries."""
    rng = np.random.default_rng(0)
    city = rng.choice([f"c{i}" for i in range(cities)], size=rows)
    grade = rng.choice(["a", "b", "c"], size=rows)
    x = rng.normal(size=rows)
    lifted = np.isin(city, [f"c{i}" for i in range(0, cities, 3)])
    y = 2.0 * lifted + x + rng.normal(scale=0.3, size=rows)
    frame = pd.DataFrame({"city": city, "grade": grade, "x": x, "y": y})
    if classify:
        frame["y"] = np.where(y > np.median(y), "high", "low")
    return frame


def _split(tmp_path: Path, classify: bool = False) -> PipelineRun:
    return loaded_run(tmp_path, _frame(classify=classify))


def test_the_plan_lists_columns_a_learner_can_take_as_categories(tmp_path: Path) -> None:
    frame = _frame()
    frame["code"] = [f"k{i % (NATIVE_MAX_CATEGORIES + 40)}" for i in range(len(frame))]
    run = loaded_run(tmp_path, frame)
    plan = run.data.feature_plan(run.seed)
    assert set(plan.native) == {"city", "grade"}  # "code" has too many values


@pytest.mark.parametrize(
    "family", sorted(f.name for f in families.registry() if f.native_categorical)
)
@pytest.mark.parametrize("classify", [False, True])
def test_native_pipelines_split_on_categories_and_predict_unseen_values(
    tmp_path: Path, family: str, classify: bool
) -> None:
    run = _split(tmp_path, classify)
    X, y = run.data.train()
    native = build_pipeline(run.data, family, {CATEGORICAL_PARAM: "native"}, seed=0, n_jobs=1)
    encoded = build_pipeline(run.data, family, {CATEGORICAL_PARAM: "encoded"}, seed=0, n_jobs=1)
    assert "categories" in native.named_steps and "categories" not in encoded.named_steps
    native.fit(X, y)
    frame = native[:-1].transform(X.head(5))
    # city and grade lead: as pandas categories, or whole-number codes for CatBoost
    leading = "int64" if isinstance(native.named_steps["categories"], CategoryCodes) else "category"
    assert [str(t) for t in frame.dtypes[:2]] == [leading, leading]
    unseen = X.head(3).assign(city="never-seen", grade=np.nan)
    assert len(native.predict(unseen)) == 3
    names = list(native.named_steps["features"].get_feature_names_out())
    assert names[:2] == ["native__city", "native__grade"]


def test_a_plan_may_ask_for_native_categories_only_of_learners_that_have_them(
    tmp_path: Path,
) -> None:
    run = _split(tmp_path)
    forest = build_pipeline(run.data, "rf", {CATEGORICAL_PARAM: "native"}, seed=0)
    assert "categories" not in forest.named_steps
    assert "n_estimators" in forest.named_steps["model"].get_params()


def test_the_search_samples_the_encoding_only_when_there_are_categories() -> None:
    study = optuna.create_study()
    with_cats = study.ask()
    _, params = sample(with_cats, "lgbm", "regression", categorical=True)
    assert params[CATEGORICAL_PARAM] in ("encoded", "native")
    without = study.ask()
    _, params = sample(without, "lgbm", "regression", categorical=False)
    assert CATEGORICAL_PARAM not in params
    _, params = sample(study.ask(), "rf", "regression", categorical=True)
    assert CATEGORICAL_PARAM not in params  # a forest has no native categories here


def test_both_encodings_are_scored_on_the_same_folds(tmp_path: Path) -> None:
    """Neither wins by rule (on 400 rows native splits beat one-hot over 12 cities but lose
    to target encoding over 40; on 4,000 they win both): the objective scores each, and the
    study's best is the better one."""
    run = loaded_run(tmp_path, _frame(cities=12))
    objective = CVObjective(run, model="hgb", metric="r2", folds=3, pruning=False)
    assert objective.categorical
    study = optuna.create_study(direction="maximize")
    fixed = {"max_iter": 100, "learning_rate": 0.1, "max_leaf_nodes": 15}
    fixed |= {"min_samples_leaf": 10, "l2_regularization": 1e-3}
    for how in ("encoded", "native"):
        study.enqueue_trial({**fixed, CATEGORICAL_PARAM: how})
    study.optimize(objective, n_trials=2)
    scores = {t.params[CATEGORICAL_PARAM]: t.value for t in study.trials}
    assert set(scores) == {"encoded", "native"}
    assert min(scores.values()) > 0.7
    assert abs(scores["native"] - scores["encoded"]) > 1e-3  # two different models
    assert study.best_trial.params[CATEGORICAL_PARAM] == max(scores, key=scores.__getitem__)
    assert len(objective._folds) == 2  # each encoding's folds transformed once, kept apart


def test_category_columns_fix_categories_at_fit() -> None:
    step = CategoryColumns(1).fit(np.array([[0.0, 1.5], [2.0, 2.5], [np.nan, 0.1]]))
    frame = step.transform(np.array([[2.0, 1.0], [5.0, 1.0]]))
    assert list(frame["f0"].cat.categories) == [0.0, 2.0]
    assert frame["f0"].isna().tolist() == [False, True]  # a code never seen is missing
    assert frame["f1"].dtype == float


def test_a_plan_may_set_the_encoding_and_nothing_else_for_it() -> None:
    from mlpilot.platform.errors import PlanError
    from mlpilot.platform.plan import Plan
    from mlpilot.platform.plan.params import check_params

    def plan(value: object) -> Plan:
        args = {"model": "lgbm", "params": {CATEGORICAL_PARAM: value}}
        return Plan.from_dict({"steps": [{"tool": "train_model", "args": args}]})

    check_params(plan("native"), "regression")
    with pytest.raises(PlanError, match="choose one of"):
        check_params(plan("one-hot"), "regression")
