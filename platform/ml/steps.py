"""The pipeline steps: one function per pipeline tool, called by generated scripts.

Each takes the ``PipelineRun`` first and the tool's arguments as keywords, exactly as the
tool declares them (``mlpilot.platform.tools.builtin``).
"""

from __future__ import annotations

import difflib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlpilot.platform.errors import DataError, MlpilotError
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.dtypes import (
    EXCLUDED_KINDS,
    ColumnSpec,
    coerce_column,
    detect_column,
    float32_safe,
    parse_numbers,
)
from mlpilot.platform.ml.features import (
    CleaningPlan,
    FeaturePlan,
    build_preprocessor,
    plan_cleaning,
    plan_features,
    source_columns,
)
from mlpilot.platform.ml.io import duplicate_header_names, read_table
from mlpilot.platform.ml.models import (
    LABELS,
    SCALE_SENSITIVE,
    TREE_FAMILIES,
    make_estimator,
    resolve_family,
)

TEST_SIZE = 0.2
IMBALANCE_SHARE = 0.2
PERMUTATION_ROWS = 5000


# -- load -------------------------------------------------------------------------------------
def load_data(run: PipelineRun, path: str, target: str | None = None, task: str = "auto") -> None:
    with run.stage("load"):
        path = str(Path(run.data_path or path).expanduser())
        frame = read_table(path)
        chunked = frame.attrs.get("mlpilot_read")
        if chunked:
            run.note(
                f"file larger than the memory budget: read in {chunked['chunks']} chunks, "
                f"{chunked['saved_mb']} MiB saved by float32 columns"
            )
        duplicates = duplicate_header_names(Path(path))
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
            run.note(
                f"dropped {missing} rows with a missing target ({missing / (missing + len(frame)):.1%})"
            )
        y_raw = frame[target]
        X = frame.drop(columns=[target])
        del frame
        run.task, y = _resolve_task(y_raw, target, task)
        run.target = target
        specs = [detect_column(str(c), X[c]) for c in X.columns]
        used = [s for s in specs if s.kind not in EXCLUDED_KINDS]
        for spec in specs:
            if spec.kind in EXCLUDED_KINDS:
                run.note(f"column {spec.name!r} not used: {spec.note}")
        if not used:
            raise DataError(
                "no usable feature columns besides the target",
                hint="the other columns are identifiers, constants or empty",
            )
        X = X[[s.name for s in used]]
        run.raw_example = X.head(5).copy()
        saved = 0
        for spec in used:
            column = coerce_column(X[spec.name], spec)
            if spec.kind in ("numeric", "integer", "boolean") and float32_safe(column):
                saved += column.memory_usage(deep=False) // 2
                column = column.astype("float32")
            X[spec.name] = column
        if saved >= 2**20 / 10:
            run.note(f"float64 → float32 where exact: {saved / 2**20:.1f} MiB saved")
        run.X, run.y, run.specs = X, y, used
        if run.task == "classification":
            run.classes = np.array(sorted(pd.unique(y), key=str), dtype=object)
            counts = y.value_counts()
            if counts.min() / len(y) < IMBALANCE_SHARE:
                run.note(
                    f"imbalanced classes (smallest {counts.min() / len(y):.1%}): class weights are balanced"
                )
        _apply_adapter(run)
        _split(run)
        run.logger.log_params(
            {
                "data.path": path,
                "data.rows": len(X),
                "data.columns": len(used),
                "target": target,
                "task": run.task,
                "seed": run.seed,
                "engine": run.engine,
            }
        )
        try:
            head = X.index[:100_000]  # a bounded sample: never a second copy of a large frame
            run.logger.log_input(
                X.loc[head].assign(**{target: y.loc[head].to_numpy()}),
                source=path,
                name=Path(path).name,
                targets=target,
            )
        except Exception as exc:  # the dataset record is a nicety, never a reason to fail
            run.note(f"dataset not recorded with log_input: {type(exc).__name__}")
        run.result["data"] = {
            "path": path,
            "rows": len(X),
            "cols": len(used),
            "schema": [s.to_dict() for s in used],
        }
        run.event(
            "progress",
            stage="load",
            message=f"{len(X)} rows, {len(used)} feature columns, task {run.task}",
        )


