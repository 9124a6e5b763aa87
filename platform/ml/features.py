"""Cleaning and feature decisions, and the preprocessing part of the logged Pipeline.

Decisions are made on training rows only and recorded in reports; the transformers that
apply them are fit inside the model Pipeline, so nothing learned from test rows or from
the target outside a training fold reaches the model.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.ml.dtypes import ColumnSpec

logger = logging.getLogger(__name__)

LOW_CARDINALITY = 15
#: categorical columns with at most this many values can go to the learners that split on
#: categories themselves (``modeling.NATIVE_CATEGORICAL``); HistGradientBoosting takes at
#: most 255, and more than this overfits on the few rows per category anyway
NATIVE_MAX_CATEGORIES = 128
NEAR_EMPTY = 0.95
SKEW_LIMIT = 1.0
INDICATOR_MIN_MISSING = 0.01


@dataclass
class CleaningPlan:
    impute: dict[str, str] = field(
        default_factory=dict
    )  # column → mean/median/most_frequent/missing_category
    indicators: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # column → reason
    decisions: list[dict[str, Any]] = field(default_factory=list)
    strategy: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FeaturePlan:
    engineered: bool = False
    datetime: bool = True
    target_encoding: bool = True
    one_hot: list[str] = field(default_factory=list)
    target_encoded: list[str] = field(default_factory=list)
    ordinal: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    #: categorical columns a native-categorical learner may take as categories (a search
    #: chooses between that and the encodings above by validation score)
    native: list[str] = field(default_factory=list)
    interactions: list[tuple[str, str]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["interactions"] = [list(p) for p in self.interactions]
        return data


def plan_cleaning(
    X: pd.DataFrame,
    y: pd.Series,
    specs: list[ColumnSpec],
    task: str,
    strategy: str = "auto",
    *,
    indicators: bool = True,
) -> CleaningPlan:
    """Decide per column how to fill missing values (from training rows)."""
    plan = CleaningPlan(strategy=strategy)
    for spec in specs:
        if spec.name not in X.columns:
            continue
        col = X[spec.name]
        missing = float(col.isna().mean())
        if missing > NEAR_EMPTY:
            plan.dropped[spec.name] = f"{missing:.0%} missing"
            plan.decisions.append(
                {
                    "column": spec.name,
                    "action": "drop",
                    "reason": f"{missing:.0%} of values missing",
                }
            )
            continue
        if spec.kind == "categorical":
            how = "most_frequent" if strategy == "mode" or missing < 0.05 else "missing_category"
            reason = (
                "mode (few missing)" if how == "most_frequent" else "explicit 'missing' category"
            )
        elif spec.kind == "datetime":
            how, reason = "median", "median date"
        elif spec.kind == "boolean":
            how, reason = "most_frequent", "mode of a yes/no column"
        elif strategy in ("mean", "median"):
            how, reason = strategy, f"{strategy} (requested)"
        elif strategy == "mode":
            how, reason = "most_frequent", "mode (requested)"
        else:
            skew = float(col.astype("float64").skew()) if col.notna().sum() > 2 else 0.0
            skew = 0.0 if np.isnan(skew) else skew
            how = "median" if abs(skew) > SKEW_LIMIT else "mean"
            reason = f"{'skewed' if how == 'median' else 'roughly symmetric'} (skew {skew:.2f})"
        plan.impute[spec.name] = how
        if missing > 0:
            decision = {
                "column": spec.name,
                "action": f"fill with {how.replace('_', ' ')}",
                "reason": reason,
                "missing": round(missing, 4),
            }
            if (
                indicators
                and missing >= INDICATOR_MIN_MISSING
                and _missingness_informative(col, y, task)
            ):
                plan.indicators.append(spec.name)
                decision["indicator"] = True
            plan.decisions.append(decision)
    return plan


def _missingness_informative(col: pd.Series, y: pd.Series, task: str) -> bool:
    """Does the target differ where this column is missing? (training rows only)"""
    missing = col.isna().to_numpy()
    if missing.sum() < 10 or (~missing).sum() < 10:
        return False
    if task == "regression":
        values = y.to_numpy(dtype="float64")
        spread = float(np.nanstd(values)) or 1.0
        return abs(float(np.nanmean(values[missing]) - np.nanmean(values[~missing]))) / spread > 0.1
    shares_missing = pd.Series(y[missing]).value_counts(normalize=True)
    shares_present = pd.Series(y[~missing]).value_counts(normalize=True)
    diff = shares_missing.sub(shares_present, fill_value=0).abs().max()
    return bool(diff > 0.05)


def _date_action(values: pd.Series, plan: FeaturePlan) -> str:
    """What a date column becomes, as ``DatetimeFeatures`` will make it (the hour if any)."""
    if not plan.datetime:
        return "days since 1970"
    from mlpilot.platform.ml.transformers import has_time_of_day

    hour = ", hour" if has_time_of_day(values) else ""
    return f"year, month, day, day of week, quarter, weekend{hour}"


def plan_features(
    X: pd.DataFrame,
    y: pd.Series,
    specs: list[ColumnSpec],
    task: str,
    *,
    engineered: bool,
    datetime: bool = True,
    target_encoding: bool = True,
    interactions: bool = False,
    max_interactions: int = 10,
    dropped: set[str] | None = None,
    seed: int = 42,
) -> FeaturePlan:
    """Decide how each column becomes model features."""
    dropped = dropped or set()
    plan = FeaturePlan(
        engineered=engineered,
        datetime=datetime and engineered,
        target_encoding=target_encoding and engineered,
    )
    for spec in specs:
        if spec.name in dropped or spec.name not in X.columns:
            continue
        if spec.kind == "datetime":
            plan.dates.append(spec.name)
            plan.decisions.append({"column": spec.name, "action": _date_action(X[spec.name], plan)})
        elif spec.kind == "categorical":
            unique = int(X[spec.name].nunique())
            if unique <= NATIVE_MAX_CATEGORIES:
                plan.native.append(spec.name)
            if unique <= LOW_CARDINALITY:
                plan.one_hot.append(spec.name)
                plan.decisions.append(
                    {"column": spec.name, "action": "one-hot", "categories": unique}
                )
            elif plan.target_encoding:
                plan.target_encoded.append(spec.name)
                plan.decisions.append(
                    {
                        "column": spec.name,
                        "action": "target encoding (cross-fitted)",
                        "categories": unique,
                    }
                )
            else:
                plan.ordinal.append(spec.name)
                plan.decisions.append(
                    {"column": spec.name, "action": "ordinal codes", "categories": unique}
                )
    if interactions and engineered:
        plan.interactions = choose_interactions(X, y, specs, task, max_interactions, dropped, seed)
        for a, b in plan.interactions:
            plan.decisions.append(
                {"column": f"{a}*{b}", "action": "interaction kept (adds signal on training data)"}
            )
    return plan


def numeric_columns(specs: list[ColumnSpec], dropped: set[str]) -> list[str]:
    return [
        s.name
        for s in specs
        if s.kind in ("numeric", "integer", "boolean") and s.name not in dropped
    ]


def choose_interactions(
    X: pd.DataFrame,
    y: pd.Series,
    specs: list[ColumnSpec],
    task: str,
    limit: int,
    dropped: set[str],
    seed: int,
) -> list[tuple[str, str]]:
    """Products of the strongest numeric columns that correlate with the target better than both parents."""
    numeric = numeric_columns(specs, dropped)
    if len(numeric) < 2:
        return []
    sample = X[numeric].sample(n=min(len(X), 20000), random_state=seed)
    target = _numeric_target(y.loc[sample.index], task)
    filled = sample.astype("float64").fillna(sample.astype("float64").median())
    strength = {c: _abs_corr(filled[c].to_numpy(), target) for c in numeric}
    top = sorted(numeric, key=lambda c: -strength[c])[:6]
    kept = []
    for i, a in enumerate(top):
        for b in top[i + 1 :]:
            gain = _abs_corr((filled[a] * filled[b]).to_numpy(), target) - max(
                strength[a], strength[b]
            )
            if gain > 0.01:
                kept.append((gain, (a, b)))
    return [pair for _, pair in sorted(kept, reverse=True)[:limit]]


def _numeric_target(y: pd.Series, task: str) -> np.ndarray:
    if task == "regression":
        return y.to_numpy(dtype="float64")
    codes, _ = pd.factorize(y)
    if codes.max() > 1:  # multiclass: correlate with the most frequent class
        return (codes == np.bincount(codes).argmax()).astype(float)
    return codes.astype(float)


def _abs_corr(a: np.ndarray, b: np.ndarray) -> float:
    if np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(abs(np.corrcoef(a, b)[0, 1]))


def build_preprocessor(
    specs: list[ColumnSpec],
    cleaning: CleaningPlan,
    features: FeaturePlan,
    *,
    scale: bool,
    task: str,
    seed: int = 42,
    native: bool = False,
) -> Any:
    """The ColumnTransformer between ``SchemaCoercer`` and the estimator.

    ``native``: the plan's ``native`` columns become category codes, first in the output
    (as many as the plan's ``native`` columns), for a learner that splits on categories itself.
    """
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import MissingIndicator, SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from mlpilot.platform.ml.transformers import DateOrdinal, DatetimeFeatures, InteractionFeatures

    dropped = set(cleaning.dropped)
    parts, categorical = _categorical_parts(
        cleaning, features, scale=scale, task=task, seed=seed, native=native
    )
    numeric = numeric_columns(specs, dropped)
    by_strategy: dict[str, list[str]] = {}
    for name in numeric:
        by_strategy.setdefault(cleaning.impute.get(name, "median"), []).append(name)
    for how, cols in sorted(by_strategy.items()):
        strategy = how if how in ("mean", "median", "most_frequent") else "median"
        steps: list[Any] = [SimpleImputer(strategy=strategy, keep_empty_features=True)]
        if scale:
            steps.append(StandardScaler())
        parts.append((f"num_{strategy}", make_pipeline(*steps), cols))
    indicator_cols = [c for c in cleaning.indicators if c not in dropped]
    if indicator_cols:
        parts.append(("missing", MissingIndicator(features="all"), indicator_cols))
    if features.dates:
        dates = DatetimeFeatures() if features.datetime else DateOrdinal()
        steps = [dates, SimpleImputer(strategy="median", keep_empty_features=True)]
        if scale:
            steps.append(StandardScaler())
        parts.append(("dates", make_pipeline(*steps), list(features.dates)))
    parts.extend(categorical)
    if features.interactions:
        steps = [InteractionFeatures(pairs=[tuple(p) for p in features.interactions])]
        if scale:
            steps.append(StandardScaler())
        cols = sorted({c for p in features.interactions for c in p})
        parts.append(("interactions", make_pipeline(*steps), cols))
    if not parts:
        from mlpilot.platform.errors import DataError

        raise DataError(
            "no usable feature columns are left",
            hint="the data needs at least one column besides the target that is not an identifier, constant or empty",
        )
    return ColumnTransformer(
        parts, remainder="drop", sparse_threshold=0.0, verbose_feature_names_out=True
    )


def _categorical_parts(
    cleaning: CleaningPlan,
    features: FeaturePlan,
    *,
    scale: bool,
    task: str,
    seed: int,
    native: bool,
) -> tuple[list[tuple[str, Any, list[str]]], list[tuple[str, Any, list[str]]]]:
    """The categorical columns' transformers: the native codes (when asked; they lead the
    output), and one-hot, target encoding and ordinal codes for the rest."""
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    def cat_imputer(cols: list[str]) -> Any:
        if any(cleaning.impute.get(c) == "missing_category" for c in cols):
            return SimpleImputer(
                strategy="constant", fill_value="__missing__", keep_empty_features=True
            )
        return SimpleImputer(strategy="most_frequent", keep_empty_features=True)

    natives = list(features.native) if native else []
    taken = set(natives)
    first: list[tuple[str, Any, list[str]]] = []
    if natives:
        # a value the training rows never had is missing to the learner, not a new code
        codes = OrdinalEncoder(
            handle_unknown="use_encoded_value", unknown_value=np.nan, encoded_missing_value=np.nan
        )
        first.append(("native", make_pipeline(cat_imputer(natives), codes), natives))
    parts: list[tuple[str, Any, list[str]]] = []
    one_hot = [c for c in features.one_hot if c not in taken]
    if one_hot:
        encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False, dtype=np.float32)
        parts.append(("onehot", make_pipeline(cat_imputer(one_hot), encoder), one_hot))
    target_encoded = [c for c in features.target_encoded if c not in taken]
    if target_encoded:
        steps = [cat_imputer(target_encoded), _target_encoder(task, seed)]
        if scale:
            steps.append(StandardScaler())
        parts.append(("target_enc", make_pipeline(*steps), target_encoded))
    ordinal = [c for c in features.ordinal if c not in taken]
    if ordinal:
        encoder = OrdinalEncoder(
            handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1
        )
        steps = [cat_imputer(ordinal), encoder]
        if scale:  # codes in the hundreds would swamp every other distance or weight
            steps.append(StandardScaler())
        parts.append(("ordinal", make_pipeline(*steps), ordinal))
    return first, parts


def _target_encoder(task: str, seed: int) -> Any:
    """Cross-fitted target encoding with seeded folds (sklearn ≥ 1.9 takes a splitter)."""
    import sklearn
    from sklearn.model_selection import KFold, StratifiedKFold
    from sklearn.preprocessing import TargetEncoder

    target_type = "continuous" if task == "regression" else "auto"
    major, minor = (int(p) for p in sklearn.__version__.split(".")[:2])
    if (major, minor) >= (1, 9):
        splitter = KFold if task == "regression" else StratifiedKFold
        return TargetEncoder(
            target_type=target_type, cv=splitter(5, shuffle=True, random_state=seed)
        )
    return TargetEncoder(target_type=target_type, shuffle=True, random_state=seed)


def source_columns(preprocessor: Any) -> dict[str, list[str]]:
    """Output feature name → the raw columns it came from (for importance in raw names)."""
    mapping: dict[str, list[str]] = {}
    for name, transformer, cols in preprocessor.transformers_:
        if name == "remainder" or transformer == "drop":
            continue
        cols = list(cols)
        try:
            outputs = list(transformer.get_feature_names_out(cols))
        except Exception as exc:  # a transformer without names: spread over its columns
            logger.debug("a transformer without names: spread over its columns: %s", exc)
            outputs = cols
        for out in outputs:
            out = str(out)
            full = f"{name}__{out}"
            if len(cols) == 1:
                mapping[full] = cols
            elif "*" in out and name == "interactions":
                mapping[full] = out.split("*")
            else:
                match = max(
                    (
                        c
                        for c in cols
                        if out == c or out.startswith(f"{c}_") or out.endswith(f"_{c}")
                    ),
                    key=len,
                    default=None,
                )
                mapping[full] = [match] if match else cols
    return mapping
