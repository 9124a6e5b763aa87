"""Sessions: a conversation's messages and context (data file, target, model family, its
runs, last run, best run)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

CONTEXT_KEYS = (
    "data_path",
    "target",
    "task",
    "last_run",
    "best_run",
    "last_plan",
    "experiment",
    "metric",
    "model",
    "runs",
)
#: runs a session remembers (oldest dropped first)
MAX_RUNS = 50


@dataclass
class Session:
    id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls) -> Session:
        return cls(id=uuid.uuid4().hex[:12])

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Session:
        return cls(
            id=doc["_id"],
            messages=list(doc.get("messages", [])),
            context=dict(doc.get("context", {})),
        )

    def add(self, role: str, content: str, run_id: str | None = None) -> None:
        self.messages.append({"role": role, "content": content, "run_id": run_id})

    def remember(self, **values: Any) -> None:
        self.context.update(
            {k: v for k, v in values.items() if k in CONTEXT_KEYS and v is not None}
        )

    def record_run(self, outcome: Any, plan: Any) -> None:
        """Add a finished run to the session's runs; update its model family and best run.

        "Which run was best?" and "register the best one" both answer from these runs, so
        they agree; the best is ranked like ``show_best_model`` ranks (see ``best_entry``).
        """
        from mlpilot.platform.tools.queries import best_entry

        family = _model_family(plan)
        entry = {
            "run_id": outcome.run_id,
            "status": outcome.status,
            "metric": outcome.main_metric,
            "metrics": {k: v for k, v in outcome.metrics.items() if k.startswith("test_")},
            "model_uri": outcome.model_uri,
            "model": family,
            "template": getattr(plan, "template", None),
        }
        runs = [r for r in self.context.get("runs") or [] if r.get("run_id") != outcome.run_id]
        self.context["runs"] = [*runs, entry][-MAX_RUNS:]
        if family and outcome.status == "SUCCEEDED":
            self.context["model"] = family
        best = best_entry(self.context["runs"])
        if best is not None:
            self.context["best_run"] = {
                "run_id": best["run_id"],
                "metric": best["metric"],
                "value": best["metrics"][f"test_{best['metric']}"],
                "model_uri": best["model_uri"],
            }
        log.debug("session %s: %d runs, best %s", self.id, len(runs) + 1, best)


def _model_family(plan: Any) -> str | None:
    """The model family a plan trains or tunes ("knn"), or None when it trains none."""
    for tool in ("optimize_model", "train_model"):
        step = plan.step(tool) if plan is not None else None
        if step is not None and step.args.get("model"):
            return str(step.args["model"])
    return None


def load_session(store: Any, session_id: str | None) -> Session:
    """The stored session ``session_id`` (error if unknown), or a new one."""
    if session_id is None:
        return Session.new()
    from mlpilot.platform.errors import MlpilotError

    doc = store.get_session(session_id)
    if doc is None:
        raise MlpilotError(
            f"no session {session_id!r}", hint="start one with mlpilot chat, or omit --session"
        )
    return Session.from_doc(doc)


def save_session(store: Any, session: Session) -> None:
    store.save_session(session.id, session.messages, session.context)
