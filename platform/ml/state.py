"""What a pipeline knows between steps, in two typed parts: the data and the model.

``DataState`` holds one copy of the prepared frame and the decisions taken on it (kinds,
target, task, classes, the train/test split, the cleaning and feature plans); the frame
is ordered training rows first, so both parts are views of it, never copies. ``ModelState`` holds the
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
    #: rows [0, n_train) of X and y are the training part, the rest the test part
    n_train: int | None = None
    raw_example: pd.DataFrame | None = None  # a few raw rows: the logged model's input example
    #: by the file's row labels: rows equal in every column of the file to an earlier row
    repeated: pd.Series | None = None
    cleaning: CleaningPlan | None = None
    features: FeaturePlan | None = None

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
    def split(self, train_index: pd.Index, test_index: pd.Index) -> None:
        """Order the frame as training rows, then test rows (each in file order).

        Both parts are then slices of the one frame (views, not copies): a million-row
        split costs no second copy of the data, however often steps ask for it.
        """
        assert self.X is not None and self.y is not None
        order = np.concatenate([np.sort(train_index), np.sort(test_index)])
        self.X, self.y = self.X.loc[order], self.y.loc[order]
        self.n_train = len(train_index)

    @property
    def train_index(self) -> pd.Index:
        assert self.X is not None and self.n_train is not None
        return self.X.index[: self.n_train]

    @property
    def test_index(self) -> pd.Index:
        assert self.X is not None and self.n_train is not None
        return self.X.index[self.n_train :]

    def train(self) -> tuple[pd.DataFrame, pd.Series]:
        assert self.X is not None and self.y is not None and self.n_train is not None
        return self.X.iloc[: self.n_train], self.y.iloc[: self.n_train]

    def test(self) -> tuple[pd.DataFrame, pd.Series]:
        assert self.X is not None and self.y is not None and self.n_train is not None
        return self.X.iloc[self.n_train :], self.y.iloc[self.n_train :]

    def keep_rows(self, mask: np.ndarray) -> None:
        """Keep the rows where ``mask`` is true, in the frame and in both parts of the split."""
        assert self.X is not None and self.y is not None and self.n_train is not None
        self.X, self.y = self.X[mask], self.y[mask]
        self.n_train = int(np.asarray(mask)[: self.n_train].sum())
        kept, test = len(self.X), len(self.X) - self.n_train
        if self.n_train < 5 or test < 2:
            raise DataError(f"only {kept} rows are left after cleaning: too few to train and test")

    def repeated_in_file(self) -> np.ndarray:
        """Which rows of X repeat an earlier row of the file (every column, the target too)."""
        assert self.X is not None and self.repeated is not None
        return self.repeated.reindex(self.X.index, fill_value=False).to_numpy()

    def drop_columns(self, names: list[str]) -> None:
        assert self.X is not None
        self.X = self.X.drop(columns=names)
        self.specs = [s for s in self.specs if s.name not in names]

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
    #: seconds one prediction over the test rows took (set when the model is scored)
    predict_s: float | None = None
    #: seconds fitting it on the training rows took
    fit_s: float | None = None
    #: seconds kept before the deadline for refitting it on every row before it is logged
    #: (``steps._model.AllRowsRefit``): the steps in between leave them free
    refit_s: float = 0.0

    @property
    def fitted(self) -> bool:
        return self.pipeline is not None
