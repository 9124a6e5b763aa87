"""``BaseAdapter``: domain knowledge a pipeline applies after loading the data.

An adapter recognises its domain (from the prompt and the column names), names columns that
leak the target in that domain (recorded outcomes, post-event fields), and picks the metric
the domain cares about. Adapters read the data profile; they never run code from the data.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AdapterAdvice:
    drop: dict[str, str] = field(default_factory=dict)  # column → why it leaks
    metric: str | None = None
    notes: tuple[str, ...] = ()


def _tokens(name: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return {t for t in re.split(r"[\s_\-./]+", spaced.lower()) if t}


class BaseAdapter(abc.ABC):
    """One domain. Subclasses set the class attributes and may override ``advise``."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The adapter's name in plans (``"adapter": "finance"``); subclasses set a class attribute."""

    description: str = ""
    #: prompt words (English or Chinese) that point at the domain
    keywords: tuple[str, ...] = ()
    #: column-name words typical of the domain
    column_words: tuple[str, ...] = ()
    #: column-name words that, in this domain, describe what happened after the outcome
    leakage_words: tuple[str, ...] = ()
    classification_metric: str | None = None
    #: the metric for three or more classes, where a binary metric would be averaged by
    #: class frequency and no longer see the rare classes (None: ``classification_metric``)
    multiclass_metric: str | None = None
    regression_metric: str | None = None

    def column_evidence(self, columns: Iterable[str]) -> int:
        """How many columns have a name typical of the domain."""
        words = set(self.column_words)
        return sum(1 for column in columns if _tokens(column) & words)

    def score(self, prompt: str, columns: Iterable[str]) -> float:
        """How strongly the columns, then the request, suggest this domain (0 = not at all).

        The data decides: prompt words only add to a domain the columns already show, so
        "predict default" on churn data is not finance.
        """
        columns = list(columns)
        evidence = self.column_evidence(columns)
        if evidence == 0:
            return 0.0
        text = prompt.lower()
        hits = sum(1 for word in self.keywords if word in text)
        return evidence + 0.5 * min(hits, 2) + evidence / max(len(columns), 1)

    def leaking_columns(self, columns: Iterable[str], target: str) -> dict[str, str]:
        leaks = {}
        for column in columns:
            if column == target:
                continue
            found = _tokens(column) & set(self.leakage_words)
            if found:
                leaks[column] = (
                    f"{self.name}: '{sorted(found)[0]}' describes what happens after the outcome"
                )
        return leaks

    def metric_for(self, task: str, n_classes: int | None = None) -> str | None:
        """The domain's metric for a task (and, for classification, its number of classes)."""
        if task != "classification":
            return self.regression_metric
        if n_classes is not None and n_classes > 2 and self.multiclass_metric:
            return self.multiclass_metric
        return self.classification_metric

    def advise(
        self, columns: list[str], target: str, task: str, n_classes: int | None = None
    ) -> AdapterAdvice:
        metric = self.metric_for(task, n_classes)
        return AdapterAdvice(drop=self.leaking_columns(columns, target), metric=metric)
