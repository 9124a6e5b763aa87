"""Hyperparameter search: kept as the import path generated code and queries know.

The implementation lives in ``mlpilot.platform.ml.hpo``.
"""

from __future__ import annotations

from mlpilot.platform.ml.hpo import (
    AUTO_FAMILIES,
    EarlyStopping,
    TrialLogger,
    open_storage,
    optimize,
    suggest_params,
)
from mlpilot.platform.ml.hpo.early_stopping import EARLY_STOP_MIN_DELTA, EARLY_STOP_PATIENCE
from mlpilot.platform.ml.hpo.objective import CV_FOLDS

__all__ = [
    "AUTO_FAMILIES",
    "CV_FOLDS",
    "EARLY_STOP_MIN_DELTA",
    "EARLY_STOP_PATIENCE",
    "EarlyStopping",
    "TrialLogger",
    "open_storage",
    "optimize",
    "suggest_params",
]
