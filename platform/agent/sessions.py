"""Sessions: a conversation's messages and context (data file, target, last run, best run)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

CONTEXT_KEYS = (
    "data_path",
    "target",
    "task",
    "last_run",
    "best_run",
    "last_plan",
    "experiment",
    "metric",
)


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
