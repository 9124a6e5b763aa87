"""Rules that real files need: label kinds, the positive class, targets, messy columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlpilot.platform.errors import DataError, describe_error
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.dtypes import (
    coerce_column,
    detect_column,
    detect_schema,
    id_like_name,
    target_is_identifier,
)
from mlpilot.platform.ml.steps._data import _resolve_task, class_labels


# -- the positive class ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("classes", "counts", "expected"),
    [
        (np.array([0, 1]), None, 1),
        (np.array([1, 2]), None, 1),
        (np.array([False, True]), None, True),
        (np.array(["no", "yes"], dtype=object), None, "yes"),
        (np.array(["Negative", "Positive"], dtype=object), None, "Positive"),
        (np.array(["FALSE", "TRUE"], dtype=object), None, "TRUE"),
        (np.array(["ham", "spam"], dtype=object), {"ham": 90, "spam": 10}, "spam"),
        (np.array([2, 5]), {2: 3, 5: 40}, 2),
    ],
)
def test_positive_class_rule(classes: np.ndarray, counts: dict | None, expected: object) -> None:
    assert M.positive_label(classes, counts) == expected


def test_positive_class_of_booleans_is_true_not_the_number_one() -> None:
    assert isinstance(M.positive_label(np.array([False, True])), (bool, np.bool_))


# -- labels ------------------------------------------------------------------------------------
def test_boolean_labels_stay_boolean() -> None:
    labels, _ = class_labels(pd.Series([True, False, True]))
    assert labels.dtype == bool


def test_float_coded_integers_become_integers() -> None:
    labels, _ = class_labels(pd.Series([0.0, 1.0, 2.0, 1.0]))
    assert labels.dtype == "int64" and list(labels) == [0, 1, 2, 1]


def test_fractional_class_values_become_text_classes() -> None:
    labels, _ = class_labels(pd.Series([0.5, 1.5, 0.5]))
    assert list(labels) == ["0.5", "1.5", "0.5"]


def test_mixed_case_text_labels_merge_into_the_most_frequent_spelling() -> None:
    labels, notes = class_labels(pd.Series(["Yes", "yes", " YES ", "No", "no", "Yes"]))
    assert sorted(set(labels)) == ["No", "Yes"] and labels.dtype == object
    assert notes and "merged" in notes[0]


@pytest.mark.parametrize(
    "values",
    [
        [0, 1] * 20,
        [True, False] * 20,
        [0.0, 1.0] * 20,
        ["yes", "no"] * 20,
        ["True", "False"] * 20,
        ["a", "b", "c", "d"] * 10,
        [1, 2, 3] * 13 + [1],
    ],
)
def test_every_label_kind_scores_without_error(values: list) -> None:
    """log loss, ROC AUC and the rest accept the classes exactly as the runtime builds them."""
    task, labels, _ = _resolve_task(pd.Series(values), "label", "classification")
    classes = np.unique(labels.to_numpy())
    proba = np.full((len(labels), len(classes)), 1.0 / len(classes))
    proba[:, 0] += 0.1
    proba /= proba.sum(axis=1, keepdims=True)
    pos = M.positive_label(classes) if len(classes) == 2 else None
    scores = M.scores(task, labels, labels, proba, classes, pos)
    assert scores["accuracy"] == 1.0 and "log_loss" in scores
    assert ("roc_auc" in scores) == (len(classes) == 2) or len(classes) > 2


def test_a_class_with_one_row_is_dropped_with_a_note() -> None:
    task, labels, notes = _resolve_task(pd.Series(["a"] * 5 + ["b"] * 5 + ["c"]), "t", "auto")
    assert task == "classification" and "c" not in set(labels) and len(labels) == 10
    assert "fewer than 2 rows" in notes[0]


def test_a_single_usable_class_fails_with_one_line() -> None:
    with pytest.raises(DataError, match="single class"):
        _resolve_task(pd.Series(["yes"] * 10 + ["no"]), "label", "classification")


def test_a_single_value_target_fails_naming_the_value() -> None:
    with pytest.raises(DataError, match="single value \\('yes'\\)"):
        _resolve_task(pd.Series(["yes"] * 30), "label", "auto")


# -- identifiers --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("id", True),
        ("customer_id", True),
        ("customerId", True),
        ("orderID", True),
        ("rownames", True),
        ("Unnamed: 0", True),
        ("row.names", True),
        ("paid", False),
        ("valid", False),
        ("Idaho", False),
        ("grid_size", False),
    ],
)
def test_id_like_names(name: str, expected: bool) -> None:
    assert id_like_name(name) is expected


def test_target_identifier_rules() -> None:
    unique_ints = pd.Series(np.arange(100, 200))
    assert target_is_identifier("customer_id", unique_ints)
    assert not target_is_identifier("rank", unique_ints)  # distinct integers, no id-like name
    assert not target_is_identifier("id", unique_ints.astype(float))  # floats measure
    assert target_is_identifier("code", pd.Series([f"C{i:04d}" for i in range(50)]))


def test_an_identifier_target_fails_and_is_never_replaced() -> None:
    with pytest.raises(DataError, match="is an identifier"):
        _resolve_task(pd.Series(np.arange(50)), "customer_id", "auto")


def test_distinct_integers_without_an_id_name_are_a_regression_target() -> None:
    task, values, _ = _resolve_task(pd.Series(np.arange(1, 61)), "rank", "auto")
    assert task == "regression" and values.dtype == "float64"


def test_row_numbers_are_not_features() -> None:
    spec = detect_column("n", pd.Series(np.arange(1, 101)))
    assert spec.kind == "identifier" and "row number" in (spec.note or "")
    assert detect_column("score", pd.Series(np.random.default_rng(0).permutation(100))).kind == (
        "integer"
    )


def test_a_duplicated_row_does_not_hide_an_identifier() -> None:
    frame = pd.DataFrame({"account": [f"A{i:03d}" for i in range(40)], "x": range(40)})
    frame = pd.concat([frame, frame.iloc[:3]], ignore_index=True)
    kinds = {s.name: s.kind for s in detect_schema(frame)}
    assert kinds["account"] == "identifier"


def test_nearly_unique_names_are_not_categories() -> None:
    names = [f"Passenger, Mr Name{i} Second" for i in range(98)] + ["Kelly, Mr James"] * 2
    assert detect_column("Name", pd.Series(names)).kind in ("text", "identifier")


# -- messy columns ------------------------------------------------------------------------------
@pytest.mark.parametrize("placeholder", ["unknown", "N/A", "-", "?", "n/a"])
def test_numbers_with_text_placeholders_are_numeric(placeholder: str) -> None:
    values = pd.Series([str(v) for v in range(40)] + [placeholder] * 10, dtype=object)
    spec = detect_column("income", values)
    assert spec.kind == "integer" and placeholder.lower() in (spec.note or "")
    coerced = coerce_column(values, spec)
    assert coerced.isna().sum() == 10 and coerced.iloc[5] == 5.0


def test_categories_differing_by_case_or_spaces_are_merged() -> None:
    values = pd.Series(["Male", "male", " MALE", "Female", "female "] * 8)
    spec = detect_column("sex", values)
    assert spec.kind == "categorical" and spec.fold_case and "merged" in (spec.note or "")
    assert set(coerce_column(values, spec)) == {"male", "female"}


# -- failures and settings ----------------------------------------------------------------------
def test_errors_are_described_once() -> None:
    assert describe_error({"type": "ValueError", "message": "bad"}) == "ValueError: bad"
    assert describe_error({"type": "ValueError", "message": "ValueError: bad"}) == "ValueError: bad"
    assert describe_error({"type": "DataError", "message": "no target"}) == "no target"


def test_a_failing_stage_is_named(tmp_path: Path) -> None:
    from mlpilot.platform.ml.context import PipelineRun

    run = PipelineRun(plan={}, seed=1, data_path=None, run_dir=tmp_path)
    with run, run.stage("train"):
        raise ValueError("Unknown label type")
    assert run.result.error == {
        "type": "ValueError",
        "message": "Unknown label type",
        "stage": "train",
    }


def test_explicit_sqlite_store_keeps_artifacts_beside_it(tmp_path: Path) -> None:
    from mlpilot.platform.config.settings import Settings

    db = tmp_path / "db" / "mlflow.db"
    settings = Settings.from_env(
        {"MLPILOT_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": f"sqlite:///{db}"}
    )
    assert settings.artifact_root == (tmp_path / "db" / "artifacts").as_uri()
    server = Settings.from_env(
        {"MLPILOT_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": "http://h:5000"}
    )
    assert server.artifact_root is None