def _apply_adapter(run: PipelineRun) -> None:
    """Domain rules from the plan's adapter: drop leaking columns, choose the metric."""
    name = run.plan.get("adapter")
    if not name:
        return
    from mlpilot.adapters import get_adapter

    advice = get_adapter(name).advise(list(run.X.columns), run.target or "", run.task or "")
    if advice.drop:
        run.X = run.X.drop(columns=list(advice.drop))
        run.specs = [s for s in run.specs if s.name not in advice.drop]
        run.raw_example = run.raw_example.drop(columns=list(advice.drop))
        for column, why in advice.drop.items():
            run.note(f"column {column!r} dropped: {why}")
    binary = run.classes is not None and len(run.classes) == 2
    if advice.metric and (advice.metric != "pr_auc" or binary):
        run.main_metric = advice.metric
    run.notes.extend(advice.notes)
    run.result["adapter"] = {"name": name, "dropped": advice.drop, "metric": run.main_metric}


def _columns(frame: pd.DataFrame, limit: int = 15) -> str:
    names = [repr(str(c)) for c in frame.columns]
    return ", ".join(names[:limit]) + (
        f" (and {len(names) - limit} more)" if len(names) > limit else ""
    )


def _resolve_task(y_raw: pd.Series, target: str, task: str) -> tuple[str, pd.Series]:
    spec = detect_column(target, y_raw)
    unique = int(y_raw.nunique())
    if unique < 2:
        raise DataError(
            f"target {target!r} has a single value ({str(y_raw.iloc[0])[:30]!r}): there is nothing to predict",
            hint="choose a column with at least two different values",
        )
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
        return task, parse_numbers(y_raw).astype("float64")
    if spec.kind == "numeric" and unique > 50:
        raise DataError(
            f"target {target!r} is continuous ({unique} distinct values) and cannot be classified",
            hint="use task regression",
        )
    labels = y_raw.astype("string").str.strip().astype(object) if not numeric else y_raw
    if numeric and pd.api.types.is_float_dtype(labels) and np.allclose(labels, np.round(labels)):
        labels = labels.astype("int64")
    counts = pd.Series(labels).value_counts()
    if counts.min() < 2:
        rare = ", ".join(repr(str(c)) for c in counts[counts < 2].index[:3])
        raise DataError(
            f"target {target!r} has classes with a single row ({rare})",
            hint="merge or remove rare classes",
        )
    return task, pd.Series(labels, index=y_raw.index)


def _split(run: PipelineRun) -> None:
    from sklearn.model_selection import train_test_split

    index = run.X.index.to_numpy()
    stratify = run.y.to_numpy() if run.task == "classification" else None
    if len(index) < 10:
        raise DataError(
            f"only {len(index)} usable rows: too few to train and test a model",
            hint="use at least 10 rows",
        )
    train, test = train_test_split(
        index, test_size=TEST_SIZE, random_state=run.seed, stratify=stratify
    )
    run.train_index, run.test_index = pd.Index(np.sort(train)), pd.Index(np.sort(test))


def _train(run: PipelineRun) -> tuple[pd.DataFrame, pd.Series]:
    return run.X.loc[run.train_index], run.y.loc[run.train_index]


def _test(run: PipelineRun) -> tuple[pd.DataFrame, pd.Series]:
    return run.X.loc[run.test_index], run.y.loc[run.test_index]


def _require_data(run: PipelineRun, step: str) -> None:
    if run.X is None:
        raise MlpilotError(f"{step} needs data: the pipeline has no load_data step before it")


