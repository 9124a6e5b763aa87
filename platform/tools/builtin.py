"""The canonical tools of DESIGN.md section 3.

Pipeline tools only declare a signature here; the step itself is the runtime function
named in ``runtime`` (imported by the generated script, never by the planner). Query
tools answer in-process through :mod:`mlpilot.platform.tools.queries`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mlpilot.platform.ml import families
from mlpilot.platform.tools._registry import Bounds, Tool, tool
from mlpilot.tracking import vocab

Task = Literal["auto", "classification", "regression"]
# built from the family registry: the JSON schema lists exactly the families a plan may name
ModelName = Literal[(*families.plan_names(), "auto")]  # type: ignore[valid-type]
# built from the vocabulary: the JSON schema lists exactly the metrics mlpilot computes
MetricName = Literal[tuple(vocab.METRICS)]  # type: ignore[valid-type]
MODELS: tuple[str, ...] = ModelName.__args__  # type: ignore[attr-defined]
METRICS: tuple[str, ...] = MetricName.__args__  # type: ignore[attr-defined]
CLASSIFICATION_METRICS = vocab.CLASSIFICATION_METRICS
REGRESSION_METRICS = vocab.REGRESSION_METRICS
_STEPS = "mlpilot.platform.ml.steps"


@tool(kind="pipeline", stage="load", runtime=f"{_STEPS}:load_data")
def load_data(path: str, target: str | None = None, task: Task = "auto") -> None:
    """Load a tabular data file (CSV, Parquet, JSON lines) and choose the column to predict.

    Args:
        path: Path of the data file.
        target: Exact name of the column to predict, as it appears in the data profile.
        task: classification, regression, or auto to decide from the target column.
    """


@tool(kind="pipeline", stage="clean", runtime=f"{_STEPS}:clean_data")
def clean_data(
    strategy: Literal["auto", "drop", "mean", "median", "mode"] = "auto",
    drop_duplicates: bool = True,
) -> None:
    """Clean the data: remove duplicate rows, drop near-empty columns, fill missing values.

    Args:
        strategy: How to fill missing values: auto picks per column (mean, median or mode), drop removes incomplete rows.
        drop_duplicates: Remove rows that are exact duplicates.
    """


@tool(kind="pipeline", stage="features", runtime=f"{_STEPS}:engineer_features")
def engineer_features(
    datetime: bool = True,
    target_encoding: bool = True,
    interactions: bool = False,
    max_interactions: Annotated[int, Bounds(1, 100)] = 10,
) -> None:
    """Engineer features inside the model pipeline: date parts, categorical encodings, interactions.

    Args:
        datetime: Expand date columns into year, month, day, day of week, quarter, weekend, hour.
        target_encoding: Target-encode high-cardinality categorical columns (cross-fitted, no leakage).
        interactions: Add products of the strongest numeric columns when they add signal.
        max_interactions: Most interaction features to keep.
    """


@tool(kind="pipeline", stage="train", runtime=f"{_STEPS}:train_model")
def train_model(model: ModelName = "auto", params: dict[str, Any] = {}) -> None:  # noqa: B006 - a schema default, copied on use
    """Fit one model with sensible defaults (no search) and score it on a held-out test split.

    Args:
        model: Model family: rf (random forest), xgb (XGBoost), lgbm (LightGBM), hgb (histogram gradient boosting), svm, linear (logistic or ridge), knn, or auto.
        params: Hyperparameters passed to the model, e.g. {"n_estimators": 300}.
    """


@tool(kind="pipeline", stage="tune", runtime=f"{_STEPS}:optimize_model")
def optimize_model(
    model: ModelName = "auto",
    trials: Annotated[int, Bounds(1, 10000)] | None = 50,
    metric: MetricName | None = None,
    timeout_s: Annotated[float, Bounds(1, 7 * 24 * 3600)] | None = None,
    early_stopping: bool = True,
    warm_start: bool = True,
) -> None:
    """Tune a model's hyperparameters with Optuna (TPE, cross-validated objective).

    Args:
        model: Model family to tune, or auto to search across families.
        trials: Number of trials; null runs until timeout_s.
        metric: Metric to optimize; null uses the task default (rmse or roc_auc/accuracy).
        timeout_s: Time budget in seconds; null for no limit.
        early_stopping: Stop when trials stop improving the best score.
        warm_start: Start from a meta-learned prior when one ships.
    """


@tool(kind="pipeline", stage="evaluate", runtime=f"{_STEPS}:evaluate_model")
def evaluate_model(cv_folds: Annotated[int, Bounds(2, 50)] = 5) -> None:
    """Evaluate the model with k-fold cross-validation on the training split and log plots.

    Args:
        cv_folds: Number of cross-validation folds.
    """


@tool(kind="pipeline", stage="importance", runtime=f"{_STEPS}:feature_importance")
def feature_importance(
    method: Literal["auto", "impurity", "permutation"] = "auto",
    top_k: Annotated[int, Bounds(1, 1000)] = 10,
) -> None:
    """Rank the raw columns by how much the model relies on them (importance.json and a plot).

    Args:
        method: impurity (tree models), permutation (any model), or auto.
        top_k: How many top features to report and plot.
    """


@tool(kind="directive")
def compare_engines() -> None:
    """Run the pipeline on both the CPU and the GPU with the same seed and report per-stage speedups."""


@tool(kind="pipeline", stage="register", runtime=f"{_STEPS}:register_model")
def register_model(
    name: str,
    alias: str | None = None,
    run_id: str | None = None,
    metric: MetricName | None = None,
) -> None:
    """Register a model in the MLflow Model Registry, optionally under an alias such as champion.

    Args:
        name: Registered model name.
        alias: Alias to point at the new version (e.g. champion, challenger).
        run_id: Run whose model to register; null = this request's model, else the experiment's best run.
        metric: Metric that decides the best run; null uses the task default.
    """


@tool(kind="pipeline", stage="predict", runtime=f"{_STEPS}:predict")
def predict(data_path: str, output_path: str | None = None, model_uri: str | None = None) -> None:
    """Predict on a new data file with a trained model and write the predictions.

    Args:
        data_path: File with the rows to predict (raw columns, no target needed).
        output_path: Where to write predictions; null writes next to the run.
        model_uri: MLflow model URI; null = this request's model, else the session's or experiment's best.
    """


@tool(kind="query")
def describe_data(context: Any) -> dict[str, Any]:
    """Describe the data file: rows, columns, kinds, missing values, candidate targets."""
    from mlpilot.platform.tools import queries

    return queries.describe_data(context)


@tool(kind="query")
def show_runs(
    context: Any,
    limit: Annotated[int, Bounds(1, 1000)] = 10,
    scope: Literal["auto", "all"] = "auto",
) -> dict[str, Any]:
    """List the most recent runs with their experiment, status and key metric.

    Args:
        limit: How many runs to show.
        scope: "auto" for the conversation's own runs when it has some, else every
            experiment's; "all" for every experiment's runs even in a conversation.
    """
    from mlpilot.platform.tools import queries

    return queries.show_runs(context, limit=limit, scope=scope)


@tool(kind="query")
def show_best_model(context: Any, metric: MetricName | None = None) -> dict[str, Any]:
    """Show the best run of the experiment by a metric, with its model.

    Args:
        metric: Metric to rank runs by; null uses the experiment's main metric.
    """
    from mlpilot.platform.tools import queries

    return queries.show_best_model(context, metric=metric)


@tool(kind="query")
def compare_runs(context: Any, run_ids: list[str]) -> dict[str, Any]:
    """Compare runs side by side: metrics, parameters and timings.

    Args:
        run_ids: MLflow run ids (or unique prefixes) to compare.
    """
    from mlpilot.platform.tools import queries

    return queries.compare_runs(context, run_ids=run_ids)


@tool(kind="query")
def show_study(context: Any, name: str | None = None) -> dict[str, Any]:
    """Show an Optuna study: trials, best value and best parameters.

    Args:
        name: Study name; null shows the most recent study.
    """
    from mlpilot.platform.tools import queries

    return queries.show_study(context, name=name)


BUILTIN_TOOLS: tuple[Tool, ...] = (
    load_data,
    clean_data,
    engineer_features,
    train_model,
    optimize_model,
    evaluate_model,
    feature_importance,
    compare_engines,
    register_model,
    predict,
    describe_data,
    show_runs,
    show_best_model,
    compare_runs,
    show_study,
)
