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

from mlpilot.platform.ml.hpo.early_stopping import EarlyStopping
from mlpilot.platform.ml.hpo.optimize import optimize
from mlpilot.platform.ml.hpo.spaces import auto_families, suggest_params
from mlpilot.platform.ml.hpo.storage import open_storage, reap_dead_trials, recover
from mlpilot.platform.ml.hpo.trial_log import TrialLogger
from mlpilot.platform.ml.hpo.worker import run_worker

__all__ = [
    "EarlyStopping",
    "TrialLogger",
    "auto_families",
    "open_storage",
    "optimize",
    "reap_dead_trials",
    "recover",
    "run_worker",
    "suggest_params",
]