# -- clean --------------------------------------------------------------------------------------
def clean_data(run: PipelineRun, strategy: str = "auto", drop_duplicates: bool = True) -> None:
    _require_data(run, "clean_data")
    with run.stage("clean"):
        before = len(run.X)
        report: dict[str, Any] = {"rows_before": before, "strategy": strategy}
        if drop_duplicates:
            hashed = pd.util.hash_pandas_object(run.X, index=False) ^ pd.util.hash_pandas_object(
                run.y, index=False
            )
            dup = hashed.duplicated().to_numpy()
            report["duplicates_removed"] = int(dup.sum())
            if dup.any():
                _keep_rows(run, ~dup)
                run.note(f"removed {int(dup.sum())} duplicate rows")
        if strategy == "drop":
            complete = run.X.notna().all(axis=1).to_numpy()
            report["incomplete_rows_removed"] = int((~complete).sum())
            if not complete.any():
                raise DataError(
                    "every row has a missing value: strategy 'drop' would remove them all",
                    hint="use strategy auto, mean or median",
                )
            _keep_rows(run, complete)
        X_train, y_train = _train(run)
        run.cleaning = plan_cleaning(X_train, y_train, run.specs, run.task, strategy)
        for name, reason in run.cleaning.dropped.items():
            run.note(f"column {name!r} dropped: {reason}")
        if run.cleaning.dropped:
            run.X = run.X.drop(columns=list(run.cleaning.dropped))
            run.specs = [s for s in run.specs if s.name not in run.cleaning.dropped]
        report.update(rows_after=len(run.X), **run.cleaning.to_dict())
        run.logger.log_dict(report, "reports/cleaning.json")
        run.logger.log_params(
            {"clean.strategy": strategy, "clean.drop_duplicates": drop_duplicates}
        )
        run.log_metrics({"clean_rows_removed": before - len(run.X)})
        run.result["cleaning"] = {
            "rows_removed": before - len(run.X),
            "columns_dropped": list(run.cleaning.dropped),
        }


def _keep_rows(run: PipelineRun, mask: np.ndarray) -> None:
    run.X, run.y = run.X[mask], run.y[mask]
    kept = run.X.index
    run.train_index = run.train_index.intersection(kept)
    run.test_index = run.test_index.intersection(kept)
    if len(run.train_index) < 5 or len(run.test_index) < 2:
        raise DataError(f"only {len(kept)} rows are left after cleaning: too few to train and test")


# -- features -----------------------------------------------------------------------------------
def engineer_features(
    run: PipelineRun,
    datetime: bool = True,
    target_encoding: bool = True,
    interactions: bool = False,
    max_interactions: int = 10,
) -> None:
    _require_data(run, "engineer_features")
    with run.stage("features"):
        X_train, y_train = _train(run)
        run.features = plan_features(
            X_train,
            y_train,
            run.specs,
            run.task,
            engineered=True,
            datetime=datetime,
            target_encoding=target_encoding,
            interactions=interactions,
            max_interactions=max_interactions,
            seed=run.seed,
        )
        run.logger.log_dict(run.features.to_dict(), "reports/features.json")
        run.logger.log_params(
            {
                "features.datetime": datetime,
                "features.target_encoding": target_encoding,
                "features.interactions": interactions,
            }
        )
        run.result["features"] = run.features.to_dict()


def _cleaning(run: PipelineRun) -> CleaningPlan:
    if run.cleaning is None:
        X_train, y_train = _train(run)
        run.cleaning = plan_cleaning(
            X_train, y_train, run.specs, run.task, "auto", indicators=False
        )
    return run.cleaning


def _features(run: PipelineRun) -> FeaturePlan:
    if run.features is None:
        X_train, y_train = _train(run)
        run.features = plan_features(
            X_train, y_train, run.specs, run.task, engineered=False, seed=run.seed
        )
    return run.features


def build_pipeline(run: PipelineRun, family: str, params: dict[str, Any] | None = None) -> Any:
    """SchemaCoercer → preprocessing → estimator: the whole model that gets logged."""
    from sklearn.pipeline import Pipeline

    from mlpilot.platform.ml.transformers import SchemaCoercer

    family = resolve_family(family)
    preprocessor = build_preprocessor(
        run.specs,
        _cleaning(run),
        _features(run),
        scale=family in SCALE_SENSITIVE,
        task=run.task,
        seed=run.seed,
    )
    imbalanced = bool(
        run.task == "classification" and run.y.value_counts(normalize=True).min() < IMBALANCE_SHARE
    )
    estimator = make_estimator(
        family,
        run.task,
        params=params,
        seed=run.seed,
        imbalanced=imbalanced,
        device="gpu" if run.engine == "gpu" else "cpu",
        n_classes=len(run.classes) if run.classes is not None else 0,
    )
    return Pipeline(
        [
            ("coerce", SchemaCoercer([s.to_dict() for s in run.specs])),
            ("features", preprocessor),
            ("model", estimator),
        ]
    )


