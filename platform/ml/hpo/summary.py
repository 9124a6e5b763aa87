"""What a finished study leaves on its parent run: best values, counts, and plots.

Parent run: params ``hpo.*`` (metric, family, best params, study, storage), metrics
``hpo_best_value``, ``hpo_trials`` and counts per state, tags ``mlpilot.optuna.*``, and the
plots — one self-contained Plotly page (optimisation history, parameter importances,
parallel coordinate, slice; plotly.js embedded once, so it opens offline) and matplotlib PNGs
of the history and the importances. ``result.json`` gets the study summary that the
orchestrator stores in MongoDB.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM, model_params
from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

#: above this many trials the plots are drawn from an even sample (the browser stays usable)
PLOT_TRIALS = 1000
PLOTS_PAGE = "plots/optuna/study.html"


def study_summary(
    study: optuna.Study,
    *,
    storage: str,
    metric: str,
    model: str,
    budget: int | None,
    stop_reason: str | None,
) -> dict[str, Any]:
    """The study in a few fields (MongoDB ``runs.study``, ``result.json``)."""
    trials = study.get_trials(deepcopy=False)
    states = {s: sum(t.state.name == s for t in trials) for s in ("COMPLETE", "PRUNED", "FAIL")}
    best = study.best_trial if states["COMPLETE"] else None
    return {
        "name": study.study_name,
        "storage": storage,
        "metric": metric,
        "direction": study.direction.name.lower(),
        "best_value": float(best.value) if best and best.value is not None else None,
        "best_trial": best.number if best else None,
        "best_params": model_params(best.params) if best else {},
        "family": best.params.get(FAMILY_PARAM, model) if best else None,
        "n_trials": sum(t.state.is_finished() for t in trials),
        "n_complete": states["COMPLETE"],
        "n_pruned": states["PRUNED"],
        "n_failed": states["FAIL"],
        "trials_by_family": _by_family(trials, model),
        "budget": budget,
        "early_stopped": stop_reason == "early_stopping",
        "stop_reason": stop_reason,
    }


def _by_family(trials: list[Any], model: str) -> dict[str, int]:
    """Finished trials per family: which families an ``auto`` search actually tried."""
    counts = Counter(
        str(t.params.get(FAMILY_PARAM, model)) for t in trials if t.state.is_finished()
    )
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def log_to_parent(logger: Any, summary: dict[str, Any]) -> None:
    """Best values and counts on the parent run (params are write-once: logged by the run
    that created the study; tags and metrics may be updated by workers later)."""
    metrics = {
        "hpo_trials": summary["n_trials"],
        "hpo_trials_complete": summary["n_complete"],
        "hpo_trials_pruned": summary["n_pruned"],
        "hpo_trials_failed": summary["n_failed"],
    }
    if summary["best_value"] is not None:
        metrics["hpo_best_value"] = summary["best_value"]
    logger.log_metrics(metrics)
    logger.set_tags(
        {
            vocab.TAG_OPTUNA_STUDY: summary["name"],
            vocab.TAG_OPTUNA_STORAGE: summary["storage"],
            vocab.TAG_OPTUNA_BEST_PARAMS: json.dumps(summary["best_params"], default=str),
        }
    )


def log_params_once(logger: Any, summary: dict[str, Any]) -> None:
    logger.log_params(
        {
            "hpo.study": summary["name"],
            "hpo.storage": summary["storage"],
            "hpo.metric": summary["metric"],
            "hpo.family": summary["family"],
            "hpo.budget": summary["budget"],
            **{f"hpo.best.{k}": v for k, v in summary["best_params"].items()},
        }
    )


def param_importances(study: optuna.Study) -> dict[str, float]:
    import optuna

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {
                k: round(float(v), 6)
                for k, v in optuna.importance.get_param_importances(_plot_view(study)).items()
            }
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}  # too few complete trials, or no parameter that varies in all of them


def log_plots(
    logger: Any, study: optuna.Study, workdir: Path, importances: dict[str, float]
) -> list[str]:
    """Write the Plotly page and the PNGs and log them; the artifact paths written."""
    import optuna

    view = _plot_view(study)
    if sum(t.state.name == "COMPLETE" for t in view.trials) < 2:
        return []
    written = []
    page = workdir / "study.html"
    if _plotly_page(view, importances, page):
        logger.log_file(page, str(Path(PLOTS_PAGE).parent))
        written.append(PLOTS_PAGE)
    import matplotlib

    from mlpilot.platform.ml import plots

    matplotlib_plots = optuna.visualization.matplotlib
    # Optuna switches matplotlib to its own style globally: keep that inside these plots
    with warnings.catch_warnings(), matplotlib.rc_context():
        warnings.simplefilter("ignore")
        for name, draw in (
            ("optimization_history", lambda: matplotlib_plots.plot_optimization_history(view)),
            (
                "param_importances",
                lambda: matplotlib_plots.plot_param_importances(
                    view, evaluator=_Known(importances)
                ),
            ),
        ):
            if name == "param_importances" and not importances:
                continue
            try:
                axes = draw()
            except (ValueError, RuntimeError):
                continue
            figure = axes.figure
            figure.set_size_inches(8, 5)
            figure.tight_layout()
            logger.log_figure(figure, f"plots/optuna/{name}.png")
            plots.close(figure)
            written.append(f"plots/optuna/{name}.png")
    return written


def _plotly_page(study: optuna.Study, importances: dict[str, float], path: Path) -> bool:
    import optuna.visualization as vis

    if not vis.is_available():
        return False
    sections = [
        ("Optimization history", lambda: vis.plot_optimization_history(study)),
        (
            "Parameter importances",
            lambda: vis.plot_param_importances(study, evaluator=_Known(importances)),
        ),
        ("Parallel coordinate", lambda: vis.plot_parallel_coordinate(study)),
        ("Slice", lambda: vis.plot_slice(study)),
    ]
    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for title, draw in sections:
            if title == "Parameter importances" and not importances:
                continue
            try:
                figure = draw()
            except (ValueError, RuntimeError):
                continue
            # plotly.js goes into the page once, with the first figure
            body = figure.to_html(full_html=False, include_plotlyjs=not parts)
            parts.append(f"<h2>{title}</h2>\n{body}")
    if not parts:
        return False
    from html import escape

    name = escape(study.study_name)
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Optuna study {name}</title></head><body>"
        f"<h1>Optuna study {name}</h1>\n" + "\n".join(parts) + "</body></html>",
        encoding="utf-8",
    )
    return True


def _plot_view(study: optuna.Study) -> optuna.Study:
    """The study itself, or an in-memory copy holding an even sample of its trials."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    if len(trials) <= PLOT_TRIALS:
        return study
    step = len(trials) / PLOT_TRIALS
    view = optuna.create_study(direction=study.direction, study_name=study.study_name)
    view.add_trials([trials[int(i * step)] for i in range(PLOT_TRIALS)])
    return view


def _Known(importances: dict[str, float]) -> Any:
    """An importance evaluator that returns importances computed once already."""
    from optuna.importance import BaseImportanceEvaluator

    class Known(BaseImportanceEvaluator):
        def evaluate(
            self, study: Any, params: Any = None, *, target: Any = None
        ) -> dict[str, float]:
            return dict(importances)

    return Known()
