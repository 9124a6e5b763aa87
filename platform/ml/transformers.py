"""scikit-learn transformers that live inside every logged model.

They make the registered model predict from raw rows: ``SchemaCoercer`` parses raw
values by the kinds learned at training, the others build features from typed columns.
All are picklable and have no state beyond what ``fit`` learns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.preprocessing import LabelEncoder

from mlpilot.platform.ml.dtypes import (
    EXCLUDED_KINDS,
    TYPED_ATTR,
    ColumnSpec,
    category_dtype,
    coerce_column,
)


class SchemaCoercer(TransformerMixin, BaseEstimator):
    """Raw frame → typed frame with the training columns, in training order.

    ``schema`` is a list of ``ColumnSpec`` dicts. Columns of excluded kinds are dropped;
    columns missing from the input are added as missing values (the imputers fill them).
    """

    def __init__(self, schema: list[dict[str, Any]] | None = None) -> None:
        self.schema = schema

    def fit(self, X: pd.DataFrame, y: Any = None) -> SchemaCoercer:
        self.specs_ = [
            ColumnSpec(**s) for s in (self.schema or []) if s["kind"] not in EXCLUDED_KINDS
        ]
        self.feature_names_in_ = np.array([s.name for s in self.specs_], dtype=object)
        self.n_features_in_ = len(self.specs_)
        return self

    def transform(self, X: pd.DataFrame) -> pd.DataFrame:
        if not isinstance(X, pd.DataFrame):
            X = pd.DataFrame(X, columns=list(self.feature_names_in_)[: np.shape(X)[1]])
        columns = {}
        for spec in self.specs_:
            if spec.name in X.columns:
                typed = bool(X.attrs.get(TYPED_ATTR))
                columns[spec.name] = (
                    _coerce_typed(X[spec.name], spec)
                    if typed
                    else coerce_column(X[spec.name], spec)
                )
            else:
                filler = pd.NaT if spec.kind == "datetime" else np.nan
                columns[spec.name] = pd.Series(filler, index=X.index)
        return pd.DataFrame(columns, index=X.index)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.array([s.name for s in self.specs_], dtype=object)


def _coerce_typed(series: pd.Series, spec: ColumnSpec) -> pd.Series:
    # Training data typed by load_data passes through without re-parsing; raw rows (any
    # frame without the TYPED_ATTR mark) are always parsed, categories stripped and folded.
    if spec.kind in ("numeric", "integer", "boolean") and pd.api.types.is_float_dtype(series):
        return series
    if spec.kind == "datetime" and pd.api.types.is_datetime64_any_dtype(series):
        return series
    if spec.kind == "categorical" and series.dtype in (object, category_dtype()):
        return series
    return coerce_column(series, spec)


def has_time_of_day(values: Any) -> bool:
    """Whether a date column carries hours (one of its values is not at midnight)."""
    return bool((pd.to_datetime(values).dt.hour.fillna(0) != 0).any())


class DatetimeFeatures(TransformerMixin, BaseEstimator):
    """Date columns → year, month, day, day of week, quarter, weekend (and hour when present)."""

    def fit(self, X: pd.DataFrame, y: Any = None) -> DatetimeFeatures:
        X = _frame(X)
        self.columns_ = list(X.columns)
        self.with_hour_ = {c: has_time_of_day(X[c]) for c in self.columns_}
        return self

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        X = _frame(X)
        parts = []
        for c in self.columns_:
            d = pd.to_datetime(X[c]).dt
            cols = [
                d.year,
                d.month,
                d.day,
                d.dayofweek,
                d.quarter,
                (d.dayofweek >= 5).astype(float).where(d.year.notna()),
            ]
            if self.with_hour_[c]:
                cols.append(d.hour)
            parts.extend(np.asarray(col, dtype="float64") for col in cols)
        return np.column_stack(parts) if parts else np.empty((len(X), 0))

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        names = []
        for c in self.columns_:
            suffixes = ["year", "month", "day", "dayofweek", "quarter", "weekend"]
            if self.with_hour_[c]:
                suffixes.append("hour")
            names.extend(f"{c}_{s}" for s in suffixes)
        return np.array(names, dtype=object)


class DateOrdinal(TransformerMixin, BaseEstimator):
    """Date columns → days since 1970 (the representation without feature engineering)."""

    def fit(self, X: pd.DataFrame, y: Any = None) -> DateOrdinal:
        self.columns_ = list(_frame(X).columns)
        return self

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        X = _frame(X)
        out = [
            (pd.to_datetime(X[c]) - pd.Timestamp("1970-01-01"))
            .dt.total_seconds()
            .to_numpy(dtype="float64")
            / 86400.0
            for c in self.columns_
        ]
        return np.column_stack(out) if out else np.empty((len(X), 0))

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.array([f"{c}_days" for c in self.columns_], dtype=object)


class InteractionFeatures(TransformerMixin, BaseEstimator):
    """Products of chosen numeric column pairs (missing values filled with training medians)."""

    def __init__(self, pairs: list[tuple[str, str]] | None = None) -> None:
        self.pairs = pairs

    def fit(self, X: pd.DataFrame, y: Any = None) -> InteractionFeatures:
        X = _frame(X)
        needed = sorted({c for pair in self.pairs or [] for c in pair})
        self.medians_ = {
            c: float(np.nanmedian(X[c].to_numpy(dtype="float64"))) if X[c].notna().any() else 0.0
            for c in needed
        }
        return self

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        X = _frame(X)
        out = []
        for a, b in self.pairs or []:
            va = X[a].to_numpy(dtype="float64", na_value=np.nan)
            vb = X[b].to_numpy(dtype="float64", na_value=np.nan)
            va = np.where(np.isnan(va), self.medians_[a], va)
            vb = np.where(np.isnan(vb), self.medians_[b], vb)
            out.append(va * vb)
        return np.column_stack(out) if out else np.empty((len(X), 0))

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.array([f"{a}*{b}" for a, b in self.pairs or []], dtype=object)


class CategoryColumns(TransformerMixin, BaseEstimator):
    """The first ``n`` columns (category codes) as pandas categories, the rest as numbers.

    LightGBM and HistGradientBoosting take categories from the dtype, XGBoost with
    ``enable_categorical``: each then splits on sets of categories instead of on one-hot
    columns or target means. The categories are fixed at fit, so every later frame codes
    them alike; a code the training rows never had becomes missing.
    """

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def fit(self, X: Any, y: Any = None) -> CategoryColumns:
        X = np.asarray(X, dtype=float)
        self.n_features_in_ = X.shape[1]
        self.categories_ = [np.unique(X[:, j][~np.isnan(X[:, j])]) for j in range(self.n)]
        return self

    def transform(self, X: Any) -> pd.DataFrame:
        X = np.asarray(X, dtype=float)
        frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
        for j, categories in enumerate(self.categories_):
            frame[f"f{j}"] = _categorical(X[:, j], categories)
        return frame


def _categorical(values: np.ndarray, categories: np.ndarray) -> pd.Categorical:
    """Codes as a categorical with whole-number categories (XGBoost refuses float ones)."""
    if len(categories) == 0:
        codes = np.full(len(values), -1)
    else:
        where = np.clip(np.searchsorted(categories, values), 0, len(categories) - 1)
        codes = np.where(categories[where] == values, where, -1)  # NaN never matches
    return pd.Categorical.from_codes(codes, categories=categories.astype(np.int64))


class CategoryCodes(TransformerMixin, BaseEstimator):
    """The first ``n`` columns (category codes) as whole numbers, a missing one as -1; the
    rest as numbers. For learners that hash category values themselves and refuse float
    or missing ones (CatBoost's ``cat_features``): nothing is fixed at fit."""

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def fit(self, X: Any, y: Any = None) -> CategoryCodes:
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def transform(self, X: Any) -> pd.DataFrame:
        X = np.asarray(X, dtype=float)
        frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
        for j in range(self.n):
            frame[f"f{j}"] = np.where(np.isnan(X[:, j]), -1, X[:, j]).astype(np.int64)
        return frame


class LabelEncodedClassifier(ClassifierMixin, BaseEstimator):
    """Wraps a classifier that needs labels 0..k-1 (XGBoost) and returns the original labels."""

    def __init__(self, estimator: Any = None) -> None:
        self.estimator = estimator

    def fit(self, X: Any, y: Any, **fit_params: Any) -> LabelEncodedClassifier:
        self.encoder_ = LabelEncoder().fit(y)
        self.classes_ = self.encoder_.classes_
        self.estimator_ = clone(self.estimator).fit(X, self.encoder_.transform(y), **fit_params)
        return self

    def predict(self, X: Any) -> np.ndarray:
        # CatBoost's classifier predicts a column (n, 1), XGBoost's a vector
        codes = np.asarray(self.estimator_.predict(X)).ravel().astype(int)
        return self.encoder_.inverse_transform(codes)

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.estimator_.predict_proba(X)

    @property
    def feature_importances_(self) -> np.ndarray:
        return self.estimator_.feature_importances_


def _frame(X: Any) -> pd.DataFrame:
    return X if isinstance(X, pd.DataFrame) else pd.DataFrame(X)