# -- train ----------------------------------------------------------------------------------------
def train_model(
    run: PipelineRun, model: str = "auto", params: dict[str, Any] | None = None
) -> None:
    _require_data(run, "train_model")
    with run.stage("train"):
        family = resolve_family(model)
        if model == "auto":
            run.note(f"model auto: fitting {LABELS[family]} with its default configuration")
        pipeline = build_pipeline(run, family, params)
        X_train, y_train = _train(run)
        if family == "svm" and len(X_train) > 20000:
            run.note(
                f"svm on {len(X_train)} rows is slow (its cost grows with the square of the rows)"
            )
        pipeline.fit(X_train, y_train)
        set_model(run, pipeline, family, params or {})
        run.event("progress", stage="train", message=f"fitted {LABELS[family]}")
    score_on_test(run)


def set_model(run: PipelineRun, pipeline: Any, family: str, params: dict[str, Any]) -> None:
    run.model, run.model_family, run.model_params = pipeline, family, dict(params)
    run.model_logged = False
    if run.main_metric is None:
        run.main_metric = M.default_metric(
            run.task, len(run.classes) if run.classes is not None else 0
        )
    run.logger.log_params(
        {"model.family": family, **{f"model.{k}": v for k, v in (params or {}).items()}}
    )


def score_on_test(run: PipelineRun) -> dict[str, float]:
    X_test, y_test = _test(run)
    y_pred = run.model.predict(X_test)
    y_score = _scores(run.model, X_test) if run.task == "classification" else None
    test = M.scores(run.task, y_test, y_pred, y_score, run.classes)
    run.log_metrics({f"test_{k}": v for k, v in test.items()})
    run.result["test_predictions"] = {"n": len(y_test)}
    return test


def _scores(model: Any, X: pd.DataFrame) -> np.ndarray | None:
    if hasattr(model, "predict_proba"):
        try:
            return model.predict_proba(X)
        except (AttributeError, NotImplementedError):
            pass
    if hasattr(model, "decision_function"):
        return model.decision_function(X)
    return None


# -- tune ---------------------------------------------------------------------------------------------
def optimize_model(
    run: PipelineRun,
    model: str = "auto",
    trials: int | None = 50,
    metric: str | None = None,
    timeout_s: float | None = None,
    early_stopping: bool = True,
    warm_start: bool = True,
) -> None:
    _require_data(run, "optimize_model")
    from mlpilot.platform.ml import tuning

    with run.stage("tune"):
        family, params = tuning.optimize(
            run,
            model=model,
            trials=trials,
            metric=metric,
            timeout_s=timeout_s,
            early_stopping=early_stopping,
            warm_start=warm_start,
        )
    with run.stage("train"):
        pipeline = build_pipeline(run, family, params)
        X_train, y_train = _train(run)
        pipeline.fit(X_train, y_train)
        set_model(run, pipeline, family, params)
        if metric:
            run.main_metric = metric
    score_on_test(run)


# -- evaluate -------------------------------------------------------------------------------------------
def evaluate_model(run: PipelineRun, cv_folds: int = 5) -> None:
    _require_data(run, "evaluate_model")
    if run.model is None:
        raise MlpilotError(
            "evaluate_model needs a model: add train_model or optimize_model before it"
        )
    from sklearn.base import clone
    from sklearn.model_selection import KFold, StratifiedKFold, cross_validate

    with run.stage("evaluate"):
        X_train, y_train = _train(run)
        if run.task == "classification":
            folds = min(cv_folds, int(y_train.value_counts().min()))
            if folds < cv_folds:
                run.note(
                    f"cross-validation uses {folds} folds: the smallest class has only {folds} training rows"
                )
            splitter: Any = StratifiedKFold(
                n_splits=max(folds, 2), shuffle=True, random_state=run.seed
            )
        else:
            splitter = KFold(n_splits=cv_folds, shuffle=True, random_state=run.seed)
        scoring = _cv_scoring(run)
        result = cross_validate(
            clone(run.model), X_train, y_train, cv=splitter, scoring=scoring, error_score="raise"
        )
        cv_metrics: dict[str, float] = {}
        for name in scoring:
            values = result[f"test_{name}"]
            sign = -1.0 if name in M.LOWER_IS_BETTER else 1.0
            cv_metrics[f"cv_{name}"] = float(sign * np.mean(values))
            cv_metrics[f"cv_{name}_std"] = float(np.std(values))
        run.log_metrics(cv_metrics)
        run.logger.log_params({"evaluate.cv_folds": cv_folds})
        _log_plots(run)


