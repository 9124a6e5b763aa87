"""The built-in families, in the design's order (DESIGN §3's ``model`` enumeration, which
the tool schema lists in this order); families only searches try come last."""

from __future__ import annotations

from mlpilot.platform.ml.families._base import Family
from mlpilot.platform.ml.families.catboost import CatBoost
from mlpilot.platform.ml.families.et import ExtraTrees
from mlpilot.platform.ml.families.hgb import HistGradientBoosting
from mlpilot.platform.ml.families.knn import KNeighbours
from mlpilot.platform.ml.families.lgbm import LightGBM
from mlpilot.platform.ml.families.linear import Linear
from mlpilot.platform.ml.families.rf import RandomForest
from mlpilot.platform.ml.families.svm import SupportVector
from mlpilot.platform.ml.families.xgb import XGBoost

BUILTIN: tuple[type[Family], ...] = (
    RandomForest,
    XGBoost,
    LightGBM,
    HistGradientBoosting,
    SupportVector,
    Linear,
    KNeighbours,
    CatBoost,
    ExtraTrees,
)
