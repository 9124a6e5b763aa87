"""What a pipeline knows between steps, in two typed parts: the data and the model.

``DataState`` holds one copy of the prepared frame and the decisions taken on it (kinds,
target, task, classes, the train/test split, the cleaning and feature plans); training
and test rows are views of it by index, made once and reused. ``ModelState`` holds the
fitted model and how it is judged. Steps and the hyperparameter search read and write
these; the run itself (``context.PipelineRun``) owns them with the logger and progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.errors import DataError, MlpilotError
from mlpilot.platform.ml.dtypes import ColumnSpec
from mlpilot.platform.ml.features import CleaningPlan, FeaturePlan, plan_cleaning, plan_features

#: a class under this share of the rows makes a classification "imbalanced"
IMBALANCE_SHARE = 0.2


@dataclass
class DataState:
    X: pd.DataFrame | None = None
    y: pd.Series | None = None
    specs: list[ColumnSpec] = field(default_factory=list)
    target: str | None = None
    task: str | None = None
    classes: np.ndarray | None = None
    positive_class: Any = None
    train_index: pd.Index | None = None
    test_index: pd.Index | None = None
    raw_example: pd.DataFrame | None = None  # a few raw rows: the logged model's input example
    cleaning: CleaningPlan | None = None
    features: FeaturePlan | None = None
    _parts: dict[str, tuple[tuple[Any, ...], tuple[pd.DataFrame, pd.Series]]] = field(
        default_factory=dict, repr=False
    )

    def require(self, step: str) -> None:
        if self.X is None:
            raise MlpilotError(f"{step} needs data: the pipeline has no load_data step before it")

    @property
    def n_classes(self) -> int:
        return len(self.classes) if self.classes is not None else 0

    @property
    def imbalanced(self) -> bool:
        if self.task != "classification" or self.y is None:
            return False
        return bool(self.y.value_counts(normalize=True).min() < IMBALANCE_SHARE)

    # -- rows ----------------------------------------------------------------------------------
    def train(self) -> tuple[pd.DataFrame, pd.Series]:
        return self._rows("train", self.train_index)

    def test(self) -> tuple[pd.DataFrame, pd.Series]:
        return self._rows("test", self.test_index)

    def _rows(self, part: str, index: pd.Index | None) -> tuple[pd.DataFrame, pd.Series]:
        # Several steps read the same split; a million-row copy costs a tenth of a second
        # each time. The cache remembers the objects it was made from, so any change of X,
        # y or the split (cleaning, adapters) makes a new one. Callers never modify them.
        assert self.X is not None and self.y is not None and index is not None
        key = (self.X, self.y, index)
        cached = self._parts.get(part)
        if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
            return cached[1]
        frames = (self.X.loc[index], self.y.loc[index])
        self._parts[part] = (key, frames)
        return frames

    def keep_rows(self, mask: np.ndarray) -> None:
        """Keep the rows where ``mask`` is true, in the frame and in both parts of the split."""
        assert self.X is not None and self.y is not None
        self.X, self.y = self.X[mask], self.y[mask]
        self._parts.clear()  # the old parts hold copies of rows that are gone
        kept = self.X.index
        self.train_index = self.train_index.intersection(kept)
        self.test_index = self.test_index.intersection(kept)
        if len(self.train_index) < 5 or len(self.test_index) < 2:
            raise DataError(
                f"only {len(kept)} rows are left after cleaning: too few to train and test"
            )

    def drop_columns(self, names: list[str]) -> None:
        assert self.X is not None
        self.X = self.X.drop(columns=names)
        self.specs = [s for s in self.specs if s.name not in names]
        self._parts.clear()

    # -- decisions on training rows -------------------------------------------------------------
    def cleaning_plan(self) -> CleaningPlan:
        """How missing values are filled (decided on training rows; cached)."""
        if self.cleaning is None:
            X_train, y_train = self.train()
            self.cleaning = plan_cleaning(
                X_train, y_train, self.specs, str(self.task), "auto", indicators=False
            )
        return self.cleaning

    def feature_plan(self, seed: int) -> FeaturePlan:
        """How columns become features without engineering (decided on training rows; cached)."""
        if self.features is None:
            X_train, y_train = self.train()
            self.features = plan_features(
                X_train, y_train, self.specs, str(self.task), engineered=False, seed=seed
            )
        return self.features


@dataclass
class ModelState:
    """The model a pipeline has fitted, and the metric it is judged by."""

    pipeline: Any = None  # the whole scikit-learn Pipeline: what gets logged
    family: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    main_metric: str | None = None
    uri: str | None = None
    logged: bool = False

    @property
    def fitted(self) -> bool:
        return self.pipeline is not None
