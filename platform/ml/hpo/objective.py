"""The objective: a cross-validated score of one sampled configuration.

Folds are fixed by the seed, so every trial (in any worker) is scored on the same splits.
Preprocessing does not depend on the hyperparameters, only on whether the family needs
scaled inputs, so each fold's transformed data is computed once and reused by every trial
while it fits in ``FOLD_CACHE_BYTES``.

Pruning: after each fold but the last the running mean is reported at step
``FOLD_STEP + fold``; XGBoost and LightGBM also report their validation score every few
boosting rounds of the first fold (``boosting``). The object pickles without its caches,
so Dask can ship it to workers.

Out-of-fold output, for the ensemble: the parent keeps its best trials' in memory
(``keep_oof``); where trials run in another process (``mlpilot worker``, or a pickled copy
on Dask) ``share_oof`` stores a good trial's output in the study instead (``oof_store``).
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import families
from mlpilot.platform.ml import metrics as M
from mlpilot.platform.ml.devices import fitted_evidence, observe_model, process_engine
from mlpilot.platform.ml.hpo import boosting, oof_store, sampling
from mlpilot.platform.ml.hpo.spaces import sample
from mlpilot.platform.ml.hpo.storage import claim
from mlpilot.platform.ml.modeling import build_pipeline
from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.platform.ml.hpo.budget import SearchClock

logger = logging.getLogger(__name__)

CV_FOLDS = 3
#: a time-budgeted search on at most this many training rows scores trials on
#: ``SMALL_DATA_FOLDS`` folds: its fits are cheap, and on few rows three folds rank trials
#: (and weigh the ensemble) on noise
SMALL_DATA_ROWS = 2000
SMALL_DATA_FOLDS = 5
#: per-fold intermediate values sit above any boosting round, so the two never collide
FOLD_STEP = 10_000
FOLD_CACHE_BYTES = 512 * 2**20
#: under a time budget, a family whose trials failed this often here is skipped (pruned at
#: once) instead of ending the whole search on a run of failures
FAMILY_FAILURES = 2
#: the ensemble's candidates: at most this many kept trials of one family
KEEP_PER_FAMILY = 3


@dataclass
class Fold:
    X_train: Any
    y_train: Any
    X_valid: Any
    y_valid: Any


def search_folds(rows: int, timed: bool) -> int:
    """How many folds a search scores each trial on (``CV_FOLDS`` unless small and timed)."""
    return SMALL_DATA_FOLDS if timed and rows <= SMALL_DATA_ROWS else CV_FOLDS


def _nbytes(data: Any) -> int:
    if hasattr(data, "memory_usage"):
        usage = data.memory_usage(deep=True)
        return int(usage.sum() if hasattr(usage, "sum") else usage)
    return int(getattr(data, "nbytes", 0))


class OutOfFold:
    """One trial's out-of-fold output, filled fold by fold (``ok`` False if a fold's
    classifier saw fewer classes than the data has: its columns would not line up)."""

    def __init__(self, rows: int, n_classes: int) -> None:
        self.proba = n_classes > 0
        shape = (rows, n_classes) if self.proba else (rows,)
        self.values = np.zeros(shape, dtype=float)
        self.ok = True

    def add(self, fitted: Any, X_valid: Any, rows: Any) -> None:
        if not self.ok:
            return
        if not self.proba:
            self.values[rows] = np.asarray(fitted.predict(X_valid), dtype=float)
            return
        if not hasattr(fitted, "predict_proba"):
            self.ok = False
            return
        part = np.asarray(fitted.predict_proba(X_valid), dtype=float)
        if part.shape[1] != self.values.shape[1]:
            self.ok = False
            return
        self.values[rows] = part


class CVObjective:
    """``objective(trial)`` → the mean cross-validated ``metric`` (in its natural direction)."""

    def __init__(
        self,
        run: PipelineRun,
        *,
        model: str,
        metric: str,
        folds: int = CV_FOLDS,
        pruning: bool = True,
        clock: SearchClock | None = None,
        keep_oof: int = 0,
        share_oof: bool = False,
    ) -> None:
        from sklearn.model_selection import KFold, StratifiedKFold

        # the cheapest pipeline settles the cleaning and feature plans on the run
        run.build_pipeline(families.default(families.SETTLE).name)
        self.X, self.y = run.data.train()
        # what building a pipeline needs, without the frames (the objective pickles to Dask)
        self.data = dataclasses.replace(run.data, X=None, raw_example=None)
        self.build = {
            "seed": run.seed,
            "engine": run.engine,
            "n_jobs": run.n_jobs,
            "prefer": run.prefer,
        }
        self.model = model
        self.metric = metric
        self.pruning = pruning
        # how categorical columns reach LightGBM, XGBoost and HistGradientBoosting (one-hot
        # and target encoding, or their own category splits) is searched like any parameter;
        # the GPU path keeps the encodings (its native categories are not exercised yet)
        self.categorical = bool(run.data.feature_plan(run.seed).native) and run.prefer == "cpu"
        self.n_classes = len(run.data.classes) if run.data.classes is not None else 0
        self.sign = -1.0 if metric in M.LOWER_IS_BETTER else 1.0  # scorers maximise
        if run.data.task == "classification":
            folds = max(2, min(folds, int(self.y.value_counts().min())))
            splitter: Any = StratifiedKFold(n_splits=folds, shuffle=True, random_state=run.seed)
        else:
            splitter = KFold(n_splits=folds, shuffle=True, random_state=run.seed)
        self.splits = list(splitter.split(self.X, self.y))
        #: (scaled, native categories) → the transformed folds
        self._folds: dict[tuple[bool, bool], list[Fold]] = {}
        self._scorer: Any = None
        #: the search's deadline under a time budget: a trial that would pass it is pruned
        self.clock = clock
        #: family → mean fold fit seconds of this process's trials, scaled to every row of
        #: a fold (a trial on a cheap-first sample measured fewer: ``sampling``)
        self.fit_times: dict[str, list[float]] = {}
        #: the out-of-fold output (probabilities, or predictions) of this process's best
        #: ``keep_oof`` complete trials, by trial number (after the search, workers' stored
        #: ones pass the same rules: ``optimize._join_shared``): what the ensemble blends
        self.keep_oof = keep_oof
        self.oof: dict[int, np.ndarray] = {}
        self.oof_values: dict[int, float] = {}
        self.oof_families: dict[int, str] = {}
        #: store a good trial's output in the study (``oof_store``): set where the trials'
        #: process is not the one that blends them (``mlpilot worker``, a Dask worker)
        self.share_oof = share_oof
        self._oof_folds: str | None = None
        #: family → trials of it that raised in this process
        self.failures: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_folds"], state["_scorer"] = {}, None  # rebuilt where the trials run
        state["oof"], state["oof_values"], state["keep_oof"] = {}, {}, 0  # local trials only
        state["oof_families"] = {}
        # a copy on a Dask worker cannot hand its output back: the study's storage carries it
        state["share_oof"] = self.share_oof or self.keep_oof > 0
        return state

    @property
    def scorer(self) -> Any:
        if self._scorer is None:
            from sklearn.metrics import get_scorer

            # a name ("neg_root_mean_squared_error") or a scorer object
            self._scorer = get_scorer(
                M.sklearn_scorer(
                    self.metric, str(self.data.task), self.data.classes, self.data.positive_class
                )
            )
        return self._scorer

    def folds(self, pipeline: Any, scale: bool) -> list[Fold]:
        """The transformed folds for families that do (or do not) need scaled inputs, with
        or without native categories (the pipeline's ``categories`` step)."""
        key = (scale, "categories" in pipeline.named_steps)
        if key in self._folds:
            return self._folds[key]
        from sklearn.base import clone

        folds = []
        for train, valid in self.splits:
            prep = clone(pipeline[:-1])
            X_train = prep.fit_transform(self.X.iloc[train], self.y.iloc[train])
            folds.append(
                Fold(
                    X_train,
                    self.y.iloc[train],
                    prep.transform(self.X.iloc[valid]),
                    self.y.iloc[valid],
                )
            )
        size = sum(_nbytes(f.X_train) + _nbytes(f.X_valid) for f in folds)
        if size <= FOLD_CACHE_BYTES:
            self._folds[key] = folds
        return folds

    def _check_engine(self, trial: optuna.Trial) -> None:
        """One study, one engine: a trial is scored only where the study's engine runs
        (a Dask worker without cuml.accel cannot score a GPU study's trials)."""
        here = process_engine()
        if here != self.build["engine"]:
            raise MlpilotError(
                f"this process scores trials on the {here}, but the study runs on the "
                f"{self.build['engine']}",
                hint="start the worker with the study's engine (mlpilot worker --engine …)",
            )
        trial.set_user_attr(vocab.ATTR_ENGINE, here)

    def __call__(self, trial: optuna.Trial) -> float:
        import optuna

        claim(trial)
        self._check_engine(trial)
        family, params = sample(
            trial, self.model, str(self.data.task), self.build["prefer"], self.categorical
        )
        if self.clock is not None and self.failures.get(family, 0) >= FAMILY_FAILURES:
            raise optuna.TrialPruned(f"{family} failed {self.failures[family]} times: skipped")
        try:
            return self._score(trial, family, params)
        except optuna.TrialPruned:
            raise
        except Exception as exc:  # Optuna records the trial FAIL; count it against the family
            self.failures[family] = self.failures.get(family, 0) + 1
            logger.debug("a %s trial failed (%d so far): %s", family, self.failures[family], exc)
            raise

    def _score(self, trial: optuna.Trial, family: str, params: dict[str, Any]) -> float:
        """The mean cross-validated score of one configuration (pruned as it goes)."""
        import optuna
        from sklearn.base import clone

        pipeline = build_pipeline(self.data, family, params, **self.build)
        folds = self.folds(pipeline, families.get(family).scale_sensitive)
        # cheap first on many rows: fit on the study's sample, validate on the whole fold
        sampled = sampling.sample_folds(
            folds, sampling.trial_rows(trial), self.build["seed"], self.n_classes > 0
        )
        folds = sampled.folds
        trial.set_user_attr(vocab.ATTR_TRAIN_ROWS, sampled.rows)  # pruned trials too
        estimator = pipeline.steps[-1][1]
        booster_metric = (
            boosting.booster_metric(family, self.metric, self.n_classes) if self.pruning else None
        )
        values: list[float] = []
        fits: list[float] = []
        oof = OutOfFold(len(self.y), self.n_classes) if self.keep_oof or self.share_oof else None
        for k, fold in enumerate(folds):
            self._check_time(family, fits, sampled.share)
            started = time.perf_counter()
            if k == 0 and booster_metric:
                fitted = boosting.fit_with_pruning(estimator, fold, trial, family, booster_metric)
            else:
                fitted = clone(estimator).fit(fold.X_train, fold.y_train)
            fits.append(time.perf_counter() - started)
            if k == 0:  # where this configuration trains (the other folds train the same way)
                observe_model(pipeline[:-1])
                observe_model(fitted)
                self._send_device(trial, fitted)
            values.append(self.sign * float(self.scorer(fitted, fold.X_valid, fold.y_valid)))
            if oof is not None:
                oof.add(fitted, fold.X_valid, self.splits[k][1])
            if self.pruning and k < len(folds) - 1:
                trial.report(float(np.mean(values)), FOLD_STEP + k)
                if trial.should_prune():
                    raise optuna.TrialPruned(f"pruned after fold {k + 1} of {len(folds)}")
        fit_s = float(np.mean(fits))
        self.fit_times.setdefault(family, []).append(fit_s / sampled.share)
        trial.set_user_attr(vocab.ATTR_FIT_S, round(fit_s, 4))
        trial.set_user_attr(vocab.ATTR_FOLD_VALUES, [float(v) for v in values])
        value = float(np.mean(values))
        if oof is not None and oof.ok:
            self._keep_or_share(trial, value, oof.values, family)
        return value

    @staticmethod
    def _send_device(trial: optuna.Trial, fitted: Any) -> None:
        """A worker's trial carries where its model trained (the parent's stages cannot
        see this process); in the pipeline itself the stage records it."""
        record = fitted_evidence(fitted)
        if record is not None:
            trial.set_user_attr(vocab.ATTR_DEVICE, record)

    @property
    def oof_folds(self) -> str:
        """The fingerprint of this objective's folds (``oof_store.fingerprint``)."""
        if self._oof_folds is None:
            self._oof_folds = oof_store.fingerprint(self.y, self.splits, self.data.classes)
        return self._oof_folds

    def _keep_or_share(
        self, trial: optuna.Trial, value: float, output: np.ndarray, family: str
    ) -> None:
        if self.keep_oof:
            self._keep(trial.number, value, output, family)
        if self.share_oof:
            oof_store.share(
                trial,
                output,
                value,
                family,
                folds=self.oof_folds,
                maximize=self.metric not in M.LOWER_IS_BETTER,
                per_family=KEEP_PER_FAMILY,
            )

    def _keep(self, number: int, value: float, output: np.ndarray, family: str = "") -> None:
        """Keep this trial's out-of-fold output if it is among the best ``keep_oof``, with
        at most ``KEEP_PER_FAMILY`` of one family: the ensemble needs different models,
        not the best family's near-copies (a long search fills the top with one family)."""
        self.oof[number], self.oof_values[number] = output, value
        self.oof_families[number] = family
        groups: dict[str, list[int]] = {}
        for n in self.oof:
            groups.setdefault(self.oof_families.get(n, ""), []).append(n)
        if len(groups[family]) > KEEP_PER_FAMILY:
            pool = groups[family]
        elif len(self.oof) > self.keep_oof:  # the largest family gives way
            pool = max(groups.values(), key=len)
        else:
            return
        maximize = self.metric not in M.LOWER_IS_BETTER
        worst = (min if maximize else max)(pool, key=self.oof_values.__getitem__)
        del self.oof[worst], self.oof_values[worst], self.oof_families[worst]

    def _check_time(self, family: str, fits: list[float], share: float = 1.0) -> None:
        """Under a time budget, prune a trial whose next fold would end past the search's
        deadline (estimated from its own folds so far, else its family's earlier trials
        scaled to the ``share`` of each fold's rows this trial fits on).
        Until this process has a complete trial, nothing is pruned for time: the search
        must end with a model."""
        import optuna

        if self.clock is None or not self.fit_times:
            return
        seen = self.fit_times.get(family)
        estimate = fits[-1] if fits else (statistics.median(seen) * share if seen else 0.0)
        if not self.clock.fits(estimate):
            raise optuna.TrialPruned(
                f"out of time: the next fold needs about {estimate:.1f} s, "
                f"{max(self.clock.search_left(), 0.0):.1f} s of the search are left"
            )