def _cv_scoring(run: PipelineRun) -> dict[str, Any]:
    names = M.REGRESSION if run.task == "regression" else M.CLASSIFICATION
    binary = run.classes is not None and len(run.classes) == 2
    scoring = {}
    for name in names:
        if name == "pr_auc" and not binary:
            continue
        if name in ("log_loss", "roc_auc", "pr_auc") and not hasattr(run.model, "predict_proba"):
            continue
        scoring[name] = M.sklearn_scorer(name, run.task, run.classes)
    return scoring


def _log_plots(run: PipelineRun) -> None:
    from mlpilot.platform.ml import plots

    X_test, y_test = _test(run)
    y_pred = run.model.predict(X_test)
    figures = []
    if run.task == "classification":
        figures.append(
            (
                plots.confusion_matrix_figure(y_test, y_pred, run.classes),
                "plots/confusion_matrix.png",
            )
        )
        scores = _scores(run.model, X_test)
        if scores is not None and len(run.classes) == 2 and y_test.nunique() == 2:
            pos = M.positive_label(run.classes)
            figures.append(
                (
                    plots.roc_figure(y_test, M._pos_column(scores, run.classes, pos), pos),
                    "plots/roc_curve.png",
                )
            )
    else:
        figures.append((plots.residuals_figure(y_test, y_pred), "plots/residuals.png"))
        figures.append(
            (plots.predicted_vs_actual_figure(y_test, y_pred), "plots/predicted_vs_actual.png")
        )
    for fig, name in figures:
        run.logger.log_figure(fig, name)
        plots.close(fig)


# -- importance -----------------------------------------------------------------------------------------
def feature_importance(run: PipelineRun, method: str = "auto", top_k: int = 10) -> None:
    _require_data(run, "feature_importance")
    if run.model is None:
        run.note("no model in the plan: fitting a default random forest for feature importance")
        train_model(run, model="rf")
    from mlpilot.platform.ml import plots

    with run.stage("importance"):
        used = method
        if method == "auto":
            used = "permutation"
        if used == "impurity" and run.model_family not in TREE_FAMILIES:
            run.note(
                f"impurity importance needs a tree model; {LABELS[run.model_family]} uses permutation importance"
            )
            used = "permutation"
        ranking = _impurity(run) if used == "impurity" else _permutation(run)
        items = [
            {"feature": f, "importance": round(float(v), 6)}
            for f, v in sorted(ranking.items(), key=lambda kv: -kv[1])
        ]
        top = items[:top_k]
        path = run.run_dir / "importance.json"
        import json

        path.write_text(json.dumps(top, indent=2, ensure_ascii=False), encoding="utf-8")
        run.logger.log_file(path)
        fig = plots.importance_figure(top, used)
        run.logger.log_figure(fig, "plots/feature_importance.png")
        plots.close(fig)
        run.logger.log_params({"importance.method": used, "importance.top_k": top_k})
        run.result["importance"] = top
        run.event(
            "progress",
            stage="importance",
            message="top features: " + ", ".join(i["feature"] for i in top[:5]),
        )


def _impurity(run: PipelineRun) -> dict[str, float]:
    estimator = run.model.named_steps["model"]
    values = np.asarray(estimator.feature_importances_, dtype=float)
    preprocessor = run.model.named_steps["features"]
    names = list(preprocessor.get_feature_names_out())
    mapping = source_columns(preprocessor)
    totals: dict[str, float] = {s.name: 0.0 for s in run.specs}
    for name, value in zip(names, values, strict=False):
        sources = mapping.get(name, [])
        for source in sources:
            totals[source] = totals.get(source, 0.0) + value / len(sources)
    total = sum(totals.values()) or 1.0
    return {k: v / total for k, v in totals.items()}


def _permutation(run: PipelineRun) -> dict[str, float]:
    from sklearn.inspection import permutation_importance

    X_test, y_test = _test(run)
    if len(X_test) > PERMUTATION_ROWS:
        sample = X_test.sample(PERMUTATION_ROWS, random_state=run.seed)
        X_test, y_test = sample, y_test.loc[sample.index]
    scorer = M.sklearn_scorer(run.main_metric or M.default_metric(run.task), run.task, run.classes)
    result = permutation_importance(
        run.model, X_test, y_test, n_repeats=3, random_state=run.seed, scoring=scorer
    )
    return {
        str(c): max(float(v), 0.0)
        for c, v in zip(X_test.columns, result.importances_mean, strict=False)
    }


