"""What happens after every trial: progress, MLflow logging, early stopping, the budget.

``StudyMonitor`` is the single Optuna callback of a study session. It reads the study's
trials once per finished trial and from that one snapshot

- emits a ``trial`` progress event (trial n of N, its value, the best so far),
- hands the trial to the MLflow ``TrialLogger``,
- applies early stopping, and
- stops when the study's budget is used: finished plus running trials of *every* worker,
  so several workers on one study share one budget.

A Dask driver calls ``poll`` instead: it reports every trial that finished anywhere since the
last poll (the Dask workers run a monitor without logger or events).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml.hpo.budget import best_fit_s
from mlpilot.platform.ml.hpo.early_stopping import EarlyStopping
from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

    from mlpilot.platform.ml.hpo.budget import PlateauMoves, SearchClock
    from mlpilot.platform.ml.hpo.trial_log import TrialLogger

EARLY_STOP_ATTR = vocab.ATTR_EARLY_STOPPED
#: this many failed trials in a row (in one process) look like a broken setup, not bad luck
MAX_FAILED_IN_A_ROW = 5
Emit = Callable[[dict[str, Any]], None]


def _finish_key(trial: optuna.trial.FrozenTrial) -> tuple[datetime, int]:
    return (trial.datetime_complete or datetime.max, trial.number)


def _best(trials: Sequence[optuna.trial.FrozenTrial], maximize: bool) -> float | None:
    values = [t.value for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    if not values:
        return None
    return float(max(values) if maximize else min(values))


def trial_event(
    trial: optuna.trial.FrozenTrial,
    trials: Sequence[optuna.trial.FrozenTrial],
    *,
    total: int | None,
    metric: str,
    maximize: bool,
) -> dict[str, Any]:
    """The ``trial`` progress event: which trial of how many, its value, the best so far."""
    # n: this trial's place among finished trials, by completion (a poll reports several)
    mine = _finish_key(trial)
    done = [t for t in trials if t.state.is_finished() and _finish_key(t) <= mine]
    n = len(done) if trial.state.is_finished() else sum(t.state.is_finished() for t in trials)
    best = _best(done, maximize)
    # a pruned trial carries its last intermediate value: not a score to show as one
    complete = trial.state.name == "COMPLETE" and trial.value is not None
    value = float(trial.value) if complete else None
    message = f"trial {n} of {total}" if total else f"trial {n}"
    message += f": {metric} {value:.5g}" if complete else f": {trial.state.name.lower()}"
    if best is not None:
        message += f", best {best:.5g}"
    return {
        "number": trial.number,
        "state": trial.state.name,
        "value": value,
        "best": best,
        "n": n,
        "total": total,
        "metric": metric,
        "message": message,
    }


class StudyMonitor:
    """The per-trial callback; see the module docstring."""

    def __init__(
        self,
        *,
        metric: str,
        budget: int | None = None,
        stopper: EarlyStopping | None = None,
        logger: TrialLogger | None = None,
        emit: Emit | None = None,
        total: int | None = None,
        clock: SearchClock | None = None,
        moves: PlateauMoves | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.metric = metric
        self.budget = budget
        self.total = total if total is not None else budget  # "trial n of N" in events
        self.stopper = stopper
        self.logger = logger
        self.emit = emit
        self.stop_reason: str | None = None
        self.reported: set[int] = set()
        self.failed_in_a_row = 0
        #: a time budget: the search stops at the clock's deadline, and a plateau moves it on
        self.clock = clock
        self.moves = moves
        self.note = note

    def start(self, study: optuna.Study) -> None:
        """Note what finished before this session: it sets the best to beat, nothing more."""
        trials = study.get_trials(deepcopy=False)
        if self.stopper is not None:
            self.stopper.prime(trials, _maximize(study))
        self.reported = {t.number for t in trials if t.state.is_finished()}

    def worker_copy(self) -> StudyMonitor:
        """The same rules without logger or events, for trials run on Dask workers."""
        stopper = None
        if self.stopper is not None:
            stopper = EarlyStopping(
                patience=self.stopper.patience,
                min_delta=self.stopper.min_delta,
                warmup=self.stopper.warmup,
            )
        return StudyMonitor(metric=self.metric, budget=self.budget, stopper=stopper)

    # -- the Optuna callback ----------------------------------------------------------------
    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        trials = study.get_trials(deepcopy=False)
        self._report(trial, trials, _maximize(study))
        self.failed_in_a_row = self.failed_in_a_row + 1 if trial.state.name == "FAIL" else 0
        if self.failed_in_a_row >= MAX_FAILED_IN_A_ROW:
            self.stop_reason = "failures"
            study.stop()
        self.check(study, trials)

    def poll(self, study: optuna.Study) -> int:
        """Report trials that finished anywhere since the last poll; how many."""
        trials = study.get_trials(deepcopy=False)
        fresh = [t for t in trials if t.state.is_finished() and t.number not in self.reported]
        fresh.sort(key=_finish_key)
        for trial in fresh:
            self._report(trial, trials, _maximize(study))
        return len(fresh)

    def check(self, study: optuna.Study, trials: Sequence[optuna.trial.FrozenTrial]) -> None:
        if self._plateaued(study, trials) and not self._move_on(study, trials):
            self.stop_reason = "exhausted" if self.moves is not None else "early_stopping"
            study.set_user_attr(
                EARLY_STOP_ATTR,
                {
                    "after_trials": sum(t.state.is_finished() for t in trials),
                    "patience": self.stopper.patience,
                    "min_delta": self.stopper.min_delta,
                    "warmup": self.stopper.warmup,
                    "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                },
            )
            study.stop()
        if self.clock is not None:
            self.clock.update_reserve(best_fit_s(study))
            if self.moves is not None:  # a cheap-first sample grows while full trials fit
                self.moves.on_trial(study, self.clock.search_left())
            if self.clock.search_left() <= 0:
                self.stop_reason = self.stop_reason or "deadline"
                study.stop()
        if self.budget is not None:
            used = sum(t.state.name != "WAITING" for t in trials)
            if used >= self.budget:
                self.stop_reason = self.stop_reason or "budget"
                study.stop()

    def _move_on(self, study: optuna.Study, trials: Sequence[Any]) -> bool:
        """At a plateau under a time budget: queue the next move; False when none is left."""
        if self.moves is None or self.stopper is None:
            return False
        move = self.moves.next(study)
        if move is None:
            return False
        self.stopper.restart()
        if self.note is not None:
            finished = sum(t.state.is_finished() for t in trials)
            self.note(f"plateau after {finished} trials, time left: trying {move}")
        return True

    def _plateaued(self, study: optuna.Study, trials: Sequence[Any]) -> bool:
        """True once, when early stopping first decides the study is done."""
        if self.stopper is None or self.stopper.stopped:
            return False
        return self.stopper.update(trials, _maximize(study))

    def _report(
        self,
        trial: optuna.trial.FrozenTrial,
        trials: Sequence[optuna.trial.FrozenTrial],
        maximize: bool,
    ) -> None:
        if trial.number in self.reported:
            return
        self.reported.add(trial.number)
        if self.logger is not None:
            self.logger.add(trial)
        if self.emit is not None:
            self.emit(
                trial_event(trial, trials, total=self.total, metric=self.metric, maximize=maximize)
            )


def _maximize(study: Any) -> bool:
    return study.direction.name == "MAXIMIZE"
