"""A time budget for the whole run, and what a budgeted search does at a plateau.

``optimize_model(timeout_s=N)`` bounds the run from the request's start (``mlpilot run``
invoked; ``protocol.ENV_RUN_STARTED_AT``) to the command's exit. ``SearchClock`` turns that
into the search's own deadline: the run's deadline minus a reserve for what still follows
the search (refitting the chosen configuration on every training row, scoring it, the
importance, logging the model, the parent's recording). The reserve grows with the best
trial's measured fit time, so a slow winner leaves itself the time to be refitted.

With a time budget a plateau is not the end (``PlateauMoves``): the search moves on — to a
larger sample of the training rows while trials still fit on a sample (below), then to a
model family that has had few trials, then to the best configuration grown (more boosting
rounds or trees at a smaller learning rate), then each family's best grown the same way,
then more trials inside the best families — and stops early only when nothing of that is
left, saying so. A trial-count budget keeps plain early stopping.

Cheap first, in configurations and in rows, as FLAML's cost-frugal search: a fresh budgeted
search starts with one small, fast configuration per family (``Family.low_cost``, FLAML's
low-cost initial points), and on more than ``sampling.SAMPLE_MIN_ROWS`` training rows its
trials fit on a sample of 10,000 rows of each training fold (validated on the whole fold).
The sample grows ×4 up to every row at a plateau, or once the time left is down to about
twice what re-running the best families' best configurations at the larger size costs
(``PlateauMoves.on_trial``; the rule and its reasons are in ``sampling``): a short budget
ends with a sound model, and the search does not end on small samples while full-size
trials of the best family still fit. Times measured on a sample are scaled to every row
wherever they size later work (``best_fit_s``, the reserve for the final refit).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlpilot.platform.ml import families
from mlpilot.platform.ml.hpo import sampling
from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM, model_params
from mlpilot.platform.ml.modeling import label_of, params_of
from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

#: seconds kept for what follows any search: scoring, importance, the refit on every row,
#: logging the model to MLflow, the result, the child's exit and the parent's recording
#: (measured: 2–4 s on 2 cores; up to twice that while other work loads the machine, when
#: 4 s left no room for the refit on every row)
FINISH_BASE_S = 6.0
#: of which what follows the final model (scoring, cheap importance, logging, recording)
AFTER_MODEL_S = 2.5
#: and a share of the budget on top (a busy machine slows all of it down)
FINISH_SHARE = 0.04
#: a time budget this long (seconds) draws the study's plots, and keeps this long for them;
#: a shorter one skips them (they take seconds: Plotly and matplotlib figures, fANOVA)
PLOTS_MIN_BUDGET_S = 300.0
PLOTS_RESERVE_S = 10.0
#: refitting on every training row costs this many of the best trial's fold fits
#: (k/(k-1) more rows at 3 folds, plus the preprocessing and a margin)
REFIT_FOLDS = 2.0
#: and the ensemble's other members about as many again (``ml/ensemble.py``)
ENSEMBLE_REFITS = 1
#: then the chosen model refitted on every row of the file, the test rows included
#: (``steps._model.AllRowsRefit``): about as many fold fits again
ALL_ROWS_REFIT_FOLDS = 2.0
#: a family with fewer complete trials than this gets one more at a plateau
MIN_FAMILY_TRIALS = 3
#: how far the best configuration is grown: rounds ×2 and learning rate ÷2 each time
GROW_FACTOR = 2.0
#: at a plateau with nothing to grow: this many trials inside one of the best families ...
FOCUS_TRIALS = 5
#: ... the best this many families, each at most this many times
FOCUS_FAMILIES = 2
FOCUS_ROUNDS = 20


@dataclass
class SearchClock:
    """The run's deadline (wall clock) and the share of it the search may use."""

    deadline: float
    budget_s: float
    reserve_s: float = FINISH_BASE_S

    @classmethod
    def for_run(cls, started_at: float, budget_s: float) -> SearchClock:
        clock = cls(deadline=started_at + budget_s, budget_s=budget_s)
        clock.update_reserve(None)
        return clock

    def update_reserve(self, best_fit_s: float | None) -> None:
        """The time kept after the search, given the best trial's mean fold fit time."""
        folds = REFIT_FOLDS + ALL_ROWS_REFIT_FOLDS
        refit = folds * (1 + ENSEMBLE_REFITS) * best_fit_s if best_fit_s else 0.0
        plots = PLOTS_RESERVE_S if self.plots else 0.0
        self.reserve_s = FINISH_BASE_S + FINISH_SHARE * self.budget_s + refit + plots

    @property
    def plots(self) -> bool:
        """Whether the budget leaves room for the study's plots."""
        return self.budget_s >= PLOTS_MIN_BUDGET_S

    @property
    def search_deadline(self) -> float:
        return self.deadline - self.reserve_s

    def search_left(self, now: float | None = None) -> float:
        return self.search_deadline - (time.time() if now is None else now)

    def fits(self, seconds: float, now: float | None = None) -> bool:
        """Whether ``seconds`` more of searching ends before the search's deadline."""
        return self.search_left(now) >= seconds

    def unused_share(self, now: float | None = None) -> float:
        """The share of the budget the search left unused when it ended now."""
        return max(0.0, self.search_left(now)) / self.budget_s


