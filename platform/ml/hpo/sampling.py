"""Cheap first on many rows: trials fit on a sample of each training fold, grown with the evidence.

Under a time budget (and no trial count), a search over more than ``SAMPLE_MIN_ROWS``
training rows fits its trials on a seeded sample of ``FIRST_SAMPLE_ROWS`` rows of each
training fold (FLAML's cost-frugal search starts at 10,000 too) and scores them on the whole
validation fold: scores keep their scale and the out-of-fold output still covers every row,
which the ensemble blends. Preprocessing is still fitted on the whole training fold (it is
cached per fold and costs no trial anything). The samples are nested (one seeded order of
each fold's rows), so a larger sample adds rows to the smaller one.

The sample is study state (``vocab.ATTR_SAMPLE``), read by the objective at every trial, so
``mlpilot worker`` processes sharing the storage follow it; each trial records the rows it
trained on (``vocab.ATTR_TRAIN_ROWS``). Only the run that owns the clock grows it
(``budget.PlateauMoves``), ×``SAMPLE_GROWTH`` up to every row of the fold, when either

- the search plateaus at the current size: the first move at a plateau, since what a small
  sample could tell has been told and more rows are what most often helps next; or
- what is left of the search is down to ``GROW_ROOM`` times the cost of re-running the best
  configurations of the ``GROW_FAMILIES`` best families at a larger size (the largest size at
  which the best one still fits in the time left): past that point a search that stayed
  small would end on small samples although full-size trials of the best family still fit.

Either way those best configurations are re-queued at the new size, so the search's best is
soon measured on the rows the final model trains on.

A fit on 10,000 rows says little about one on 40,000: measured times are scaled linearly by
rows (histogram boosting and forests grow about linearly, a little more with the sort)
wherever they size later work: the objective's time pruning, the reserve for the final refit
(``budget.best_fit_s``) and the ensemble's member refits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

#: a time-budgeted search over more training rows than this starts on a sample. Below it a
#: fit's fixed costs outweigh its rows: on ggplot2movies (37,591 training rows) a LightGBM
#: fold fit took 0.36 s on 10,000 rows and 0.47 s on 25,000, so the sample saved little and
#: scored worse (60 s runs: r2 0.2624–0.2645 against 0.2625–0.2670 on every row); on
#: 200,000 rows of the sales set the sample kept a 60 s run in its budget (57 s against 72 s)
SAMPLE_MIN_ROWS = 100_000
#: the first sample: rows of each training fold (FLAML's first sample size)
FIRST_SAMPLE_ROWS = 10_000
#: each growth multiplies the sample by this much (FLAML's factor), the last one up to every row
SAMPLE_GROWTH = 4
#: the time rule grows the sample once the search's time left is at most this many times the
#: cost of re-running the best families' best configurations at the larger size: room for
#: them and about as much again for trials the sampler picks
GROW_ROOM = 2.0
#: how many of the best families' best configurations are re-queued at a new size
GROW_FAMILIES = 2
#: a trial costs more than its fits: predicting and scoring the (whole) validation folds
TRIAL_MARGIN = 1.25
#: why the sample grew (``SampleState.grown``)
WHY_PLATEAU = "plateau"
WHY_TIME = "time"


@dataclass
class SampleState:
    """The study's sample: rows of each training fold trials fit on now, and its history."""

    rows: int
    full: int  # every row of the largest training fold
    train: int  # training rows in all
    folds: int
    first: int
    #: [rows, trials finished before, why] for each growth
    grown: list[list[Any]] = field(default_factory=list)

    @property
    def sampled(self) -> bool:
        return self.rows < self.full

    def sizes(self) -> list[int]:
        """The sample sizes from the first to every row of the fold."""
        sizes, size = [], self.first
        while size < self.full:
            sizes.append(size)
            size *= SAMPLE_GROWTH
        return [*sizes, self.full]

    def larger(self) -> list[int]:
        return [s for s in self.sizes() if s > self.rows]

    def save(self, study: optuna.Study) -> None:
        study.set_user_attr(vocab.ATTR_SAMPLE, dataclasses.asdict(self))

    @classmethod
    def of(cls, attrs: dict[str, Any]) -> SampleState | None:
        value = attrs.get(vocab.ATTR_SAMPLE)
        return cls(**value) if isinstance(value, dict) else None

    def describe(self) -> str:
        """What happened, in one line (the run's note)."""
        began = (
            f"cheap first: trials began on {self.first:,} of the {self.full:,} rows of each "
            f"training fold ({self.train:,} training rows)"
        )
        if not self.grown:
            return (
                f"{began}; the sample stayed there: no full-size trial of the best family "
                "fitted in the time left. The chosen configuration is refitted on every row"
            )
        steps = ", then ".join(
            f"to {_size(rows, self.full)} after {after} trials"
            f" ({'a plateau' if why == WHY_PLATEAU else 'time left for full-size trials'})"
            for rows, after, why in self.grown
        )
        return f"{began}; the sample grew {steps}"


def _size(rows: int, full: int) -> str:
    return f"all {full:,}" if rows >= full else f"{rows:,}"


