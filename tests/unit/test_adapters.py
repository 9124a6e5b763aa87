"""Domain adapters: detection from prompt and columns, leakage rules, metrics, factory errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlpilot.adapters import detect_adapter, get_adapter
from mlpilot.platform.errors import PlanError
from mlpilot.platform.ml import steps
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.tracking.run_logger import NullRunLogger

LOANS = ["loan_id", "income", "loan_amount", "grade", "term", "recoveries", "default"]
SALES = ["date", "store_id", "region", "product_category", "price", "promotion", "holiday", "sales"]


def test_detection_needs_a_clear_domain() -> None:
    assert detect_adapter("predict loan default", LOANS) == "finance"
    assert detect_adapter("forecast sales per store", SALES) == "retail"
    assert (
        detect_adapter(
            "哪些因素影响患者的糖尿病诊断", ["age", "bmi", "glucose", "insulin", "outcome"]
        )
        == "medical"
    )
    assert detect_adapter("predict y", ["a", "b", "y"]) is None


def test_factory_lists_valid_names() -> None:
    with pytest.raises(PlanError) as info:
        get_adapter("insurance")
    assert "finance, medical, retail" in info.value.one_line()


def test_finance_drops_post_outcome_columns_and_picks_pr_auc(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 400
    default = rng.random(n) < 0.15
    frame = pd.DataFrame(
        {
            "income": rng.normal(50, 10, n),
            "grade": rng.choice(list("ABCD"), n),
            "recoveries": np.where(
                default, rng.uniform(100, 900, n), 0.0
            ),  # known only after default
            "default": np.where(default, "yes", "no"),
        }
    )
    path = tmp_path / "loans.csv"
    frame.to_csv(path, index=False)
    run = PipelineRun(
        plan={"adapter": "finance"},
        seed=1,
        data_path=str(path),
        run_dir=tmp_path,
        logger=NullRunLogger(),
    )
    steps.load_data(run, path=str(path), target="default")
    assert "recoveries" not in run.data.X.columns and run.model.main_metric == "pr_auc"
    assert any("recoveries" in note for note in run.notes)
    steps.train_model(run, model="linear")
    assert run.metrics["test_roc_auc"] < 0.8  # without the leak there is little signal left


def _patients(n: int, rng: np.random.Generator, classes: list[str], p: list[float]) -> pd.DataFrame:
    first = ["James", "Mary", "John", "Linda", "Robert", "Susan", "David", "Karen", "Paul", "Anna"]
    last = ["Smith", "Jones", "Brown", "Garcia", "Miller", "Davis", "Wilson", "Moore", "Lee"]
    diagnosis = rng.choice(classes, n, p=p)
    glucose = rng.normal(100, 10, n) + 25 * (diagnosis != classes[0])
    return pd.DataFrame(
        {
            "patient_name": [f"{rng.choice(first)} {rng.choice(last)}" for _ in range(n)],
            "age": rng.integers(20, 80, n),
            "bmi": rng.normal(27, 4, n),
            "glucose": glucose,
            "diagnosis": diagnosis,
        }
    )


@pytest.mark.parametrize(
    ("classes", "p", "metric"),
    [
        (["none", "type2"], [0.8, 0.2], "recall"),
        (["none", "type1", "type2"], [0.9, 0.04, 0.06], "balanced_accuracy"),
    ],
)
def test_medical_metric_sees_the_rare_classes_and_names_are_not_features(
    tmp_path: Path, classes: list[str], p: list[float], metric: str
) -> None:
    path = tmp_path / "patients.csv"
    _patients(600, np.random.default_rng(5), classes, p).to_csv(path, index=False)
    run = PipelineRun(
        plan={"adapter": "medical"},
        seed=1,
        data_path=str(path),
        run_dir=tmp_path,
        logger=NullRunLogger(),
    )
    steps.load_data(run, path=str(path), target="diagnosis")
    # weighted recall on three classes is accuracy: it would ignore the rare ones
    assert run.model.main_metric == metric
    assert any(metric.replace("_", " ") in note for note in run.notes)
    assert "patient_name" not in run.data.X.columns or all(
        s.kind == "identifier" for s in run.data.specs if s.name == "patient_name"
    )
    steps.clean_data(run)
    steps.engineer_features(run)
    steps.train_model(run, model="linear")
    steps.feature_importance(run, top_k=3)
    ranked = json.loads((tmp_path / "importance.json").read_text())
    assert ranked and "patient_name" not in {item["feature"] for item in ranked}
