"""Loading and cleaning: the steps that decide which rows and columns a model sees."""

from __future__ import annotations

import difflib
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.errors import DataError
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.dtypes import (
    EXCLUDED_KINDS,
    TYPED_ATTR,
    ColumnSpec,
    coerce_column,
    detect_column,
    detect_schema,
    float32_safe,
    parse_numbers,
    repeated_rows,
    target_is_identifier,
)
from mlpilot.platform.ml.features import plan_cleaning
from mlpilot.platform.ml.io import (
    duplicate_header_names,
    fingerprint,
    read_table,
    readable_path,
    release_memory,
)
from mlpilot.platform.ml.state import IMBALANCE_SHARE
from mlpilot.tracking.vocab import TAG_POSITIVE_CLASS

logger = logging.getLogger(__name__)

#: MLflow column types of the kinds a pipeline uses, for the data set it records
_MLFLOW_TYPES = {
    "numeric": "double",
    "integer": "double",
    "boolean": "double",
    "datetime": "datetime",
    "categorical": "string",
}
TEST_SIZE = 0.2
#: classes with fewer rows cannot be split between training and test rows
MIN_CLASS_ROWS = 2
#: data with fewer rows trains on one thread (see limit_threads)
SMALL_DATA_ROWS = 20_000


# -- load -------------------------------------------------------------------------------------
def load_data(run: PipelineRun, path: str, target: str | None = None, task: str = "auto") -> None:
    with run.stage("load"):
        path = str(Path(run.data_path or path).expanduser())
        frame = _read(run, path)
        # whole rows as the file has them: two passengers of one class and sex with no age
        # differ by name, whether or not the name becomes a feature
        repeated = pd.Series(repeated_rows(frame), index=frame.index)
        y_raw, X = _split_target(run, frame, path, target)
        del frame
        run.data.task, y, label_notes = _resolve_task(y_raw, str(target), task)
        for message in label_notes:
            run.note(message)
        if len(y) < len(X):  # rows of classes too rare to learn were dropped
            X = X.loc[y.index]
        run.data.target = target
        X, used = _select_features(run, X, repeated.reindex(X.index).to_numpy())
        run.data.X, run.data.y, run.data.specs = X, y, used
        run.data.repeated = repeated
        limit_threads(run, len(X))
        if run.data.task == "classification":
            _record_classes(run, y)
        _apply_adapter(run)
        _split(run)
        release_memory()  # what reading and typing freed: the model trains on top of it
        _record_data(run, path, used)
        run.event(
            "progress",
            stage="load",
            message=f"{len(run.data.X)} rows, {len(used)} feature columns, task {run.data.task}",
        )


def limit_threads(run: PipelineRun, rows: int) -> None:
    """Train single-threaded on small data, unless ``OMP_NUM_THREADS`` says otherwise.

    Below ``SMALL_DATA_ROWS`` rows a second thread saves a fraction of a second, while two
    OpenMP programs sharing the cores (another run, a worker) spin-wait on each other: on
    2 cores, HistGradientBoosting on 300 rows took 0.4 s on one thread, 1.3 s on two, and
    10–30 s on two beside another run.
    """
    import os

    from threadpoolctl import threadpool_limits

    from mlpilot.platform.config import get_settings

    chosen = get_settings().threads
    if chosen is not None and chosen > 0:
        run.n_jobs = chosen
    elif rows < SMALL_DATA_ROWS:
        run.n_jobs = 1
    else:
        return
    # threadpoolctl reaches the OpenMP and BLAS runtimes loaded so far; the variable, those
    # loaded later (scikit-learn's own libgomp loads with its first estimator)
    os.environ["OMP_NUM_THREADS"] = str(run.n_jobs)
    threadpool_limits(run.n_jobs)
    run.result.threads = run.n_jobs


def _read(run: PipelineRun, path: str) -> pd.DataFrame:
    frame = read_table(readable_path(path))
    chunked = frame.attrs.get("mlpilot_read")
    if chunked:
        run.note(
            f"file larger than the memory budget: read in {chunked['chunks']} chunks, "
            f"{chunked['saved_mb']} MiB saved by float32 columns"
        )
    return frame


