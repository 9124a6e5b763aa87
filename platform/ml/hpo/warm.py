"""Warm starts: a fresh study's first trials come from the meta-learned prior.

``enqueue_warm_start`` asks the shipped ``Prior`` for the configurations that did well on
data sets like this one (``prior.meta_features`` of the training split) and enqueues them
(``study.enqueue_trial``); the sampler takes over after them. Under a time budget with
``model="auto"`` each family's warm configuration takes the place of its low-cost first
point, in the same order, so every family is still tried early.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml import families as F
from mlpilot.platform.ml.hpo.budget import enqueue_low_cost, study_params
from mlpilot.platform.ml.modeling import CATEGORICAL_PARAM
from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.platform.ml.hpo.objective import CVObjective

logger = logging.getLogger(__name__)

#: how many warm configurations a search without a time budget starts with
WARM_TRIALS = 5


def enqueue_warm_start(
    run: PipelineRun,
    study: optuna.Study,
    objective: CVObjective,
    *,
    model: str,
    timed: bool,
    on: bool = True,
) -> int:
    """Queue the prior's configurations at the start of a fresh study; how many.

    ``timed``: a time budget (one per family, in the low-cost queue's order, instead of the
    low-cost points); ``on``: the step's ``warm_start`` (off: only recorded).
    """
    from mlpilot.platform.ml.hpo.spaces import auto_families
    from mlpilot.platform.ml.prior import Prior, meta_features

    if not on:
        record(run, "off")
        return 0
    names = auto_families(run.prefer) if model == "auto" else (model,)
    if study.get_trials(deepcopy=False):
        return 0  # a resumed study starts from its own trials
    prior = Prior.shipped()
    task = str(run.data.task)
    known = tuple(n for n in names if prior is not None and n in prior.families(task))
    if prior is None or not known:
        why = "no meta-learned prior ships" if prior is None else f"the prior knows no {model}"
        run.note(f"warm start requested, but {why}: starting cold")
        record(run, "unavailable")
        return 0
    meta = meta_features(objective.X, objective.y, task, seed=run.seed)
    if timed and model == "auto":
        picked, choice = _one_per_family(prior, known, task, meta)
    elif model == "auto":
        picked, choice = prior.ranked(known, task, meta, WARM_TRIALS)
    else:
        configs, choice = prior.configs(model, task, meta, WARM_TRIALS)
        picked = [(model, params) for params in configs]
    for family, params in picked:
        if not objective.categorical:
            params = {k: v for k, v in params.items() if k != CATEGORICAL_PARAM}
        study.enqueue_trial(
            study_params(family, params, model),
            user_attrs={vocab.ATTR_WARM_START: choice.source},
        )
    if timed:
        # the families the prior does not know keep their low-cost first point
        enqueue_low_cost_for(study, tuple(n for n in names if n not in known), model)
    run.note(
        f"warm start: the first {len(picked)} trials are configurations that did well on "
        f"{choice.describe()}"
    )
    record(run, choice.source)
    return len(picked)


def record(run: PipelineRun, source: str) -> None:
    """Where the first trials came from, on the run's result and as its tag."""
    run.result.warm_start = source
    run.logger.set_tags({vocab.TAG_OPTUNA_WARM_START: source})


def _one_per_family(
    prior: Any, known: tuple[str, ...], task: str, meta: dict[str, float]
) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    """Each family's best warm configuration, in the order of the low-cost queue."""
    picked: list[tuple[str, dict[str, Any]]] = []
    choice = None
    ordered = [f.name for f in F.registry().low_cost_queue(known)]
    ordered += [n for n in known if n not in ordered]
    for name in ordered:
        configs, choice = prior.configs(name, task, meta, 1)
        picked += [(name, params) for params in configs]
    return picked, choice


def enqueue_low_cost_for(study: optuna.Study, names: tuple[str, ...], model: str) -> int:
    """The low-cost first points of ``names``, queued after what is already waiting."""
    if not names:
        return 0
    return enqueue_low_cost(study, names, model, resumed_ok=True)


def best_configuration(
    run: PipelineRun, names: tuple[str, ...], X: Any, y: Any
) -> tuple[str, dict[str, Any], str] | None:
    """``train_model(model="auto")``'s family and configuration from the prior, and where
    it came from; None where no prior ships or it knows none of ``names``."""
    from mlpilot.platform.ml.prior import Prior, meta_features

    prior = Prior.shipped()
    task = str(run.data.task)
    known = tuple(n for n in names if prior is not None and n in prior.families(task))
    if prior is None or not known:
        return None
    picked, choice = prior.ranked(known, task, meta_features(X, y, task, seed=run.seed), 1)
    if not picked:
        return None
    family, params = picked[0]
    # as the search's objective decides whether categories reach a learner natively
    if not (run.data.feature_plan(run.seed).native and run.prefer == "cpu"):
        params = {k: v for k, v in params.items() if k != CATEGORICAL_PARAM}
    return family, params, choice.describe()
