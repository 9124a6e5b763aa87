"""The greedy weighted ensemble: selection, the logged estimator, and when it is kept."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import loaded_run

from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.ensemble import (
    SearchOutput,
    WeightedEnsemble,
    build_ensemble,
    caruana,
    metric_value,
)


def _r2(y: np.ndarray):
    return lambda out: metric_value("r2", "regression", y, out, None, None)


def test_caruana_blends_two_complementary_predictions() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=400)
    noise = rng.normal(size=400)
    oof = {1: y + noise, 2: y - noise, 3: y + 3 * rng.normal(size=400)}  # errors cancel in 1+2
    selection = caruana(oof, _r2(y), maximize=True)
    assert set(selection.weights) == {1, 2}
    assert selection.weights[1] == pytest.approx(0.5) and selection.score == pytest.approx(1.0)
    assert selection.gain > 0.4 and sum(selection.weights.values()) == pytest.approx(1.0)


def test_caruana_keeps_one_model_when_blending_does_not_help() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(size=300)
    oof = {5: y + 0.01 * rng.normal(size=300), 6: y + rng.normal(size=300)}
    selection = caruana(oof, _r2(y), maximize=True)
    assert selection.weights == {5: 1.0} and selection.gain == 0.0


def test_metric_value_agrees_with_the_runs_metrics() -> None:
    rng = np.random.default_rng(2)
    classes = np.array(["a", "b", "c"])
    y = rng.choice(classes, 200)
    proba = rng.dirichlet(np.ones(3), 200)
    predicted = classes[proba.argmax(axis=1)]
    reference = M.scores("classification", y, predicted, proba, classes)
    for metric in ("accuracy", "f1", "log_loss", "roc_auc", "balanced_accuracy"):
        got = metric_value(metric, "classification", y, proba, classes, None)
        assert got == pytest.approx(reference[metric]), metric
    binary = np.array([0, 1])
    yb = rng.integers(0, 2, 200)
    pb = rng.dirichlet(np.ones(2), 200)
    ref = M.scores("classification", yb, pb.argmax(axis=1), pb, binary)
    assert metric_value("roc_auc", "classification", yb, pb, binary, 1) == pytest.approx(
        ref["roc_auc"]
    )


def _run(tmp_path: Path, task: str) -> PipelineRun:
    rng = np.random.default_rng(3)
    x = rng.normal(size=300)
    label = np.where(x + rng.normal(0, 0.5, 300) > 0, "yes", "no")
    frame = pd.DataFrame(
        {"x": x, "z": rng.normal(size=300), "y": label if task == "classification" else 2 * x}
    )
    return loaded_run(tmp_path, frame)


def test_the_ensemble_is_a_model_like_any_other(tmp_path: Path) -> None:
    run = _run(tmp_path, "classification")
    X, y = run.data.train()
    members = [run.build_pipeline(f).fit(X, y) for f in ("linear", "rf")]
    model = WeightedEnsemble(members, [0.25, 0.75])
    model.members_ = members
    X_test, _ = run.data.test()
    expected = 0.25 * members[0].predict_proba(X_test) + 0.75 * members[1].predict_proba(X_test)
    np.testing.assert_allclose(model.predict_proba(X_test), expected)
    assert list(model.classes_) == ["no", "yes"]
    assert set(model.predict(X_test)) <= {"no", "yes"}
    again = pickle.loads(pickle.dumps(model))  # what MLflow stores
    np.testing.assert_allclose(again.predict_proba(X_test), expected)
    refit = WeightedEnsemble(members, [1, 3]).fit(X, y)  # scikit-learn's fit refits clones
    np.testing.assert_allclose(refit.predict_proba(X_test), expected)


def test_a_regression_blend_with_catboost_first_predicts_values(tmp_path: Path) -> None:
    """CatBoost's regressor carries an empty ``classes_``: the blend read it as labels and
    asked its members for probabilities (ISLR/Auto, seed 43 of the AutoML benchmark)."""
    run = _run(tmp_path, "regression")
    X, y = run.data.train()
    members = [run.build_pipeline(f).fit(X, y) for f in ("catboost", "linear")]
    model = WeightedEnsemble(members, [0.5, 0.5])
    X_test, _ = run.data.test()
    expected = 0.5 * members[0].predict(X_test) + 0.5 * members[1].predict(X_test)
    assert model.classes_ is None
    np.testing.assert_allclose(model.predict(X_test), expected)


def _search(run: PipelineRun, oof: dict[int, np.ndarray], values: dict[int, float]) -> SearchOutput:
    _, y = run.data.train()
    return SearchOutput(
        oof=oof,
        values=values,
        configs={n: ("linear", {}) for n in oof},
        fit_s=dict.fromkeys(oof, 0.01),
        y=y.to_numpy(),
        splits=[(np.arange(0, 120), np.arange(120, 240))],
        maximize=False,
        best_number=min(values, key=values.get),
    )


def test_a_winning_blend_becomes_the_model_and_a_losing_one_is_noted(tmp_path: Path) -> None:
    run = _run(tmp_path, "")
    run.model.main_metric = "rmse"
    _, y = run.data.train()
    target = y.to_numpy()
    rng = np.random.default_rng(4)
    noise = rng.normal(size=len(target))
    run.search = _search(run, {1: target + noise, 2: target - noise}, {1: 1.0, 2: 1.0})
    run.result.study = {}
    model, params = build_ensemble(run, None, reserve_s=0.0)
    assert isinstance(model, WeightedEnsemble) and len(model.members_) == 2
    assert "linear#1:0.50" in params["ensemble"] and "ensemble of 2 trials" in run.notes[-1]
    assert run.result.study["best_fold_values"][0] == pytest.approx(0.0, abs=1e-9)
    run.search = _search(run, {1: target, 2: target + noise}, {1: 0.0, 2: 1.0})
    assert build_ensemble(run, None, reserve_s=0.0) is None
    assert "kept the single model" in run.notes[-1]


def test_a_blend_whose_refits_do_not_fit_the_budget_is_not_built(tmp_path: Path) -> None:
    run = _run(tmp_path, "")
    run.model.main_metric = "rmse"
    _, y = run.data.train()
    target = y.to_numpy()
    noise = np.random.default_rng(5).normal(size=len(target))
    run.search = _search(run, {1: target + noise, 2: target - noise}, {1: 1.0, 2: 1.0})
    run.deadline = time.time() + 1.0
    assert build_ensemble(run, None, reserve_s=5.0) is None
    assert "are free: kept the single model" in run.notes[-1]