def _split_target(
    run: PipelineRun, frame: pd.DataFrame, path: str, target: str | None
) -> tuple[pd.Series, pd.DataFrame]:
    """The target column (rows where it is missing dropped, with a note) and the rest."""
    duplicates = duplicate_header_names(readable_path(path))
    if duplicates:
        run.note(
            f"duplicate column names {duplicates}: later copies were renamed NAME.1, NAME.2, …"
        )
    if target is None:
        raise DataError(
            "no target column was named",
            hint=f"say which column to predict; columns: {_columns(frame)}",
        )
    if target not in frame.columns:
        close = difflib.get_close_matches(target, [str(c) for c in frame.columns], n=3)
        guess = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        raise DataError(
            f"target column {target!r} not found in {Path(path).name}",
            hint=f"{guess}columns: {_columns(frame)}",
        )
    if target in duplicates:
        raise DataError(
            f"target column {target!r} appears more than once in the header",
            hint="rename the duplicate columns",
        )
    missing = int(frame[target].isna().sum())
    if missing == len(frame):
        raise DataError(
            f"target column {target!r} has no values (all {len(frame)} rows are missing)"
        )
    if missing:
        frame = frame[frame[target].notna()]
        share = missing / (missing + len(frame))
        run.note(f"dropped {missing} rows with a missing target ({share:.1%})")
    return frame[target], frame.drop(columns=[target])


def _select_features(
    run: PipelineRun, X: pd.DataFrame, repeated: np.ndarray
) -> tuple[pd.DataFrame, list[ColumnSpec]]:
    """The usable columns, typed (float32 where exact), with a note for each one left out."""
    specs = detect_schema(X, repeated)
    used = [s for s in specs if s.kind not in EXCLUDED_KINDS]
    for spec in specs:
        if spec.kind in EXCLUDED_KINDS:
            run.note(f"column {spec.name!r} not used: {spec.note}")
        elif spec.note:
            run.note(f"column {spec.name!r}: {spec.note}")
    if not used:
        raise DataError(
            "no usable feature columns besides the target",
            hint="the other columns are identifiers, constants or empty",
        )
    X = X[[s.name for s in used]]
    run.data.raw_example = X.head(5).copy()
    saved = 0
    for spec in used:
        column = coerce_column(X[spec.name], spec)
        if spec.kind in ("numeric", "integer", "boolean") and float32_safe(column):
            saved += column.memory_usage(deep=False) // 2
            column = column.astype("float32")
        X[spec.name] = column
    if saved >= 2**20 / 10:
        run.note(f"float64 → float32 where exact: {saved / 2**20:.1f} MiB saved")
    X.attrs[TYPED_ATTR] = True  # the model's first step passes these columns through
    return X, used


def _record_classes(run: PipelineRun, y: pd.Series) -> None:
    """The classes in scikit-learn's order, and the positive one of a binary task."""
    counts = y.value_counts()
    run.data.classes = np.unique(y.to_numpy())
    if len(run.data.classes) == 2:
        run.data.positive_class = M.positive_label(run.data.classes, counts.to_dict())
        run.logger.set_tags({TAG_POSITIVE_CLASS: str(run.data.positive_class)})
    run.result.labels = {
        "classes": [str(c) for c in run.data.classes[:50]],
        "positive": None if run.data.positive_class is None else str(run.data.positive_class),
    }
    smallest = counts.min() / len(y)
    if smallest < IMBALANCE_SHARE:
        run.note(f"imbalanced classes (smallest {smallest:.1%}): class weights are balanced")


def _record_data(run: PipelineRun, path: str, used: list[ColumnSpec]) -> None:
    rows, target = len(run.data.X), str(run.data.target)
    run.logger.log_params(
        {
            "data.path": path,
            "data.rows": rows,
            "data.columns": len(used),
            "target": target,
            "task": run.data.task,
            "seed": run.seed,
            "engine": run.engine,
        }
    )
    try:
        run.logger.log_input(
            name=Path(path).name,
            source=path,
            digest=fingerprint(readable_path(path)).split(":", 1)[1],
            rows=rows,
            columns=[
                *((s.name, _MLFLOW_TYPES.get(s.kind, "string")) for s in used),
                (target, "double" if run.data.task == "regression" else "string"),
            ],
            targets=target,
        )
    except Exception as exc:  # the dataset record is a nicety, never a reason to fail
        logger.debug("the dataset record is a nicety, never a reason to fail: %s", exc)
        run.note(f"dataset not recorded with log_input: {type(exc).__name__}")
    run.result.data = {
        "path": path,
        "rows": rows,
        "cols": len(used),
        "schema": [s.to_dict() for s in used],
    }


