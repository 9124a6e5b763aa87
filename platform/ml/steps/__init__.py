"""The pipeline steps: one function per pipeline tool, called by generated scripts.

Each takes the ``PipelineRun`` first and the tool's arguments as keywords, exactly as the
tool declares them (``mlpilot.platform.tools.builtin``). The steps live in small modules
by concern; this package is the import path generated scripts use.
"""

from __future__ import annotations

from mlpilot.platform.ml.steps._data import TEST_SIZE, clean_data, load_data
from mlpilot.platform.ml.steps._evaluate import evaluate_model, feature_importance
from mlpilot.platform.ml.steps._model import (
    engineer_features,
    optimize_model,
    score_on_test,
    set_model,
    train_model,
)
from mlpilot.platform.ml.steps._outputs import log_model, predict, register_model

__all__ = [
    "TEST_SIZE",
    "clean_data",
    "engineer_features",
    "evaluate_model",
    "feature_importance",
    "load_data",
    "log_model",
    "optimize_model",
    "predict",
    "register_model",
    "score_on_test",
    "set_model",
    "train_model",
]
