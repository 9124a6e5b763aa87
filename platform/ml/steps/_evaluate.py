"""Cross-validation, plots and feature importance."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import families
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.devices import observe_model
from mlpilot.platform.ml.features import source_columns
from mlpilot.platform.ml.modeling import label_of
from mlpilot.platform.ml.steps._model import _scores, train_model

PERMUTATION_ROWS = 5000
PERMUTATION_REPEATS = 3
MIN_PERMUTATION_ROWS = 200
#: seconds a time-budgeted run keeps after its importance (logging the model, the result,
#: the parent's recording): permutation importance runs only when it fits before that
IMPORTANCE_RESERVE_S = 2.0


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
        if _search_folds_instead(run, cv_folds):
            _log_plots(run)
            return
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


def _time_left(run: PipelineRun) -> float | None:
    """Seconds this step may use: until the deadline, less a pending refit's (None: no budget)."""
    left = run.time_left()
    return None if left is None else left - run.model.refit_s


def _search_folds_instead(run: PipelineRun, cv_folds: int) -> bool:
    """Under a time budget with no room for ``cv_folds`` more fits: keep the search's own
    out-of-fold scores of the chosen configuration (``cv_<metric>``), with a note."""
    left, fit_s = _time_left(run), run.model.fit_s
    folds = (run.result.study or {}).get("best_fold_values")
    if left is None or fit_s is None or not folds:
        return False
    cost = cv_folds * fit_s
    if cost + IMPORTANCE_RESERVE_S <= left:
        return False
    run.note(
        f"evaluate: {cv_folds}-fold cross-validation would take about {cost:.0f} s and "
        f"{max(left, 0):.0f} s of the time budget are left: cv_{run.model.main_metric} is the "
        f"chosen configuration's out-of-fold score from the search ({len(folds)} folds)"
    )
    return True


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
        default = families.default(families.IMPORTANCE)
        run.note(f"no model in the plan: fitting a default {default.label} for feature importance")
        train_model(run, model=default.name)
    from mlpilot.platform.ml import plots

    with run.stage("importance"):
        observe_model(run.model.pipeline)
        used, rows, repeats = method, PERMUTATION_ROWS, PERMUTATION_REPEATS
        if method == "auto":
            used, rows, repeats = _auto_method(run)
        if used == "impurity" and not _native_members(run.model.pipeline):
            run.note(
                f"impurity importance needs a tree model; {label_of(run.model.family)} uses permutation importance"
            )
            used = "permutation"
        ranking = _impurity(run) if used == "impurity" else _permutation(run, rows, repeats)
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


def _permutation_cost(run: PipelineRun, rows: int, repeats: int) -> float | None:
    """Estimated seconds of permutation importance: a test pass per column and repeat."""
    if run.model.predict_s is None:
        return None
    X_test, _ = run.data.test()
    # a pass costs a fixed part (the pipeline's own overhead) and a part per row: take
    # half of the measured pass as each, which errs on the slow side for small sets
    share = min(1.0, rows / max(len(X_test), 1))
    per_pass = run.model.predict_s * (0.5 + 0.5 * share)
    return per_pass * (len(X_test.columns) * repeats + 1)


def _auto_method(run: PipelineRun) -> tuple[str, int, int]:
    """Permutation importance (``PERMUTATION_ROWS`` test rows, ``PERMUTATION_REPEATS``
    repeats), unless a time budget has no room for it: then the model's own (impurity)
    importance where it has one, else one repeat on as many rows as fit; with a note.
    Returns the method, the rows and the repeats."""
    left = _time_left(run)
    cost = _permutation_cost(run, PERMUTATION_ROWS, PERMUTATION_REPEATS)
    if left is None or cost is None or cost + IMPORTANCE_RESERVE_S <= left:
        return "permutation", PERMUTATION_ROWS, PERMUTATION_REPEATS
    room = max(left - IMPORTANCE_RESERVE_S, 0.0)
    native = _native_members(run.model.pipeline)
    if native:
        whose = "" if native[0][1] is run.model.pipeline else " (its tree members', by weight)"
        run.note(
            f"importance: permutation would take about {cost:.0f} s and {room:.0f} s of the "
            f"time budget are free: using the model's own (impurity) importance{whose}"
        )
        return "impurity", 0, 0
    rows = PERMUTATION_ROWS
    while rows > MIN_PERMUTATION_ROWS and (_permutation_cost(run, rows, 1) or 0.0) > room:
        rows //= 2
    rows = max(rows, MIN_PERMUTATION_ROWS)
    run.note(
        f"importance: permutation would take about {cost:.0f} s and {room:.0f} s of the time "
        f"budget are free: one repeat on up to {rows} test rows instead of "
        f"{PERMUTATION_REPEATS} on {PERMUTATION_ROWS}"
    )
    return "permutation", rows, 1


def _has_native(pipeline: Any) -> bool:
    steps = getattr(pipeline, "named_steps", {})
    return "model" in steps and hasattr(steps["model"], "feature_importances_")


def _native_members(model: Any) -> list[tuple[float, Any]]:
    """(weight, pipeline) of the parts of ``model`` with their own importance: the model
    itself, or the members of a weighted ensemble that have one (tree models)."""
    members = getattr(model, "members_", None)
    if members is None:
        return [(1.0, model)] if _has_native(model) else []
    weights = list(getattr(model, "weights", None) or [1.0] * len(members))
    return [(float(w), m) for w, m in zip(weights, members, strict=False) if _has_native(m)]


def _impurity(run: PipelineRun) -> dict[str, float]:
    """The model's own importance in raw column names (an ensemble: its tree members',
    each normalised, weighted by the member's weight)."""
    combined: dict[str, float] = {s.name: 0.0 for s in run.data.specs}
    parts = _native_members(run.model.pipeline)
    weight_sum = sum(w for w, _ in parts) or 1.0
    for weight, pipeline in parts:
        for name, value in _member_impurity(run, pipeline).items():
            combined[name] = combined.get(name, 0.0) + value * weight / weight_sum
    return combined


def _member_impurity(run: PipelineRun, pipeline: Any) -> dict[str, float]:
    estimator = pipeline.named_steps["model"]
    values = np.asarray(estimator.feature_importances_, dtype=float)
    preprocessor = pipeline.named_steps["features"]
    names = list(preprocessor.get_feature_names_out())
    mapping = source_columns(preprocessor)
    totals: dict[str, float] = {s.name: 0.0 for s in run.data.specs}
    for name, value in zip(names, values, strict=False):
        sources = mapping.get(name, [])
        for source in sources:
            totals[source] = totals.get(source, 0.0) + value / len(sources)
    total = sum(totals.values()) or 1.0
    return {k: v / total for k, v in totals.items()}


def _permutation(
    run: PipelineRun, rows: int = PERMUTATION_ROWS, repeats: int = PERMUTATION_REPEATS
) -> dict[str, float]:
    from sklearn.inspection import permutation_importance

    X_test, y_test = run.data.test()
    if len(X_test) > rows:
        sample = X_test.sample(rows, random_state=run.seed)
        X_test, y_test = sample, y_test.loc[sample.index]
    scorer = M.sklearn_scorer(
        run.model.main_metric or M.default_metric(run.data.task),
        run.data.task,
        run.data.classes,
        run.data.positive_class,
    )
    result = permutation_importance(
        run.model.pipeline,
        X_test,
        y_test,
        n_repeats=repeats,
        random_state=run.seed,
        scoring=scorer,
    )
    return {
        str(c): max(float(v), 0.0)
        for c, v in zip(X_test.columns, result.importances_mean, strict=False)
    }