def _apply_adapter(run: PipelineRun) -> None:
    """Domain rules from the plan's adapter: drop leaking columns, choose the metric."""
    name = run.plan.get("adapter")
    if not name:
        return
    from mlpilot.adapters import get_adapter

    classes = run.data.classes
    advice = get_adapter(name).advise(
        list(run.data.X.columns),
        run.data.target or "",
        run.data.task or "",
        n_classes=len(classes) if classes is not None else None,
    )
    if advice.drop:
        run.data.drop_columns(list(advice.drop))
        run.data.raw_example = run.data.raw_example.drop(columns=list(advice.drop))
        for column, why in advice.drop.items():
            run.note(f"column {column!r} dropped: {why}")
    binary = classes is not None and len(classes) == 2
    if advice.metric and (advice.metric != "pr_auc" or binary):
        run.model.main_metric = advice.metric
    run.notes.extend(advice.notes)
    run.result.adapter = {"name": name, "dropped": advice.drop, "metric": run.model.main_metric}


def _columns(frame: pd.DataFrame, limit: int = 15) -> str:
    names = [repr(str(c)) for c in frame.columns]
    return ", ".join(names[:limit]) + (
        f" (and {len(names) - limit} more)" if len(names) > limit else ""
    )


def _resolve_task(y_raw: pd.Series, target: str, task: str) -> tuple[str, pd.Series, list[str]]:
    """The task, the labels or values to learn, and notes on how they were read."""
    spec = detect_column(target, y_raw)
    _check_target_usable(y_raw, target, spec)
    if spec.kind == "identifier" and pd.api.types.is_integer_dtype(y_raw.dtype):
        spec.kind = "integer"  # distinct integers without an id-like name: an outcome
    unique = int(y_raw.nunique())
    numeric = spec.kind in ("numeric", "integer", "boolean")
    if task == "auto":
        task = (
            "regression"
            if spec.kind == "numeric" or (spec.kind == "integer" and unique > 20)
            else "classification"
        )
    if task == "regression":
        if not numeric:
            examples = ", ".join(repr(str(v)) for v in y_raw.dropna().unique()[:3])
            raise DataError(
                f"target {target!r} holds text values ({examples}) and cannot be regressed",
                hint="use task classification, or choose a numeric target",
            )
        return task, parse_numbers(y_raw).astype("float64"), []
    if spec.kind == "numeric" and unique > 50:
        raise DataError(
            f"target {target!r} is continuous ({unique} distinct values) and cannot be classified",
            hint="use task regression",
        )
    labels, notes = class_labels(y_raw)
    counts = labels.value_counts()
    rare = counts[counts < MIN_CLASS_ROWS]
    if len(counts) - len(rare) < 2:
        raise DataError(
            f"target {target!r} has a single class ({str(counts.index[0])[:30]!r}) with "
            f"{MIN_CLASS_ROWS} or more rows: nothing to predict",
            hint="choose a column with at least two classes of two or more rows each",
        )
    if len(rare):
        # a class seen once can be neither learnt nor tested: its rows go, as AutoGluon does
        labels = labels[~labels.isin(rare.index)]
        named = ", ".join(repr(str(c)) for c in rare.index[:5])
        notes.append(
            f"dropped {int(rare.sum())} rows of classes with fewer than {MIN_CLASS_ROWS} rows "
            f"({named}): a class needs rows to learn from and to test on"
        )
    return task, labels, notes


