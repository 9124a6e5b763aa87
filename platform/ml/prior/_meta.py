"""Meta-features: what a data set is like, cheaply, from its training split.

One function, ``meta_features``, used by the offline builder of the prior
(``benchmarks/build_prior.py``) and by a search as it starts, so that both describe a data
set the same way. The landmarkers (FLAML's zero-shot AutoML and auto-sklearn use the same
idea) are the cross-validated scores of two cheap models on a sample: a depth-1 tree and a
linear model, each as its gain over the constant prediction.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: the order of the vector ``vector`` builds (the prior stores it once)
NAMES = (
    "log_rows",
    "log_cols",
    "categorical_share",
    "missing_share",
    "log_classes",
    "balance",
    "target_skew",
    "stump_gain",
    "linear_gain",
)
#: rows the landmarkers are fitted on (a sample: they must stay cheap on any size)
LANDMARK_ROWS = 1000
LANDMARK_FOLDS = 3


def meta_features(X: Any, y: Any, task: str, seed: int = 0) -> dict[str, float]:
    """The meta-features of a training split ``X`` (a pandas frame) and ``y``."""
    import pandas as pd

    frame = pd.DataFrame(X).reset_index(drop=True)
    target = pd.Series(np.asarray(y)).reset_index(drop=True)
    labelled = target.notna().to_numpy()
    if not labelled.all():  # rows without a target are not training rows
        frame, target = frame.loc[labelled], target.loc[labelled].reset_index(drop=True)
        frame = frame.reset_index(drop=True)
    rows, cols = frame.shape
    categorical = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    out = {
        "log_rows": math.log10(max(rows, 1)),
        "log_cols": math.log10(max(cols, 1)),
        "categorical_share": len(categorical) / max(cols, 1),
        "missing_share": float(frame.isna().to_numpy().mean()) if rows and cols else 0.0,
        **_target_shape(target, task),
    }
    out.update(_landmarks(frame, target, task, categorical, seed))
    return {name: float(out[name]) for name in NAMES}


def vector(features: dict[str, float]) -> np.ndarray:
    """The meta-features in ``NAMES`` order (missing ones as 0)."""
    return np.array([float(features.get(name, 0.0)) for name in NAMES], dtype=float)


def _target_shape(target: Any, task: str) -> dict[str, float]:
    """How many classes and how balanced (classification), or how skewed (regression)."""
    if task == "classification":
        shares = target.value_counts(normalize=True).to_numpy()
        k = len(shares)
        entropy = float(-(shares * np.log(shares)).sum())
        return {
            "log_classes": math.log2(max(k, 2)),
            # 1 when every class is as common, towards 0 as one dominates
            "balance": entropy / math.log(k) if k > 1 else 0.0,
            "target_skew": 0.0,
        }
    values = np.asarray(target, dtype=float)
    values = values[np.isfinite(values)]
    skew = 0.0
    if len(values) > 2 and values.std() > 0:
        skew = float(((values - values.mean()) ** 3).mean() / values.std() ** 3)
    return {"log_classes": 0.0, "balance": 0.0, "target_skew": float(np.clip(skew, -10, 10))}


def _landmarks(
    frame: Any, target: Any, task: str, categorical: list[str], seed: int
) -> dict[str, float]:
    """The two landmarkers' gains over the constant model (0 where they cannot be fitted)."""
    from sklearn.model_selection import cross_val_score

    X, y = _numeric_sample(frame, target, task, categorical, seed)
    if X is None:
        return {"stump_gain": 0.0, "linear_gain": 0.0}
    cv = _folds(y, task, seed)
    out = {}
    for name, model in _landmark_models(task, seed).items():
        try:
            scores = cross_val_score(
                model, X, y, cv=cv, scoring=_scoring(task), error_score="raise"
            )
            out[name] = float(np.clip(np.mean(scores) - _baseline(y, task), -1.0, 1.0))
        except ValueError as exc:  # a fold too small for a class, a constant column
            logger.debug("landmarker %s not fitted: %s", name, exc)
            out[name] = 0.0
    return out


def _numeric_sample(
    frame: Any, target: Any, task: str, categorical: list[str], seed: int
) -> tuple[Any, Any]:
    """A sample of at most ``LANDMARK_ROWS`` rows, categories as codes, gaps filled."""
    if len(frame) > LANDMARK_ROWS:
        rows = np.random.default_rng(seed).choice(len(frame), LANDMARK_ROWS, replace=False)
        frame, target = frame.iloc[rows].reset_index(drop=True), target.iloc[rows]
    if len(frame) < 3 * LANDMARK_FOLDS or frame.shape[1] == 0:
        return None, None
    numeric = frame.copy()
    for column in categorical:
        numeric[column] = numeric[column].astype("category").cat.codes.astype(float)
    X = np.array(numeric.astype(float).to_numpy(), dtype=float)  # a copy it may write
    X[~np.isfinite(X)] = np.nan
    medians = np.nan_to_num(np.nanmedian(X, axis=0)) if np.isnan(X).any() else None
    if medians is not None:
        X = np.where(np.isnan(X), medians, X)
    y = target.astype(str).to_numpy() if task == "classification" else target.to_numpy(float)
    if task == "classification" and min(np.unique(y, return_counts=True)[1]) < LANDMARK_FOLDS:
        return None, None
    return X, y


def _landmark_models(task: str, seed: int) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    if task == "classification":
        linear = LogisticRegression(max_iter=200)
        stump: Any = DecisionTreeClassifier(max_depth=1, random_state=seed)
    else:
        linear, stump = Ridge(), DecisionTreeRegressor(max_depth=1, random_state=seed)
    return {"stump_gain": stump, "linear_gain": make_pipeline(StandardScaler(), linear)}


def _folds(y: Any, task: str, seed: int) -> Any:
    from sklearn.model_selection import KFold, StratifiedKFold

    kind = StratifiedKFold if task == "classification" else KFold
    return kind(LANDMARK_FOLDS, shuffle=True, random_state=seed)


def _scoring(task: str) -> str:
    # accuracy and R²: comparable across data sets, unlike a loss in the target's units
    return "accuracy" if task == "classification" else "r2"


def _baseline(y: Any, task: str) -> float:
    """The constant model's score: the majority share (accuracy), 0 (R²)."""
    if task != "classification":
        return 0.0
    return float(np.unique(y, return_counts=True)[1].max() / len(y))