def start(
    study: optuna.Study, *, train: int, full: int, folds: int, enabled: bool
) -> SampleState | None:
    """The study's sample at the start of a search: a fresh, large, time-budgeted study
    begins on ``FIRST_SAMPLE_ROWS``; a resumed one keeps its state; otherwise every row."""
    state = SampleState.of(study.user_attrs)
    if not enabled:
        if state is not None and state.sampled:  # e.g. resumed with a trial count
            state.rows = state.full
            state.save(study)
        return None
    if state is not None:
        return state
    if train <= SAMPLE_MIN_ROWS or full <= FIRST_SAMPLE_ROWS:
        return None
    if study.get_trials(deepcopy=False):
        return None  # a resumed study that began on every row
    state = SampleState(FIRST_SAMPLE_ROWS, full, train, folds, FIRST_SAMPLE_ROWS)
    state.save(study)
    return state


def grow(study: optuna.Study, state: SampleState, rows: int, after: int, why: str) -> None:
    """Move the study to ``rows`` rows of each training fold."""
    state.rows = rows
    state.grown.append([rows, after, why])
    state.save(study)


def trial_cost(trial: Any, rows: int, state: SampleState) -> float:
    """Seconds a complete trial's configuration takes at ``rows`` rows of each fold."""
    fit_s = trial.user_attrs.get(vocab.ATTR_FIT_S)
    if fit_s is None:
        return 0.0
    seconds = to_rows(float(fit_s), trial.user_attrs.get(vocab.ATTR_TRAIN_ROWS), rows)
    return TRIAL_MARGIN * state.folds * seconds


def time_target(state: SampleState, best: list[Any], left: float) -> int | None:
    """The size the time rule grows to now (``best``: the best families' best complete
    trials, best first; ``left``: seconds of the search left), or None."""
    top = best[:GROW_FAMILIES]
    if not top:
        return None
    for size in reversed(state.larger()):
        one = trial_cost(top[0], size, state)
        room = sum(trial_cost(t, size, state) for t in top)
        if 0 < one <= left <= GROW_ROOM * room:
            return size
    return None


def to_rows(seconds: float, from_rows: Any, rows: Any) -> float:
    """``seconds`` measured on ``from_rows`` rows, scaled linearly to ``rows``."""
    if not from_rows or not rows:
        return seconds
    return seconds * float(rows) / float(from_rows)


def full_fit_s(trial: Any, attrs: dict[str, Any]) -> float | None:
    """A trial's mean fold fit time scaled to every row of a fold (``attrs``: the study's)."""
    fit_s = trial.user_attrs.get(vocab.ATTR_FIT_S)
    if fit_s is None:
        return None
    state = SampleState.of(attrs)
    full = state.full if state is not None else None
    return to_rows(float(fit_s), trial.user_attrs.get(vocab.ATTR_TRAIN_ROWS), full)


# -- in the objective -------------------------------------------------------------------------
@dataclass
class Sampled:
    """One trial's training folds, and the rows (per fold) and share of them it fits on."""

    folds: list[Any]
    rows: int
    share: float


def trial_rows(trial: Any) -> int | None:
    """The study's sample size for this trial (None: every row)."""
    study = getattr(trial, "study", None)
    state = SampleState.of(study.user_attrs) if study is not None else None
    return state.rows if state is not None and state.sampled else None


def sample_folds(folds: list[Any], rows: int | None, seed: int | None, classes: bool) -> Sampled:
    """``folds`` with each training part cut to a seeded sample of ``rows`` rows (with every
    class kept when ``classes``), the validation parts whole."""
    full = [len(f.y_train) for f in folds]
    if rows is None or rows >= max(full):
        return Sampled(folds, int(np.mean(full)), 1.0)
    out = []
    for k, fold in enumerate(folds):
        index = sample_index(fold.y_train, rows, (seed or 0, k), classes)
        out.append(
            dataclasses.replace(
                fold, X_train=_take(fold.X_train, index), y_train=_take(fold.y_train, index)
            )
        )
    used = [len(f.y_train) for f in out]
    return Sampled(out, int(np.mean(used)), float(np.sum(used)) / float(np.sum(full)))


def sample_index(y: Any, rows: int, seed: tuple[int, int], classes: bool) -> np.ndarray:
    """Positions of a seeded sample of ``rows`` of ``y``'s rows (sorted; nested across sizes:
    the first ``rows`` of one seeded order); a classifier's sample keeps one row of every
    class the fold has, or its fold's probabilities would not line up."""
    n = len(y)
    order = np.random.default_rng(list(seed)).permutation(n)
    chosen = order[: min(rows, n)]
    if classes:
        labels = np.asarray(y)
        missing = set(np.unique(labels)) - set(np.unique(labels[chosen]))
        if missing:
            extra = [next(i for i in order if labels[i] == c) for c in missing]
            chosen = np.concatenate([chosen, np.asarray(extra, dtype=chosen.dtype)])
    return np.sort(chosen)


def _take(data: Any, index: np.ndarray) -> Any:
    return data.iloc[index] if hasattr(data, "iloc") else data[index]