def _check_target_usable(y_raw: pd.Series, target: str, spec: ColumnSpec) -> None:
    """A named target is used as given, or the run fails saying why (never replaced)."""
    if int(y_raw.nunique()) < 2:
        raise DataError(
            f"target {target!r} has a single value ({str(y_raw.iloc[0])[:30]!r}): "
            "there is nothing to predict",
            hint="choose a column with at least two different values",
        )
    if target_is_identifier(target, y_raw, spec):
        raise DataError(
            f"target {target!r} is an identifier (a different value in every row): "
            "there is nothing to learn",
            hint="choose the column that holds the outcome to predict",
        )


def class_labels(y_raw: pd.Series) -> tuple[pd.Series, list[str]]:
    """Class labels in one clean type: booleans, integers, or stripped text.

    Float-coded integers (0.0/1.0) become integers; text labels that differ only by case
    or surrounding spaces are merged into their most frequent spelling. Integer and
    boolean labels keep their numpy dtype, so scikit-learn sees a binary or multiclass
    target, never an object array of numbers.
    """
    notes: list[str] = []
    if pd.api.types.is_bool_dtype(y_raw):
        return y_raw.astype(bool), notes
    if pd.api.types.is_numeric_dtype(y_raw):
        values = y_raw.astype("float64")
        if np.allclose(values, np.round(values)):
            return values.round().astype("int64"), notes
        # classes such as 0.5 / 1.5: scikit-learn calls float labels "continuous"
        return values.map(lambda v: f"{v:g}").astype(object), notes
    text = y_raw.astype("string").str.strip()
    spellings = text.value_counts()
    canonical: dict[str, str] = {}
    for spelling in spellings.index:  # most frequent first: it names the class
        canonical.setdefault(spelling.lower(), spelling)
    merged = text.map(lambda v: canonical[v.lower()])
    raw_spellings = y_raw.astype("string").nunique()
    if raw_spellings > len(canonical):
        notes.append(
            f"{raw_spellings} label spellings merged into {len(canonical)} classes "
            "(they differed only by case or surrounding spaces)"
        )
    return pd.Series(merged.to_numpy(dtype=object), index=y_raw.index, dtype=object), notes


def _split(run: PipelineRun) -> None:
    from sklearn.model_selection import train_test_split

    index = run.data.X.index.to_numpy()
    stratify = run.data.y.to_numpy() if run.data.task == "classification" else None
    if len(index) < 10:
        raise DataError(
            f"only {len(index)} usable rows: too few to train and test a model",
            hint="use at least 10 rows",
        )
    train, test = train_test_split(
        index, test_size=TEST_SIZE, random_state=run.seed, stratify=stratify
    )
    run.data.split(pd.Index(train), pd.Index(test))


# -- clean --------------------------------------------------------------------------------------
def clean_data(run: PipelineRun, strategy: str = "auto", drop_duplicates: bool = True) -> None:
    data = run.data
    data.require("clean_data")
    with run.stage("clean"):
        before = len(data.X)
        report: dict[str, Any] = {"rows_before": before, "strategy": strategy}
        if drop_duplicates:
            dup = data.repeated_in_file()
            report["duplicates_removed"] = int(dup.sum())
            if dup.any():
                data.keep_rows(~dup)
                run.note(f"removed {int(dup.sum())} duplicate rows")
        if strategy == "drop":
            complete = data.X.notna().all(axis=1).to_numpy()
            report["incomplete_rows_removed"] = int((~complete).sum())
            if not complete.any():
                raise DataError(
                    "every row has a missing value: strategy 'drop' would remove them all",
                    hint="use strategy auto, mean or median",
                )
            data.keep_rows(complete)
        X_train, y_train = data.train()
        data.cleaning = plan_cleaning(X_train, y_train, data.specs, str(data.task), strategy)
        for name, reason in data.cleaning.dropped.items():
            run.note(f"column {name!r} dropped: {reason}")
        if data.cleaning.dropped:
            data.drop_columns(list(data.cleaning.dropped))
        report.update(rows_after=len(data.X), **data.cleaning.to_dict())
        run.logger.log_dict(report, "reports/cleaning.json")
        run.logger.log_params(
            {"clean.strategy": strategy, "clean.drop_duplicates": drop_duplicates}
        )
        run.log_metrics({"clean_rows_removed": before - len(data.X)})
        run.result.cleaning = {
            "rows_removed": before - len(data.X),
            "columns_dropped": list(data.cleaning.dropped),
        }