def best_fit_s(study: optuna.Study) -> float | None:
    """The best complete trial's mean fold fit time, if measured, scaled to every row of a
    fold when it fitted on a cheap-first sample (the final refit fits on every row)."""
    try:
        best = study.best_trial
    except ValueError:  # no complete trial yet
        return None
    return sampling.full_fit_s(best, study.user_attrs)


def enqueue_low_cost(
    study: optuna.Study, names: tuple[str, ...], model: str, *, resumed_ok: bool = False
) -> int:
    """Queue one cheap configuration per family at the start of a fresh study; how many
    (``resumed_ok``: after trials already queued, as a warm start's are)."""
    if not resumed_ok and study.get_trials(deepcopy=False):
        return 0  # a resumed study: its trials already measured what is cheap
    queued = 0
    # each family's small, fast first configuration (``Family.low_cost``), in the order of
    # its ``priority``; the rest of its parameters is sampled
    for family in families.registry().low_cost_queue(names):
        study.enqueue_trial(study_params(family.name, dict(family.low_cost or {}), model))
        queued += 1
    return queued


def study_params(family: str, params: dict[str, Any], model: str) -> dict[str, Any]:
    """Fixed parameters as the study names them (``family.param`` when model=auto)."""
    if model != "auto":
        return dict(params)
    return {FAMILY_PARAM: family, **{f"{family}.{k}": v for k, v in params.items()}}


