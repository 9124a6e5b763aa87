"""``Prior``: the warm-start configurations for a data set, from the shipped build.

The build (``benchmarks/build_prior.py``) scored one pool of candidate configurations per
family and task on many data sets; for each it stores the meta-features and every
candidate's regret (0: the best of all candidates on that data set, 1: the worst or
failed). Two uses, as in auto-sklearn 2.0 and FLAML's zero-shot AutoML:

- **portfolio**: candidates chosen greedily so that, together, they come close to the best
  on as many data sets as possible (the next one is the one that lowers the mean of the
  best regret so far the most);
- **nearest data sets**: the same greedy choice over the data sets whose meta-features are
  nearest this one's; a data set farther from every known one than the known ones are from
  each other falls back to the portfolio.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from mlpilot.platform.ml.prior._meta import NAMES

logger = logging.getLogger(__name__)

#: the data sets a new one is matched with
NEIGHBOURS = 8
#: a data set is "far" past this quantile of the known sets' distances to their nearest
FAR_QUANTILE = 0.95
#: the package data file the build writes
DATA_FILE = "prior.json"


def regrets(scores: dict[str, list[float | None]]) -> dict[str, list[float]]:
    """One data set's scores (greater is better, None: failed), per family, as regrets in
    [0, 1] against every candidate of every family on that data set."""
    values = [v for vals in scores.values() for v in vals if v is not None]
    if not values:
        return {f: [1.0] * len(vals) for f, vals in scores.items()}
    best, worst = max(values), min(values)
    span = best - worst or 1.0
    return {
        f: [1.0 if v is None else (best - v) / span for v in vals] for f, vals in scores.items()
    }


@dataclass(frozen=True)
class Choice:
    """Where the configurations came from, for the run's note and record."""

    source: str  # "nearest" or "portfolio"
    neighbours: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.source == "portfolio":
            return "the portfolio (no known data set is near this one)"
        return "the data sets nearest this one (" + ", ".join(self.neighbours[:3]) + ", …)"


class Prior:
    """The shipped build, read once; ``configs`` answers per family and data set."""

    def __init__(self, doc: dict[str, Any]) -> None:
        if list(doc.get("meta_features", [])) != list(NAMES):
            raise ValueError("the prior was built with other meta-features: rebuild it")
        self.built = dict(doc.get("built", {}))
        self.candidates: dict[str, dict[str, list[dict[str, Any]]]] = doc["candidates"]
        self.sets = list(doc["datasets"])

    @classmethod
    def shipped(cls) -> Prior | None:
        """The prior in the package, or None where none ships."""
        return _shipped()

    def families(self, task: str) -> tuple[str, ...]:
        return tuple(self.candidates.get(task, {}))

    def configs(
        self, family: str, task: str, meta: dict[str, float], n: int
    ) -> tuple[list[dict[str, Any]], Choice]:
        """Up to ``n`` configurations of ``family`` to start a search of ``task`` with."""
        picked, choice = self.ranked((family,), task, meta, n)
        return [params for _, params in picked], choice

    def ranked(
        self, families: tuple[str, ...], task: str, meta: dict[str, float], n: int
    ) -> tuple[list[tuple[str, dict[str, Any]]], Choice]:
        """Up to ``n`` (family, configuration) pairs across ``families``, best first."""
        pool = [
            (f, i) for f in families for i in range(len(self.candidates.get(task, {}).get(f, [])))
        ]
        sets = [
            s for s in self.sets if s["task"] == task and all(f in s["regret"] for f in families)
        ]
        if not pool or not sets:
            return [], Choice("portfolio")
        choice, chosen_sets = self._nearest(sets, meta)
        matrix = np.array([[s["regret"][f][i] for f, i in pool] for s in chosen_sets])
        # regrets within this choice of families: 0 is the best of them on that data set
        low, high = matrix.min(axis=1, keepdims=True), matrix.max(axis=1, keepdims=True)
        matrix = (matrix - low) / np.where(high > low, high - low, 1.0)
        order = _greedy(matrix, n)
        return [
            (pool[j][0], dict(self.candidates[task][pool[j][0]][pool[j][1]])) for j in order
        ], choice

    def _nearest(self, sets: list[dict[str, Any]], meta: dict[str, float]) -> tuple[Choice, list]:
        known = np.array([s["meta"] for s in sets], dtype=float)
        mean, std = known.mean(axis=0), known.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        scaled = (known - mean) / std
        here = (np.array([meta.get(k, 0.0) for k in NAMES], dtype=float) - mean) / std
        distance = np.linalg.norm(scaled - here, axis=1)
        if len(sets) <= NEIGHBOURS or distance.min() > _far(scaled):
            return Choice("portfolio"), sets
        nearest = np.argsort(distance)[:NEIGHBOURS]
        return Choice("nearest", tuple(sets[i]["name"] for i in nearest)), [
            sets[i] for i in nearest
        ]


def _far(scaled: np.ndarray) -> float:
    """How far a known data set's nearest other one is, at ``FAR_QUANTILE``."""
    gaps = np.linalg.norm(scaled[:, None, :] - scaled[None, :, :], axis=2)
    np.fill_diagonal(gaps, np.inf)
    return float(np.quantile(gaps.min(axis=1), FAR_QUANTILE))


def _greedy(regret: np.ndarray, n: int) -> list[int]:
    """auto-sklearn 2.0's portfolio: columns chosen one by one, each lowering the mean over
    the rows of the best regret so far the most (ties: the lower mean regret alone)."""
    chosen: list[int] = []
    best = np.full(regret.shape[0], np.inf)
    alone = regret.mean(axis=0)
    for _ in range(min(n, regret.shape[1])):
        gain = np.minimum(best[:, None], regret).mean(axis=0)
        gain[chosen] = np.inf
        pick = int(np.lexsort((alone, gain))[0])
        chosen.append(pick)
        best = np.minimum(best, regret[:, pick])
    return chosen


@functools.cache
def _shipped() -> Prior | None:
    source = resources.files("mlpilot.platform.ml.prior").joinpath("data", DATA_FILE)
    if not source.is_file():
        return None
    try:
        return Prior(json.loads(source.read_text()))
    except (ValueError, KeyError) as exc:
        logger.warning("the shipped warm-start prior is unreadable: %s", exc)
        return None
