"""Out-of-fold output through the study's storage: workers' trials join the parent's ensemble."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from helpers import loaded_run

from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.hpo import objective as O
from mlpilot.platform.ml.hpo import oof_store
from mlpilot.platform.ml.hpo.objective import CVObjective
from mlpilot.platform.ml.hpo.optimize import _search_output
from mlpilot.tracking import vocab

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_output_round_trips_through_a_json_attribute_within_float32() -> None:
    rng = np.random.default_rng(0)
    predictions = rng.normal(100.0, 30.0, size=1000)
    proba = rng.dirichlet(np.ones(3), size=500)
    for output in (predictions, proba):
        stored = json.loads(json.dumps(oof_store.encode(output)))  # as a storage keeps it
        back = oof_store.decode(stored)
        assert back.shape == output.shape and back.dtype == np.float64
        np.testing.assert_allclose(back, output, rtol=1e-6)
        assert not np.array_equal(back, output)  # float32 on the way: not the float64 bits


def test_output_over_the_cap_is_not_stored(monkeypatch, caplog) -> None:
    monkeypatch.setattr(oof_store, "MAX_SHARED_VALUES", 999)
    assert oof_store.encode(np.zeros(999)) is not None
    with caplog.at_level(logging.DEBUG, logger=oof_store.__name__):
        assert oof_store.encode(np.zeros((500, 2))) is None
    assert "not stored" in caplog.text


def test_the_fingerprint_tells_other_folds_and_targets_apart() -> None:
    y = np.array(["a", "b"] * 10, dtype=object)
    splits = [(np.arange(10, 20), np.arange(0, 10)), (np.arange(0, 10), np.arange(10, 20))]
    base = oof_store.fingerprint(y, splits, ["a", "b"])
    assert base == oof_store.fingerprint(pd.Series(y, index=range(5, 25)), splits, ["a", "b"])
    assert base != oof_store.fingerprint(y, splits[::-1], ["a", "b"])
    assert base != oof_store.fingerprint(y[::-1], splits, ["a", "b"])
    assert base != oof_store.fingerprint(y, splits, ["b", "a"])


# -- with a real study ---------------------------------------------------------------------------
def _run(tmp_path: Path, seed: int = 0) -> PipelineRun:
    tmp_path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    frame = pd.DataFrame({"x": x, "z": rng.normal(size=200), "y": 2 * x + rng.normal(0, 1, 200)})
    return loaded_run(tmp_path, frame, seed=seed)


def _worker_trials(
    tmp_path: Path, monkeypatch, n: int = 8
) -> tuple[optuna.Study, CVObjective, PipelineRun]:
    """``n`` trials of a worker-style objective (``share_oof``) in a sqlite study."""
    # one family: a trial is stored when fewer than 3 stored trials scored better
    monkeypatch.setattr(oof_store, "SHARE_BEST", O.KEEP_PER_FAMILY)
    run = _run(tmp_path)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(
        storage=storage, direction="minimize", sampler=optuna.samplers.RandomSampler(seed=3)
    )
    worker = CVObjective(run, model="linear", metric="rmse", pruning=False, share_oof=True)
    study.optimize(worker, n_trials=n)
    return optuna.load_study(study_name=study.study_name, storage=storage), worker, run


def test_a_worker_stores_only_its_top_trials_output(tmp_path: Path, monkeypatch) -> None:
    study, worker, run = _worker_trials(tmp_path, monkeypatch)
    trials = study.get_trials()
    assert worker.oof == {} and all(t.state.name == "COMPLETE" for t in trials)
    stored = [vocab.ATTR_OOF in t.user_attrs for t in trials]
    # stored exactly when fewer than SHARE_BEST earlier trials scored better
    best = O.KEEP_PER_FAMILY
    expected = [sum(u.value < t.value for u in trials[: t.number]) < best for t in trials]
    assert stored == expected and best <= sum(stored) < len(trials)
    # the output a parent computes in memory for the same configuration on the same folds
    monkeypatch.setattr(O, "KEEP_PER_FAMILY", len(trials))  # here: keep every trial's
    parent = CVObjective(run, model="linear", metric="rmse", pruning=False, keep_oof=20)
    mine = optuna.create_study(direction="minimize")
    for t in trials:
        mine.enqueue_trial(t.params)
    mine.optimize(parent, n_trials=len(trials))
    for t in trials:
        if stored[t.number]:
            assert t.user_attrs[vocab.ATTR_OOF_FOLDS] == parent.oof_folds
            np.testing.assert_allclose(
                oof_store.decode(t.user_attrs[vocab.ATTR_OOF]), parent.oof[t.number], rtol=1e-5
            )


def test_the_parent_blends_workers_trials_scored_on_its_folds(tmp_path: Path, monkeypatch) -> None:
    study, _, _ = _worker_trials(tmp_path, monkeypatch, n=6)
    # a worker whose run split the rows differently (another seed) stores output too
    monkeypatch.setattr(oof_store, "SHARE_BEST", 100)
    other = CVObjective(
        _run(tmp_path / "other", seed=1), model="linear", metric="rmse", share_oof=True
    )
    study.optimize(other, n_trials=1)
    trials = study.get_trials()
    odd = trials[-1].number
    assert trials[odd].user_attrs[vocab.ATTR_OOF_FOLDS] == other.oof_folds
    shared = [t.number for t in trials if vocab.ATTR_OOF in t.user_attrs]
    assert odd in shared and len(shared) >= 4
    monkeypatch.setattr(O, "KEEP_PER_FAMILY", len(trials))  # here: keep every trial's
    # the parent's own run, built apart as a worker's is: the same folds
    parent = CVObjective(
        _run(tmp_path / "parent"), model="linear", metric="rmse", pruning=False, keep_oof=20
    )
    notes: list[str] = []
    search = _search_output(study, parent, "linear", study.best_trial.number, note=notes.append)
    assert search is not None
    assert set(search.oof) == set(shared) - {odd}
    assert notes == [f"ensemble candidates include {len(shared) - 1} trials run by workers"]
    for number in search.oof:
        np.testing.assert_allclose(
            search.oof[number], oof_store.decode(trials[number].user_attrs[vocab.ATTR_OOF])
        )
        assert search.values[number] == trials[number].value
        assert search.configs[number] == ("linear", trials[number].params)
        assert search.fit_s[number] == trials[number].user_attrs[vocab.ATTR_FIT_S]


def test_worker_output_goes_through_the_parents_candidate_rules(
    tmp_path: Path, monkeypatch
) -> None:
    study, _, run = _worker_trials(tmp_path, monkeypatch, n=6)
    shared = [t for t in study.get_trials() if vocab.ATTR_OOF in t.user_attrs]
    parent = CVObjective(run, model="linear", metric="rmse", pruning=False, keep_oof=2)
    search = _search_output(study, parent, "linear", study.best_trial.number)
    best_two = sorted(shared, key=lambda t: t.value)[:2]
    assert search is not None and set(search.oof) == {t.number for t in best_two}
    # no time budget, no ensemble: the stored output is not even read
    plain = CVObjective(run, model="linear", metric="rmse", pruning=False)
    assert _search_output(study, plain, "linear", study.best_trial.number) is None


def test_a_parents_objective_shipped_to_dask_shares_instead_of_keeping(tmp_path: Path) -> None:
    parent = CVObjective(_run(tmp_path), model="linear", metric="rmse", keep_oof=20)
    assert not parent.share_oof
    shipped = pickle.loads(pickle.dumps(parent))
    assert shipped.keep_oof == 0 and shipped.share_oof
    assert shipped.oof_folds == parent.oof_folds


@pytest.mark.parametrize("value,expected", [(0.5, True), (2.5, False)])
def test_worth_sharing_counts_better_complete_trials(
    monkeypatch, value: float, expected: bool
) -> None:
    monkeypatch.setattr(oof_store, "SHARE_BEST", 2)
    study = optuna.create_study(direction="minimize")
    for v in (1.0, 2.0, 3.0):
        study.add_trial(optuna.trial.create_trial(value=v, params={}, distributions={}))
    assert oof_store.worth_sharing(study, value, "linear", False, per_family=1) is expected
    assert oof_store.worth_sharing(study, 9.0, "linear", False, per_family=4)
    # with model=auto: a family with fewer better trials of its own than per_family
    auto = optuna.create_study(direction="maximize")
    for v in (3.0, 4.0, 5.0):
        auto.add_trial(
            optuna.trial.create_trial(
                value=v,
                params={"family": "rf"},
                distributions={"family": optuna.distributions.CategoricalDistribution(["rf"])},
            )
        )
    assert oof_store.worth_sharing(auto, 1.0, "linear", True, per_family=1)
    assert not oof_store.worth_sharing(auto, 1.0, "rf", True, per_family=1)


def test_mlpilot_worker_trials_reach_the_parents_ensemble(tmp_path: Path) -> None:
    from mlpilot.platform.ml.hpo.spec import spec_from_run
    from mlpilot.platform.ml.hpo.worker import run_worker

    run = _run(tmp_path / "parent")
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(study_name="s", storage=storage, direction="minimize")
    settings = {"patience": 10, "min_delta": 0.01, "warmup": 10, "cv_folds": 3}
    spec = spec_from_run(
        run,
        model="linear",
        metric="rmse",
        n_trials=None,
        timeout_s=60.0,
        early_stopping=False,
        pruning=False,
        **settings,
    )
    spec.save(study)
    report = run_worker("s", storage=storage, trials=3, track=False)
    assert report.ran == 3
    parent = CVObjective(run, model="linear", metric="rmse", pruning=False, keep_oof=20)
    notes: list[str] = []
    search = _search_output(study, parent, "linear", study.best_trial.number, note=notes.append)
    assert search is not None and set(search.oof) == {0, 1, 2}
    assert notes == ["ensemble candidates include 3 trials run by workers"]
    # a study without a time budget ends in no ensemble: its workers store nothing
    spec.timeout_s = None
    spec.save(study)
    run_worker("s", storage=storage, trials=1, track=False)
    assert vocab.ATTR_OOF not in study.trials[-1].user_attrs
