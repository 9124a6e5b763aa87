"""Search spaces: which hyperparameters each model family tunes, per task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

#: what model="auto" searches across: fast, strong families that cope with any tabular data
AUTO_FAMILIES = ("hgb", "rf", "xgb", "lgbm", "linear")
#: the name of the categorical parameter that picks the family when model="auto"
FAMILY_PARAM = "family"


def suggest_family(trial: optuna.Trial, model: str) -> str:
    """The family this trial fits: fixed, or chosen by the sampler when ``model`` is auto."""
    if model == "auto":
        return str(trial.suggest_categorical(FAMILY_PARAM, list(AUTO_FAMILIES)))
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


def sample(trial: optuna.Trial, model: str, task: str) -> tuple[str, dict[str, Any]]:
    """The family and estimator parameters of one trial."""
    family = suggest_family(trial, model)
    space: Any = FamilyTrial(trial, family) if model == "auto" else trial
    return family, suggest_params(space, family, task)


def suggest_params(trial: optuna.Trial, family: str, task: str) -> dict[str, Any]:
    """The search space of one model family for ``task``, sampled through ``trial``."""
    clf = task == "classification"
    if family == "rf":
        params: dict[str, Any] = {
            "n_estimators": trial.suggest_int("n_estimators", 50, 400, log=True),
            "max_depth": trial.suggest_int("max_depth", 3, 30, log=True),
            "min_samples_leaf": trial.suggest_int("min_samples_leaf", 1, 20, log=True),
            "max_features": trial.suggest_float("max_features", 0.2, 1.0),
        }
        if clf:  # entropy often wins on imbalanced or many-class targets
            params["criterion"] = trial.suggest_categorical("criterion", ["gini", "entropy"])
        return params
    if family == "xgb":
        return {
            "n_estimators": trial.suggest_int("n_estimators", 100, 800, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
            "max_depth": trial.suggest_int("max_depth", 3, 10),
            "subsample": trial.suggest_float("subsample", 0.5, 1.0),
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.4, 1.0),
            "min_child_weight": trial.suggest_float("min_child_weight", 0.5, 20, log=True),
            "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10, log=True),
        }
    if family == "lgbm":
        return {
            "n_estimators": trial.suggest_int("n_estimators", 100, 800, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
            "num_leaves": trial.suggest_int("num_leaves", 8, 256, log=True),
            "min_child_samples": trial.suggest_int("min_child_samples", 5, 100, log=True),
            "subsample": trial.suggest_float("subsample", 0.5, 1.0),
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.4, 1.0),
            "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10, log=True),
        }
    if family == "hgb":
        return {
            "max_iter": trial.suggest_int("max_iter", 100, 600, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.02, 0.3, log=True),
            "max_leaf_nodes": trial.suggest_int("max_leaf_nodes", 8, 128, log=True),
            "min_samples_leaf": trial.suggest_int("min_samples_leaf", 5, 100, log=True),
            "l2_regularization": trial.suggest_float("l2_regularization", 1e-4, 10, log=True),
        }
    if family == "svm":
        params = {
            "C": trial.suggest_float("C", 1e-2, 1e3, log=True),
            "gamma": trial.suggest_float("gamma", 1e-4, 1.0, log=True),
        }
        if not clf:
            params["epsilon"] = trial.suggest_float("epsilon", 1e-3, 1.0, log=True)
        return params
    if family == "linear":
        if clf:
            return {"C": trial.suggest_float("C", 1e-3, 1e3, log=True)}
        return {"alpha": trial.suggest_float("alpha", 1e-3, 1e3, log=True)}
    if family == "knn":
        return {
            "n_neighbors": trial.suggest_int("n_neighbors", 1, 50, log=True),
            "weights": trial.suggest_categorical("weights", ["uniform", "distance"]),
            "p": trial.suggest_categorical("p", [1, 2]),
        }
    raise ValueError(f"no search space for model family {family!r}")


def model_params(params: dict[str, Any]) -> dict[str, Any]:
    """A trial's parameters as the estimator takes them: no family choice, no family prefix."""
    family = params.get(FAMILY_PARAM)
    if family is None:
        return dict(params)
    prefix = f"{family}."
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
