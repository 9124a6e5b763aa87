"""The dashboard's study and model queries against the real stores: a journal-file Optuna
storage, the embedded metadata store and MLflow's sqlite registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import seed_studies

from mlpilot.dashboards import queries
from mlpilot.platform.config import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def stores(home: Path) -> Iterator[dict[str, Any]]:
    from mlpilot.tracking.metadata import open_store

    settings = Settings.from_env({"MLPILOT_HOME": str(home)})
    names = seed_studies(Path(settings.optuna_storage))
    store = open_store(settings)
    store.create_run("run-mixed", {"experiment": "churn", "study": {"name": names["mixed"]}})
    store.create_run(
        "run-single", {"experiment": "sales", "study": {"name": names["single"], "metric": "r2"}}
    )
    queries.configure(settings)
    try:
        yield {"settings": settings, "names": names}
    finally:
        queries.configure(None)


def test_studies_list_the_busiest_first_with_their_metric_and_experiment(
    stores: dict[str, Any],
) -> None:
    listed = queries.studies()
    names = stores["names"]
    assert [s["name"] for s in listed] == [names["mixed"], names["single"]]
    mixed, single = listed
    assert mixed["n_trials"] == 40 and mixed["metric"] == "rmse"
    assert mixed["experiments"] == ["churn"] and single["experiments"] == ["sales"]
    assert single["direction"] == "maximize" and single["metric"] == "r2"


def test_a_mixed_study_keeps_every_state_and_its_importances_per_family(
    stores: dict[str, Any],
) -> None:
    d = queries.study_trials(stores["names"]["mixed"])
    assert d["counts"]["PRUNED"] > 0 and d["counts"]["FAIL"] > 0
    assert sum(d["counts"].values()) == len(d["rows"]) == d["n_trials"]
    assert d["families"] == ["rf", "xgb"] and d["best_family"] in ("rf", "xgb")
    assert set(d["importances"]) == {"rf", "xgb"}
    assert all(v > 0 for values in d["importances"].values() for v in values.values())
    assert {c["state"] for c in d["curves"]} == {"COMPLETE", "PRUNED"}
    assert d["experiments"] == ["churn"] and d["run_ids"] == ["run-mixed"]
    shape = queries.parallel_data(d, d["best_family"])
    assert len(shape["axes"]) >= 3 and shape["lines"]


def test_aliases_are_set_moved_and_deleted_in_the_registry(
    stores: dict[str, Any], tmp_path: Path
) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=stores["settings"].tracking_uri)
    client.create_registered_model("churn-model")
    for _ in range(2):
        client.create_model_version("churn-model", source=str(tmp_path))
    ok, line = queries.set_model_alias("churn-model", "champion", "1")
    assert ok and "new alias" in line
    ok, line = queries.set_model_alias("churn-model", "champion", "2")
    assert ok and "was version 1" in line, line
    assert _aliases(client.get_registered_model("churn-model").aliases) == {"champion": "2"}
    listed = {m["name"]: m for m in queries.registered_models()}["churn-model"]
    assert _aliases(listed["aliases"]) == {"champion": "2"}
    for bad in ("v3", "latest", "two words", ""):
        ok, line = queries.set_model_alias("churn-model", bad, "1")
        assert not ok and "refused" in line, (bad, line)
    ok, line = queries.set_model_alias("churn-model", "challenger", "9")
    assert not ok and "no version 9" in line
    ok, line = queries.delete_model_alias("churn-model", "champion")
    assert ok and "version 2" in line
    assert client.get_registered_model("churn-model").aliases == {}
    ok, line = queries.delete_model_alias("churn-model", "champion")
    assert not ok and "no alias" in line


def _aliases(aliases: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in aliases.items()}


def test_a_missing_or_multi_objective_study_is_none_not_an_error(
    stores: dict[str, Any],
) -> None:
    import optuna

    from mlpilot.platform.ml.hpo.storage import open_storage

    assert queries.study_trials("no-such-study") is None  # a stale link: the page says so
    storage = open_storage(stores["settings"].optuna_storage)
    multi = optuna.create_study(
        study_name="two-goals", storage=storage, directions=["minimize", "maximize"]
    )
    multi.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=2)
    assert queries.study_trials("two-goals") is None
    assert queries.study_trials(stores["names"]["single"]) is not None
