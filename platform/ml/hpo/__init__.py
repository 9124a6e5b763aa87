"""Hyperparameter search with Optuna, from one laptop to many machines.

- ``optimize``: the study behind the ``optimize_model`` step (TPE, a cross-validated
  objective with pruning, early stopping, budget and timeout, trials as nested MLflow runs).
- ``run_worker``: join a study by name from any process or machine (``mlpilot worker``).
- ``open_storage`` / ``recover``: journal file or RDB storage; failing trials of dead workers.

Modules: ``spaces`` (search spaces), ``objective`` (CV objective), ``boosting`` (pruning inside
boosters), ``early_stopping``, ``monitor`` (the per-trial callback), ``trial_log``
(MLflow), ``storage``, ``spec`` (what a study stores to be continued, and the check of that
recipe), ``proxy`` (a contained pipeline's storage: JSON calls to the parent over a passed
socketpair), ``session`` (running trials here or on Dask), ``summary`` (parent run and
plots), ``worker``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlpilot.platform.ml.hpo.early_stopping import EarlyStopping
    from mlpilot.platform.ml.hpo.spaces import auto_families, suggest_params
    from mlpilot.platform.ml.hpo.storage import open_storage, reap_dead_trials, recover
    from mlpilot.platform.ml.hpo.trial_log import TrialLogger
    from mlpilot.platform.ml.hpo.worker import run_worker

#: where each public name lives: imported on first use, so that the parent, which needs only
#: ``proxy``, ``spec`` and ``storage``, does not import scikit-learn with the search (Optuna's
#: own lazy imports do the same). The search itself is ``hpo.optimize.optimize``: a lazy name
#: equal to a submodule's would turn into the module once the submodule is imported.
_HOMES = {
    "EarlyStopping": "early_stopping",
    "TrialLogger": "trial_log",
    "auto_families": "spaces",
    "open_storage": "storage",
    "reap_dead_trials": "storage",
    "recover": "storage",
    "run_worker": "worker",
    "suggest_params": "spaces",
}

__all__ = [
    "EarlyStopping",
    "TrialLogger",
    "auto_families",
    "open_storage",
    "reap_dead_trials",
    "recover",
    "run_worker",
    "suggest_params",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
