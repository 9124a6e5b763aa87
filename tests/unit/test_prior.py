"""The meta-learned prior: meta-features, the portfolio, nearest data sets, warm starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd
import pytest
from helpers import loaded_run

from mlpilot.platform.ml import prior as P
from mlpilot.platform.ml.hpo import warm
from mlpilot.platform.ml.hpo.optimize import optimize
from mlpilot.tracking import vocab


def _frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "noise": rng.normal(size=n),
            "colour": rng.choice(["red", "blue"], n),
            "gap": np.where(rng.random(n) < 0.5, np.nan, 1.0),
            "y": 3 * x + rng.normal(0, 0.1, n),
        }
    )


def test_meta_features_describe_size_types_gaps_and_landmarks() -> None:
    frame = _frame()
    X, y = frame.drop(columns="y"), frame["y"]
    meta = P.meta_features(X, y, "regression")
    assert tuple(meta) == P.NAMES
    assert meta["log_rows"] == pytest.approx(np.log10(300))
    assert meta["categorical_share"] == pytest.approx(0.25)
    assert meta["missing_share"] == pytest.approx(X.isna().to_numpy().mean())
    assert meta["linear_gain"] > 0.9  # y is linear in x
    assert 0 < meta["stump_gain"] < meta["linear_gain"]
    labels = pd.Series(np.where(frame["x"] > 0.8, "rare", "common"))
    meta = P.meta_features(X, labels, "classification")
    assert meta["log_classes"] == 1.0 and 0 < meta["balance"] < 1
    assert meta["stump_gain"] > 0.1  # one split on x separates the classes


def test_regrets_run_from_the_best_to_the_worst_or_failed() -> None:
    out = P.regrets({"a": [1.0, 0.5, None], "b": [0.0]})
    assert out == {"a": [0.0, 0.5, 1.0], "b": [1.0]}


def _doc() -> dict[str, Any]:
    """Two kinds of data set: small ones where candidate 0 wins, large ones where 1 does."""
    sets = []
    for i in range(20):
        small = i < 10
        meta = [(2.0 if small else 5.0) + 0.01 * (i % 10)] + [0.1] * (len(P.NAMES) - 1)
        regret = [0.0, 0.9, 0.5] if small else [0.9, 0.0, 0.4]
        sets.append(
            {"name": f"set{i}", "task": "regression", "meta": meta, "regret": {"rf": regret}}
        )
    configs = [{"n_estimators": 50}, {"n_estimators": 400}, {"n_estimators": 100}]
    return {
        "meta_features": list(P.NAMES),
        "candidates": {"regression": {"rf": configs}},
        "datasets": sets,
    }


def _meta(log_rows: float) -> dict[str, float]:
    return {name: (log_rows if name == "log_rows" else 0.1) for name in P.NAMES}


def test_a_data_set_starts_from_what_won_on_the_nearest_ones() -> None:
    prior = P.Prior(_doc())
    configs, choice = prior.configs("rf", "regression", _meta(2.0), 2)
    assert choice.source == "nearest" and all(int(n[3:]) < 10 for n in choice.neighbours)
    assert configs[0] == {"n_estimators": 50}
    configs, _ = prior.configs("rf", "regression", _meta(5.0), 2)
    assert configs[0] == {"n_estimators": 400}


def test_a_data_set_far_from_every_known_one_gets_the_portfolio() -> None:
    configs, choice = P.Prior(_doc()).configs("rf", "regression", _meta(40.0), 3)
    assert choice.source == "portfolio"
    # greedy cover: the two specialists first (together they leave no regret), then the rest
    assert {c["n_estimators"] for c in configs[:2]} == {50, 400} and len(configs) == 3


def test_a_prior_of_other_meta_features_is_refused() -> None:
    with pytest.raises(ValueError, match="rebuild"):
        P.Prior({**_doc(), "meta_features": ["rows"]})


def _search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shipped: Any) -> Any:
    monkeypatch.setattr(P.Prior, "shipped", classmethod(lambda cls: shipped))
    run = loaded_run(tmp_path, _frame(200).drop(columns=["colour", "gap"]), seed=42)
    optimize(
        run, model="rf", trials=4, metric="rmse", timeout_s=None, early_stopping=False,
        warm_start=True, study_name="warm", storage=str(tmp_path / "journal.log"), plots=False,
    )  # fmt: skip
    return run


def test_a_search_enqueues_the_warm_configurations_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlpilot.platform.ml.hpo import open_storage

    run = _search(tmp_path, monkeypatch, P.Prior(_doc()))
    note = next(n for n in run.notes if n.startswith("warm start:"))
    assert "the first 3 trials" in note and run.result.warm_start in ("nearest", "portfolio")
    study = optuna.load_study(
        study_name="warm", storage=open_storage(str(tmp_path / "journal.log"))
    )
    trials = sorted(study.trials, key=lambda t: t.number)
    assert sorted(t.params["n_estimators"] for t in trials[:3]) == [50, 100, 400]
    assert len(trials) == 4  # then the sampler: the budget counts the warm trials


def test_without_a_prior_the_search_says_it_starts_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _search(tmp_path, monkeypatch, None)
    assert any("no meta-learned prior ships: starting cold" in n for n in run.notes)
    assert run.result.warm_start == "unavailable"
    assert warm.WARM_TRIALS >= 3 and vocab.TAG_OPTUNA_WARM_START.startswith("mlpilot.")


def test_train_model_auto_takes_the_priors_best_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlpilot.platform.ml import steps

    monkeypatch.setattr(P.Prior, "shipped", classmethod(lambda cls: P.Prior(_doc())))
    run = loaded_run(tmp_path, _frame(200).drop(columns=["colour", "gap"]), seed=42)
    steps.train_model(run, model="auto")
    assert run.model.family == "rf" and run.model.params in _doc()["candidates"]["regression"]["rf"]
    assert any("did best on" in n for n in run.notes)
    monkeypatch.setattr(P.Prior, "shipped", classmethod(lambda cls: None))
    steps.train_model(run, model="auto")  # no prior: the default family, its defaults
    assert run.model.params == {} and any("default configuration" in n for n in run.notes)


def test_meta_features_of_an_all_categorical_frame_code_the_categories() -> None:
    rng = np.random.default_rng(1)
    colour = rng.choice(["red", "blue", "green"], 300)
    X = pd.DataFrame({"colour": colour, "size": rng.choice(["s", "m", "l"], 300)})
    meta = P.meta_features(X, pd.Series(colour == "red"), "classification")
    assert meta["categorical_share"] == 1.0 and meta["missing_share"] == 0.0
    assert meta["stump_gain"] > 0.2  # one split on the coded colour finds the target


def test_meta_features_of_one_column_are_finite() -> None:
    frame = _frame()
    meta = P.meta_features(frame[["x"]], frame["y"], "regression")
    assert meta["log_cols"] == 0.0 and meta["categorical_share"] == 0.0
    assert all(np.isfinite(v) for v in meta.values()) and meta["linear_gain"] > 0.9


def test_meta_features_leave_out_the_rows_without_a_target() -> None:
    frame = _frame()
    X, y = frame.drop(columns="y"), frame["y"].copy()
    y.iloc[:100] = np.nan
    meta = P.meta_features(X, y, "regression")
    assert meta["log_rows"] == pytest.approx(np.log10(200))
    assert meta == P.meta_features(X.iloc[100:], y.iloc[100:], "regression")
    labels = pd.Series(np.where(frame["x"] > 0, "a", "b"), dtype=object)
    labels.iloc[:50] = None
    assert P.meta_features(X, labels, "classification")["log_rows"] == pytest.approx(np.log10(250))


def test_the_enqueued_trials_carry_where_they_came_from_into_mlflow_tags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from mlpilot.platform.ml.hpo.trial_log import TrialLogger

    run = _search(tmp_path, monkeypatch, P.Prior(_doc()))
    logger = SimpleNamespace(study_name="warm")
    tags = [TrialLogger._trial_tags(logger, t) for t in _trials(tmp_path / "journal.log", "warm")]
    assert [t.get(vocab.TAG_TRIAL_WARM_START) for t in tags] == [run.result.warm_start] * 3 + [
        None
    ]  # the fourth is the sampler's own


def _trials(journal: Path, name: str) -> list[Any]:
    from mlpilot.platform.ml.hpo import open_storage

    study = optuna.load_study(study_name=name, storage=open_storage(str(journal)))
    return sorted(study.trials, key=lambda t: t.number)


def _seeded_search(folder: Path, monkeypatch: pytest.MonkeyPatch, shipped: Any, on: bool) -> Any:
    monkeypatch.setattr(P.Prior, "shipped", classmethod(lambda cls: shipped))
    folder.mkdir()
    run = loaded_run(folder, _frame(200).drop(columns=["colour", "gap"]), seed=42)
    optimize(
        run, model="rf", trials=5, metric="rmse", timeout_s=None, early_stopping=False,
        warm_start=on, study_name="s", storage=str(folder / "j.log"), plots=False,
    )  # fmt: skip
    return run, _trials(folder / "j.log", "s")


def test_warm_start_off_is_the_same_search_without_the_enqueued_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prior = P.Prior(_doc())
    off, off_trials = _seeded_search(tmp_path / "off", monkeypatch, prior, on=False)
    cold, cold_trials = _seeded_search(tmp_path / "cold", monkeypatch, None, on=True)
    warm, warm_trials = _seeded_search(tmp_path / "warm", monkeypatch, prior, on=True)
    assert (off.result.warm_start, cold.result.warm_start) == ("off", "unavailable")
    assert warm.result.warm_start in ("nearest", "portfolio")
    assert not any(vocab.ATTR_WARM_START in t.user_attrs for t in off_trials)
    # off: the search a data set with no prior gets, trial for trial
    assert [t.params for t in off_trials] == [t.params for t in cold_trials]
    assert [t.value for t in off_trials] == [t.value for t in cold_trials]
    assert [vocab.ATTR_WARM_START in t.user_attrs for t in warm_trials] == [True] * 3 + [False] * 2
    assert len(warm_trials) == len(off_trials) == 5  # the same budget, warm trials included


def test_every_shipped_configuration_passes_its_familys_parameter_specification() -> None:
    from mlpilot.platform.ml import families as F

    prior = P.Prior.shipped()
    if prior is None:
        pytest.skip("no prior ships in this checkout (benchmarks/build_prior.py --assemble)")
    checked = 0
    for task, by_family in prior.candidates.items():
        for name, configs in by_family.items():
            specs = {p.name: p for p in F.registry().get(name).params_for(task)}
            for params in configs:
                for key, value in params.items():
                    if key == F.CATEGORICAL_PARAM:
                        continue
                    spec = specs[key]  # a KeyError names a parameter the family lacks
                    if spec.kind == "choice":
                        assert value in spec.choices, (name, key, value)
                    else:
                        assert spec.low <= value <= spec.high, (name, key, value)
                        assert isinstance(value, int) or spec.kind == "float", (name, key)
                    checked += 1
    assert checked > 100 and len(prior.sets) >= 100
