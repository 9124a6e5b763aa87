"""The runtime library in-process: edge cases of data, leakage, and the logged Pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlpilot.platform.errors import DataError
from mlpilot.platform.ml import steps
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.tracking.run_logger import NullRunLogger


def _run(tmp_path: Path, data: Path | None = None) -> PipelineRun:
    return PipelineRun(
        plan={},
        seed=42,
        data_path=str(data) if data else None,
        run_dir=tmp_path,
        logger=NullRunLogger(),
    )


def _csv(tmp_path: Path, frame: pd.DataFrame, name: str = "data.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def _frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "noise": rng.normal(size=n),
            "city": rng.choice(["a", "b", "c"], n),
            "y": 3 * x + rng.normal(0, 0.1, n),
        }
    )


def test_target_with_one_class_is_refused(tmp_path: Path) -> None:
    frame = _frame()
    frame["label"] = "yes"
    path = _csv(tmp_path, frame)
    with pytest.raises(DataError, match="single value"):
        steps.load_data(_run(tmp_path, path), path=str(path), target="label", task="classification")


def test_all_missing_target_is_refused(tmp_path: Path) -> None:
    frame = _frame()
    frame["y"] = np.nan
    path = _csv(tmp_path, frame)
    with pytest.raises(DataError, match="no values"):
        steps.load_data(_run(tmp_path, path), path=str(path), target="y")


def test_string_target_cannot_be_regressed(tmp_path: Path) -> None:
    path = _csv(tmp_path, _frame())
    with pytest.raises(DataError, match="cannot be regressed"):
        steps.load_data(_run(tmp_path, path), path=str(path), target="city", task="regression")


def test_header_without_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("x,noise,city,y\n")
    with pytest.raises(DataError, match="header but no data rows"):
        steps.load_data(_run(tmp_path, path), path=str(path), target="y")


def test_missing_target_rows_are_dropped_with_a_note(tmp_path: Path) -> None:
    frame = _frame()
    frame.loc[:9, "y"] = np.nan
    path = _csv(tmp_path, frame)
    run = _run(tmp_path, path)
    steps.load_data(run, path=str(path), target="y")
    assert len(run.data.X) == 290 and any("dropped 10 rows" in n for n in run.notes)


def test_duplicates_are_whole_rows_of_the_file(tmp_path: Path) -> None:
    """Titanic: passengers of one class and sex with no age differ only by name, a column
    that is not a feature; they are different rows. Rows copied whole are removed."""
    rng = np.random.default_rng(3)
    n = 200
    frame = pd.DataFrame(
        {
            "Name": [
                f"{rng.choice(['Smith', 'Kelly', 'Brown'])}, Mr {i} {i * 7 % 13}" for i in range(n)
            ],
            "PClass": rng.choice(["1st", "2nd", "3rd"], n),
            "Sex": rng.choice(["male", "female"], n),
            "Survived": rng.integers(0, 2, n),
        }
    )
    copied = frame.iloc[:15]
    path = _csv(tmp_path, pd.concat([frame, copied], ignore_index=True))
    run = _run(tmp_path, path)
    steps.load_data(run, path=str(path), target="Survived")
    assert "Name" not in run.data.X.columns  # free text, not a feature
    steps.clean_data(run)
    assert len(run.data.X) == n
    assert any(note == "removed 15 duplicate rows" for note in run.notes)


def test_three_date_formats_duplicate_names_and_chinese_columns_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    n = 240
    days = pd.date_range("2024-01-01", periods=n, freq="D")
    formats = ["%Y-%m-%d", "%m/%d/%Y", "%b %d, %Y"]
    dates = [d.strftime(formats[i % 3]) for i, d in enumerate(days)]
    price = rng.uniform(1, 10, n)
    body = "日期,单价,单价,门店,销售额\n" + "".join(
        f'"{dates[i]}",{price[i]:.2f},{rng.uniform():.3f},{"北京" if i % 2 else "上海"},{20 - 1.5 * price[i] + (3 if days[i].dayofweek >= 5 else 0) + rng.normal(0, 0.2):.3f}\n'
        for i in range(n)
    )
    path = tmp_path / "中文.csv"
    path.write_text(body, encoding="utf-8")
    run = _run(tmp_path, path)
    steps.load_data(run, path=str(path), target="销售额")
    kinds = {s.name: s.kind for s in run.data.specs}
    assert kinds["日期"] == "datetime" and "单价.1" in kinds
    assert run.data.X["日期"].notna().all() and run.data.X["日期"].dt.year.eq(2024).sum() > 200
    assert any("duplicate column names" in n for n in run.notes)
    steps.clean_data(run)
    steps.engineer_features(run)
    steps.train_model(run, model="hgb")
    assert run.metrics["test_r2"] > 0.8
    predictions = run.model.pipeline.predict(pd.read_csv(path).drop(columns=["销售额"]).head(5))
    assert np.isfinite(predictions).all()


def test_permuted_target_with_target_encoding_stays_at_chance(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    n = 3000
    frame = pd.DataFrame(
        {
            "sku": [
                f"SKU-{i}" for i in rng.integers(0, 1200, n)
            ],  # high cardinality: target-encoded
            "store": rng.choice([f"S{i}" for i in range(30)], n),
            "price": rng.uniform(1, 100, n),
            "label": rng.permutation(np.repeat(["yes", "no"], n // 2)),
            "amount": rng.permutation(rng.normal(100, 20, n)),
        }
    )
    for target, task, metric, chance in (
        ("label", "classification", "roc_auc", 0.5),
        ("amount", "regression", "r2", 0.0),
    ):
        path = _csv(
            tmp_path,
            frame.drop(columns=["amount" if target == "label" else "label"]),
            f"{target}.csv",
        )
        run = _run(tmp_path, path)
        steps.load_data(run, path=str(path), target=target, task=task)
        steps.clean_data(run)
        steps.engineer_features(run, target_encoding=True)
        assert "sku" in run.data.features.target_encoded
        steps.train_model(run, model="linear")
        steps.evaluate_model(run, cv_folds=3)
        # leakage would show as skill; noise fitted by boosting may score below chance, never above
        assert run.metrics[f"test_{metric}"] < chance + 0.06, (target, run.metrics)
        assert run.metrics[f"cv_{metric}"] < chance + 0.06, (target, run.metrics)
        if task == "classification":
            assert run.metrics[f"test_{metric}"] > chance - 0.06


def test_classification_metrics_plots_and_importance(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 600
    x = rng.normal(size=n)
    frame = pd.DataFrame(
        {
            "x": x,
            "noise": rng.normal(size=n),
            "churn": np.where(x + rng.normal(0, 0.5, n) > 1.3, "Yes", "No"),
        }
    )
    path = _csv(tmp_path, frame)
    run = _run(tmp_path, path)
    steps.load_data(run, path=str(path), target="churn")
    assert run.data.task == "classification" and any("imbalanced" in n for n in run.notes)
    steps.train_model(run, model="rf")
    steps.evaluate_model(run, cv_folds=3)
    steps.feature_importance(run, method="impurity", top_k=2)
    for key in ("test_roc_auc", "test_f1", "cv_accuracy", "cv_roc_auc"):
        assert key in run.metrics
    assert run.metrics["test_roc_auc"] > 0.85
    assert run.result.importance[0]["feature"] == "x"
    assert (tmp_path / "importance.json").exists()


def test_interactions_are_kept_only_when_they_add_signal(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 800
    frame = pd.DataFrame(
        {"a": rng.uniform(1, 2, n), "b": rng.uniform(1, 2, n), "c": rng.normal(size=n)}
    )
    frame["y"] = frame["a"] * frame["b"] * 10 + rng.normal(0, 0.05, n)
    path = _csv(tmp_path, frame)
    run = _run(tmp_path, path)
    steps.load_data(run, path=str(path), target="y")
    steps.engineer_features(run, interactions=True, max_interactions=3)
    assert {"a", "b"} in [set(p) for p in run.data.features.interactions]
    assert all("c" not in p for p in run.data.features.interactions)


@pytest.mark.parametrize(("freq", "hour"), [("h", True), ("D", False)])
def test_features_note_names_the_hour_part_only_for_timestamps_with_a_time(
    tmp_path: Path, freq: str, hour: bool
) -> None:
    rng = np.random.default_rng(3)
    n = 300
    stamps = pd.date_range("2024-03-01", periods=n, freq=freq)
    frame = pd.DataFrame(
        {"timestamp": stamps.strftime("%Y-%m-%d %H:%M:%S"), "load": rng.normal(50, 5, n)}
    )
    run = _run(tmp_path, _csv(tmp_path, frame, "load.csv"))
    steps.load_data(run, path=str(tmp_path / "load.csv"), target="load")
    steps.engineer_features(run)
    note = next(d["action"] for d in run.data.features.decisions if d["column"] == "timestamp")
    assert note.startswith("year, month, day")
    assert ("hour" in note) is hour
    from mlpilot.platform.ml.transformers import DatetimeFeatures

    # what the note says is what the model gets
    names = DatetimeFeatures().fit(run.data.X[["timestamp"]]).get_feature_names_out()
    assert any("hour" in str(name) for name in names) is hour
