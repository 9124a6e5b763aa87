"""Cross-validation, plots and feature importance."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.devices import observe_model
from mlpilot.platform.ml.features import source_columns
from mlpilot.platform.ml.modeling import LABELS, TREE_FAMILIES
from mlpilot.platform.ml.steps._model import _scores, train_model

PERMUTATION_ROWS = 5000


# -- evaluate -------------------------------------------------------------------------------------------
def evaluate_model(run: PipelineRun, cv_folds: int = 5) -> None:
    run.data.require("evaluate_model")
    if not run.model.fitted:
        raise MlpilotError(
            "evaluate_model needs a model: add train_model or optimize_model before it"
        )
    from sklearn.base import clone
    from sklearn.model_selection import KFold, StratifiedKFold, cross_validate

    with run.stage("evaluate"):
        # the folds fit clones of this model: same estimators, same parameters, same process
        observe_model(run.model.pipeline)
        X_train, y_train = run.data.train()
        if run.data.task == "classification":
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
            clone(run.model.pipeline),
            X_train,
            y_train,
            cv=splitter,
            scoring=scoring,
            error_score="raise",
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
    names = M.REGRESSION if run.data.task == "regression" else M.CLASSIFICATION
    binary = run.data.classes is not None and len(run.data.classes) == 2
    scoring = {}
    for name in names:
        if name == "pr_auc" and not binary:
            continue
        if name in ("log_loss", "roc_auc", "pr_auc") and not hasattr(
            run.model.pipeline, "predict_proba"
        ):
            continue
        scoring[name] = M.sklearn_scorer(
            name, run.data.task, run.data.classes, run.data.positive_class
        )
    return scoring


def _log_plots(run: PipelineRun) -> None:
    from mlpilot.platform.ml import plots

    X_test, y_test = run.data.test()
    y_pred = run.model.pipeline.predict(X_test)
    figures = []
    if run.data.task == "classification":
        figures.append(
            (
                plots.confusion_matrix_figure(y_test, y_pred, run.data.classes),
                "plots/confusion_matrix.png",
            )
        )
        scores = _scores(run.model.pipeline, X_test)
        if scores is not None and len(run.data.classes) == 2 and y_test.nunique() == 2:
            pos = run.data.positive_class
            figures.append(
                (
                    plots.roc_figure(y_test, M._pos_column(scores, run.data.classes, pos), pos),
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
    run.data.require("feature_importance")
    if not run.model.fitted:
        run.note("no model in the plan: fitting a default random forest for feature importance")
        train_model(run, model="rf")
    from mlpilot.platform.ml import plots

    with run.stage("importance"):
        observe_model(run.model.pipeline)
        used = method
        if method == "auto":
            used = "permutation"
        if used == "impurity" and run.model.family not in TREE_FAMILIES:
            run.note(
                f"impurity importance needs a tree model; {LABELS[run.model.family]} uses permutation importance"
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
        run.result.importance = top
        run.event(
            "progress",
            stage="importance",
            message="top features: " + ", ".join(i["feature"] for i in top[:5]),
        )


def _impurity(run: PipelineRun) -> dict[str, float]:
    estimator = run.model.pipeline.named_steps["model"]
    values = np.asarray(estimator.feature_importances_, dtype=float)
    preprocessor = run.model.pipeline.named_steps["features"]
    names = list(preprocessor.get_feature_names_out())
    mapping = source_columns(preprocessor)
    totals: dict[str, float] = {s.name: 0.0 for s in run.data.specs}
    for name, value in zip(names, values, strict=False):
        sources = mapping.get(name, [])
        for source in sources:
            totals[source] = totals.get(source, 0.0) + value / len(sources)
    total = sum(totals.values()) or 1.0
    return {k: v / total for k, v in totals.items()}


def _permutation(run: PipelineRun) -> dict[str, float]:
    from sklearn.inspection import permutation_importance

    X_test, y_test = run.data.test()
    if len(X_test) > PERMUTATION_ROWS:
        sample = X_test.sample(PERMUTATION_ROWS, random_state=run.seed)
        X_test, y_test = sample, y_test.loc[sample.index]
    scorer = M.sklearn_scorer(
        run.model.main_metric or M.default_metric(run.data.task),
        run.data.task,
        run.data.classes,
        run.data.positive_class,
    )
    result = permutation_importance(
        run.model.pipeline, X_test, y_test, n_repeats=3, random_state=run.seed, scoring=scorer
    )
    return {
        str(c): max(float(v), 0.0)
        for c, v in zip(X_test.columns, result.importances_mean, strict=False)
    }