# -- model logging, registry and prediction ---------------------------------------------------------------
def log_model(run: PipelineRun) -> str | None:
    """Log the whole Pipeline with a signature over the raw input columns."""
    from mlflow.models import ModelSignature
    from mlflow.models.signature import infer_signature
    from mlflow.types import ColSpec, Schema
    from mlflow.types.schema import AnyType

    example = run.raw_example
    # Raw files vary (ints in one file, floats or blanks in the next); SchemaCoercer
    # parses every column, so the signature names the columns and accepts any type.
    inputs = Schema([ColSpec(AnyType(), str(c)) for c in example.columns])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inferred *input* schema is replaced below
        outputs = infer_signature(example, run.model.predict(example)).outputs
    run.model_uri = run.logger.log_model(
        run.model, signature=ModelSignature(inputs=inputs, outputs=outputs), input_example=example
    )
    run.model_logged = True
    if run.model_uri:
        run.event("progress", stage="log_model", message=f"model logged: {run.model_uri}")
    return run.model_uri


def register_model(
    run: PipelineRun,
    name: str,
    alias: str | None = None,
    run_id: str | None = None,
    metric: str | None = None,
) -> None:
    from mlpilot.tracking import registry

    with run.stage("register"):
        client = getattr(run.logger, "client", None)
        if client is None:
            raise MlpilotError(
                "register_model needs MLflow tracking", hint="run without --no-track"
            )
        if run_id is None and run.model is not None:
            if not run.model_logged:
                log_model(run)
            source_run, model_uri = run.logger.run_id, run.model_uri
        else:
            source_run, model_uri = registry.resolve_source(
                client, run.logger.experiment_id, run_id, metric or run.main_metric
            )
        version = registry.register(
            client,
            model_uri=model_uri,
            name=name,
            alias=alias,
            source_run_id=source_run,
            lineage=_lineage(run),
        )
        run.result["registered"] = version
        run.note(
            f"registered {name} version {version['version']}" + (f" as @{alias}" if alias else "")
        )


def _lineage(run: PipelineRun) -> dict[str, str]:
    lineage = {"mlpilot.target": run.target or "", "mlpilot.task": run.task or ""}
    if run.main_metric and f"test_{run.main_metric}" in run.metrics:
        lineage["mlpilot.metric"] = run.main_metric
        lineage["mlpilot.metric_value"] = f"{run.metrics[f'test_{run.main_metric}']:.6g}"
    return lineage


def predict(
    run: PipelineRun, data_path: str, output_path: str | None = None, model_uri: str | None = None
) -> None:
    with run.stage("predict"):
        frame = read_table(data_path)
        if model_uri is None and run.model is not None:
            model, source = run.model, "this run's model"
        else:
            from mlpilot.tracking import registry

            client = getattr(run.logger, "client", None)
            if model_uri is None:
                if client is None:
                    raise MlpilotError("predict needs a model_uri when tracking is off")
                _, model_uri = registry.resolve_source(client, run.logger.experiment_id, None, None)
            import mlflow.pyfunc

            model, source = mlflow.pyfunc.load_model(model_uri), model_uri
        predictions = model.predict(frame)
        out = Path(output_path) if output_path else run.run_dir / "predictions.csv"
        result = frame.copy()
        result["prediction"] = (
            np.asarray(predictions).ravel()
            if not isinstance(predictions, pd.DataFrame)
            else predictions.iloc[:, 0].to_numpy()
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(out, index=False)
        if out.stat().st_size < 50 * 2**20:
            run.logger.log_file(out, "predictions")
        run.result["predictions"] = {"path": str(out), "rows": len(result), "model": source}
        run.note(f"wrote {len(result)} predictions to {out}")


__all__ = [
    "ColumnSpec",
    "clean_data",
    "engineer_features",
    "evaluate_model",
    "feature_importance",
    "load_data",
    "optimize_model",
    "predict",
    "register_model",
    "train_model",
]
