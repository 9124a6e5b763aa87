"""Early stopping: end a study once the best value has stopped moving.

A study stops after ``patience`` consecutive finished trials that improve the best value by
less than ``min_delta``, relative to the best when that run of trials began (so a steady climb
of small steps is progress, not a plateau). Pruned trials count as trials that did not improve
it. The first ``warmup`` trials of a study are the sampler's random start-up (TPE's
``n_startup_trials``): they set the best to beat but never count toward stopping.

The rule reads every trial in storage, in the order they finished, so several workers on one
study reach the same decision; trials finished before this process joined only set the best.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

EARLY_STOP_PATIENCE = 10
EARLY_STOP_MIN_DELTA = 0.01
#: TPE's random start-up trials (optuna's default n_startup_trials)
EARLY_STOP_WARMUP = 10


def _finish_order(trial: optuna.trial.FrozenTrial) -> tuple[datetime, int]:
    return (trial.datetime_complete or datetime.max, trial.number)


@dataclass
class EarlyStopping:
    """Stop after ``patience`` consecutive trials that improve the best by less than ``min_delta``."""

    patience: int = EARLY_STOP_PATIENCE
    min_delta: float = EARLY_STOP_MIN_DELTA
    warmup: int = EARLY_STOP_WARMUP
    best: float | None = None
    #: the best value when the current run of non-improving trials began
    anchor: float | None = None
    stale: int = 0
    finished: int = 0
    stopped: bool = False
    seen: set[int] = field(default_factory=set)

    def prime(self, trials: Iterable[optuna.trial.FrozenTrial], maximize: bool) -> None:
        """Take the best value of trials that finished before this process joined."""
        for trial in trials:
            if not trial.state.is_finished() or trial.number in self.seen:
                continue
            self.seen.add(trial.number)
            self.finished += 1
            if trial.state.name == "COMPLETE" and trial.value is not None:
                value = float(trial.value)
                if self.best is None or (value > self.best if maximize else value < self.best):
                    self.best = self.anchor = value

    def update(self, trials: Iterable[optuna.trial.FrozenTrial], maximize: bool) -> bool:
        """Account for finished trials not seen yet; True once the study should stop."""
        fresh = [
            t
            for t in trials
            if t.number not in self.seen and t.state.name in ("COMPLETE", "PRUNED")
        ]
        for trial in sorted(fresh, key=_finish_order):
            self.seen.add(trial.number)
            self.observe(trial.value if trial.state.name == "COMPLETE" else None, maximize)
        return self.stopped

    def observe(self, value: float | None, maximize: bool) -> None:
        """One finished trial: its value, or None for a pruned trial."""
        self.finished += 1
        sign = 1.0 if maximize else -1.0
        if value is not None and (self.best is None or sign * (value - self.best) > 0):
            self.best = float(value)
        if value is None:
            self.stale += 1
        elif self.anchor is None:
            self.anchor, self.stale = float(value), 0  # the first value is progress by definition
        elif sign * (float(value) - self.anchor) / max(abs(self.anchor), 1e-12) > self.min_delta:
            self.anchor, self.stale = float(value), 0
        else:
            self.stale += 1
        if self.finished <= self.warmup:
            self.stale = 0  # random start-up trials are exploration, not a verdict
        if self.stale >= self.patience:
            self.stopped = True

    def restart(self) -> None:
        """Count a new plateau from here (a time-budgeted search moved on instead of ending)."""
        self.anchor, self.stale, self.stopped = self.best, 0, False

    # -- as a plain Optuna callback ---------------------------------------------------------
    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if self.update(study.get_trials(deepcopy=False), _maximize(study)):
            study.stop()


def _maximize(study: Any) -> bool:
    return study.direction.name == "MAXIMIZE"


def stopping_point(
    values: Iterable[float | None],
    maximize: bool,
    patience: int = EARLY_STOP_PATIENCE,
    min_delta: float = EARLY_STOP_MIN_DELTA,
    warmup: int = EARLY_STOP_WARMUP,
) -> int | None:
    """How many trials of this sequence (None = pruned) run before early stopping, if it stops."""
    rule = EarlyStopping(patience=patience, min_delta=min_delta, warmup=warmup)
    for count, value in enumerate(values, 1):
        rule.observe(value, maximize)
        if rule.stopped:
            return count
    return None