@dataclass
class PlateauMoves:
    """What a time-budgeted search tries when it reaches a plateau, in order."""

    model: str
    families: tuple[str, ...]
    task: str
    done: list[str] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)
    focused: Counter[str] = field(default_factory=Counter)

    def next(self, study: optuna.Study) -> str | None:
        """Queue the next move and describe it; None when nothing is left to try."""
        trials = study.get_trials(deepcopy=False)
        complete, ranked = self._ranked(study, trials)
        finished = sum(t.state.is_finished() for t in trials)
        move = (
            self._larger_sample(study, ranked, finished)
            or self._next_family(study, complete)
            or self._grow(study, ranked)
            or self._focus(study, ranked)
        )
        if move is not None:
            self.done.append(move)
            study.set_user_attr(vocab.ATTR_MOVES, list(self.done))
        return move

    def on_trial(self, study: optuna.Study, left_s: float) -> str | None:
        """After each trial: grow the study's sample when the time rule says so
        (``sampling.time_target``) and describe it; else None."""
        state = sampling.SampleState.of(study.user_attrs)
        if state is None or not state.sampled:
            return None
        trials = study.get_trials(deepcopy=False)
        _, ranked = self._ranked(study, trials)
        size = sampling.time_target(state, [t for _, t in ranked], left_s)
        if size is None:
            return None
        finished = sum(t.state.is_finished() for t in trials)
        return self._resample(study, state, ranked, size, finished, sampling.WHY_TIME)

    def _ranked(
        self, study: optuna.Study, trials: list[Any]
    ) -> tuple[list[Any], list[tuple[str, Any]]]:
        """The complete ``trials``, and each family's best of them, the best family first."""
        complete = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
        return complete, _family_bests(complete, self.model, study.direction.name == "MAXIMIZE")

    def _larger_sample(
        self, study: optuna.Study, ranked: list[tuple[str, Any]], finished: int
    ) -> str | None:
        """At a plateau on a sample: the next sample size (what the small one could tell
        has been told; more rows are what most often helps next)."""
        state = sampling.SampleState.of(study.user_attrs)
        if state is None or not state.sampled:
            return None
        size = state.larger()[0]
        return self._resample(study, state, ranked, size, finished, sampling.WHY_PLATEAU)

    def _resample(
        self,
        study: optuna.Study,
        state: sampling.SampleState,
        ranked: list[tuple[str, Any]],
        rows: int,
        finished: int,
        why: str,
    ) -> str:
        """Move the study to ``rows`` rows of each fold and re-queue the best families' best
        configurations there: the search's best is soon measured on rows like the final fit's."""
        sampling.grow(study, state, rows, finished, why)
        for family, best in ranked[: sampling.GROW_FAMILIES]:
            params = study_params(family, model_params(best.params), self.model)
            study.enqueue_trial(params, skip_if_exists=False)
        size = "every row" if rows >= state.full else f"{rows:,} rows"
        return f"a larger sample: {size} of each training fold"

    def _next_family(self, study: optuna.Study, complete: list[Any]) -> str | None:
        if self.model != "auto":
            return None
        counts = Counter(t.params.get(FAMILY_PARAM) for t in complete)
        for family in self.families:
            key = f"family:{family}:{counts[family]}"
            if counts[family] < MIN_FAMILY_TRIALS and key not in self.tried:
                self.tried.add(key)
                study.enqueue_trial({FAMILY_PARAM: family})
                return f"another family: {label_of(family)}"
        return None

    def _grow(self, study: optuna.Study, ranked: list[tuple[str, Any]]) -> str | None:
        """The best configuration of the best family that can still grow, grown."""
        for family, best in ranked:
            grown = grow(family, model_params(best.params), self.task)
            if grown is None:
                continue
            key = f"grow:{family}:{sorted(grown.items())}"
            if key in self.tried:
                continue
            self.tried.add(key)
            study.enqueue_trial(study_params(family, grown, self.model))
            rounds = families.get(family).rounds
            return f"the best {label_of(family)} grown to {rounds}={grown[rounds]}"
        return None

    def _focus(self, study: optuna.Study, ranked: list[tuple[str, Any]]) -> str | None:
        """More trials inside one of the best families (the sampler picks their parameters)."""
        for family, _ in ranked[:FOCUS_FAMILIES]:
            if self.focused[family] >= FOCUS_ROUNDS:
                continue
            self.focused[family] += 1
            fixed = {FAMILY_PARAM: family} if self.model == "auto" else {}
            for _ in range(FOCUS_TRIALS):
                study.enqueue_trial(fixed, skip_if_exists=False)
            return f"{FOCUS_TRIALS} more trials of {label_of(family)}"
        return None


def _family_bests(complete: list[Any], model: str, maximize: bool) -> list[tuple[str, Any]]:
    """Each family's best complete trial, the best family first."""
    bests: dict[str, Any] = {}
    for trial in complete:
        family = str(trial.params.get(FAMILY_PARAM, model))
        current = bests.get(family)
        better = current is None or (
            trial.value > current.value if maximize else trial.value < current.value
        )
        if better:
            bests[family] = trial
    return sorted(bests.items(), key=lambda kv: -kv[1].value if maximize else kv[1].value)


def grow(family: str, params: dict[str, Any], task: str) -> dict[str, Any] | None:
    """``params`` with more rounds (×2) at a smaller rate (÷2), inside the search space;
    None when the family has no rounds or they are at the top of the space already."""
    spec = families.get(family)
    rounds = spec.rounds
    if rounds is None or rounds not in params:
        return None
    space = {p.name: p for p in params_of(family, task)}
    high = int(space[rounds].high or 0)
    current = int(params[rounds])
    if current >= high:
        return None
    grown = dict(params)
    grown[rounds] = min(high, int(current * GROW_FACTOR))
    rate = spec.rate
    if rate and rate in params:
        low = float(space[rate].low or 0)
        grown[rate] = max(low, float(params[rate]) / GROW_FACTOR)
    return grown
