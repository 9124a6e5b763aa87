"""Domain adapters (finance, medical, retail): leakage rules and metrics per domain.

``get_adapter(name)`` turns a name into an adapter (listing the valid names on error);
``detect_adapter(prompt, columns)`` suggests one for a request; plugins register under the
``mlpilot.adapters`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlpilot.adapters._base import AdapterAdvice, BaseAdapter
from mlpilot.adapters._domains import (
    BUILTIN_ADAPTERS,
    FinanceAdapter,
    MedicalAdapter,
    RetailAdapter,
)
from mlpilot.platform.errors import PlanError

__all__ = [
    "AdapterAdvice",
    "BaseAdapter",
    "FinanceAdapter",
    "MedicalAdapter",
    "RetailAdapter",
    "adapter_names",
    "detect_adapter",
    "get_adapter",
]

ENTRY_POINT_GROUP = "mlpilot.adapters"
#: columns with domain names needed before a domain is suggested (one is chance)
MIN_EVIDENCE = 2
#: how far the best domain must lead the next one
MARGIN = 0.5


def _all() -> dict[str, type[BaseAdapter]]:
    from importlib.metadata import entry_points

    found = {cls.name: cls for cls in BUILTIN_ADAPTERS}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = ep.load()
        if isinstance(cls, type) and issubclass(cls, BaseAdapter) and isinstance(cls.name, str):
            found.setdefault(cls.name, cls)
    return found


def adapter_names() -> list[str]:
    return sorted(_all())


def get_adapter(name: str) -> BaseAdapter:
    adapters = _all()
    if name not in adapters:
        raise PlanError(
            f"unknown adapter {name!r}", hint=f"valid adapters: {', '.join(sorted(adapters))}"
        )
    return adapters[name]()


def detect_adapter(prompt: str, columns: Iterable[str]) -> str | None:
    """The best-fitting adapter's name, or None when the columns show no clear domain.

    A domain needs columns that look like it (at least two, or a third of a small
    table); words in the prompt only break ties between domains the columns show.
    """
    columns = list(columns)
    scored = []
    for name, cls in _all().items():
        adapter = cls()
        evidence = adapter.column_evidence(columns)
        if evidence >= MIN_EVIDENCE or (evidence and evidence * 3 >= len(columns)):
            scored.append((adapter.score(prompt, columns), name))
    scored.sort(reverse=True)
    if not scored:
        return None
    if len(scored) > 1 and scored[0][0] - scored[1][0] < MARGIN:
        return None  # two domains fit equally: do not guess
    return scored[0][1]
