"""Search spaces: the hyperparameters each model family tunes (its ``Family.params``), per task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml import families
from mlpilot.platform.ml.modeling import CATEGORICAL_PARAM, params_of

if TYPE_CHECKING:
    import optuna

#: the name of the categorical parameter that picks the family when model="auto"
FAMILY_PARAM = "family"


def auto_families(prefer: str = "cpu") -> tuple[str, ...]:
    """What model="auto" searches across (``Family.auto_order``): fast, strong families that
    cope with any tabular data; those with a GPU path when the defaults prefer the GPU."""
    return families.auto_names(prefer)


def suggest_family(trial: optuna.Trial, model: str, prefer: str = "cpu") -> str:
    """The family this trial fits: fixed, or chosen by the sampler when ``model`` is auto."""
    if model == "auto":
        return str(trial.suggest_categorical(FAMILY_PARAM, list(auto_families(prefer))))
    return model


class FamilyTrial:
    """A trial whose parameter names carry the family ("xgb.max_depth").

    With model=auto one study holds every family: rf's and xgb's ``max_depth`` have different
    distributions (Optuna refuses that under one name), and the sampler should model each
    family's parameters on their own anyway.
    """

    def __init__(self, trial: optuna.Trial, family: str) -> None:
        self.trial = trial
        self.prefix = f"{family}."

    def suggest_int(self, name: str, *args: Any, **kwargs: Any) -> int:
        return self.trial.suggest_int(self.prefix + name, *args, **kwargs)

    def suggest_float(self, name: str, *args: Any, **kwargs: Any) -> float:
        return self.trial.suggest_float(self.prefix + name, *args, **kwargs)

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self.trial.suggest_categorical(self.prefix + name, choices)


def sample(
    trial: optuna.Trial, model: str, task: str, prefer: str = "cpu", categorical: bool = False
) -> tuple[str, dict[str, Any]]:
    """The family and estimator parameters of one trial (``categorical``: the data has
    columns a learner could take as categories, so how they are encoded is searched too)."""
    family = suggest_family(trial, model, prefer)
    space: Any = FamilyTrial(trial, family) if model == "auto" else trial
    return family, suggest_params(space, family, task, categorical=categorical)


def suggest_params(
    trial: optuna.Trial, family: str, task: str, *, categorical: bool = False
) -> dict[str, Any]:
    """The search space of one model family for ``task`` (``Family.params``), sampled."""
    params: dict[str, Any] = {}
    for param in params_of(family, task):
        if param.name == CATEGORICAL_PARAM and not categorical:
            continue  # without categorical columns the choice changes nothing
        if param.kind == "choice":
            params[param.name] = trial.suggest_categorical(param.name, list(param.choices))
        elif param.kind == "int":
            low, high = int(param.low or 0), int(param.high or 0)
            params[param.name] = trial.suggest_int(param.name, low, high, log=param.log)
        else:
            low_f, high_f = float(param.low or 0), float(param.high or 0)
            params[param.name] = trial.suggest_float(param.name, low_f, high_f, log=param.log)
    return params


def model_params(params: dict[str, Any]) -> dict[str, Any]:
    """A trial's parameters as the estimator takes them: no family choice, no family prefix."""
    family = params.get(FAMILY_PARAM)
    if family is None:
        return dict(params)
    prefix = f"{family}."
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
