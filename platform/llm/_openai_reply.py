"""Reading one model turn as real Nemotron servers send it.

The same model reaches mlpilot in several shapes. Hosted NIM and vLLM with the Nemotron tool
parser return ``tool_calls``; vLLM without the parser (or a parser that gave up on broken
JSON) leaves the model's ``<TOOLCALL>[…]</TOOLCALL>`` text in ``content``. Reasoning comes as
``reasoning_content`` (NIM), ``reasoning`` (recent vLLM) or, with no reasoning parser, inside
``content`` ending in ``</think>`` with no opening tag (the template wrote it). A reply that
hit ``max_tokens`` ends with ``finish_reason: "length"``, wherever it was cut.

:func:`read_reply` turns all of these into one :class:`Reply`; nothing here talks HTTP.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from mlpilot.platform.llm._openai_messages import split_thinking

logger = logging.getLogger(__name__)

_BLOCK = re.compile(r"<TOOLCALL>(.*?)</TOOLCALL>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(r"<TOOLCALL>", re.IGNORECASE)
REASONING_FIELDS = ("reasoning_content", "reasoning")


class UnreadableCalls(ValueError):
    """``<TOOLCALL>`` text that is not a list of calls; the text is written for the model."""


@dataclass
class Reply:
    """One assistant turn, normalised. ``calls`` keep the model's raw argument text."""

    text: str  # the answer: no reasoning, no tool-call text
    calls: list[dict[str, str]] = field(default_factory=list)  # id, name, arguments (raw)
    reasoning: str | None = None
    finish_reason: str | None = None
    raw_content: str | None = None
    source: str = "none"  # where the calls came from: tool_calls, content or none
    unreadable: str | None = None  # why <TOOLCALL> text could not be read

    @property
    def cut(self) -> bool:
        return self.finish_reason == "length"


def wire_arguments(raw: str) -> str:
    """Arguments safe to send back: vLLM ``json.loads`` every resent call (400 otherwise).

    Valid JSON objects go back as they came; anything else goes back as ``{}`` (the model
    is told in the tool's answer what was wrong, and the transcript keeps the raw text).
    """
    try:
        value = json.loads(raw) if raw and raw.strip() else {}
    except json.JSONDecodeError:
        return "{}"
    return raw if isinstance(value, dict) and raw.strip() else "{}"


def parse_toolcall_text(content: str, turn: int) -> tuple[list[dict[str, str]], str]:
    """The calls in Nemotron's ``<TOOLCALL>[{"name": …, "arguments": …}]</TOOLCALL>`` text.

    Returns the calls and the text outside the blocks; raises :class:`UnreadableCalls` when
    a block is not closed (cut off) or is not a JSON list of named calls.
    """
    blocks = _BLOCK.findall(content)
    if len(_OPEN.findall(content)) > len(blocks):
        raise UnreadableCalls("a <TOOLCALL> block is not closed with </TOOLCALL>")
    calls: list[dict[str, str]] = []
    for block in blocks:
        text = block.strip()
        # the Nemotron parser accepts a list without its brackets; so do we
        text = text if text.startswith("[") else f"[{text}"
        text = text if text.endswith("]") else f"{text}]"
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UnreadableCalls(
                f"the <TOOLCALL> text is not valid JSON ({exc.msg} at character {exc.pos})"
            ) from None
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise UnreadableCalls('each call in <TOOLCALL> needs a "name" and "arguments"')
            args = item.get("arguments", {})
            raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            n = len(calls)
            calls.append({"id": f"call_{turn}_{n}", "name": item["name"], "arguments": raw})
    return calls, _BLOCK.sub("", content)


def _reasoning(message: Any) -> str | None:
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = getattr(message, name, None) or extra.get(name)
        if value:
            return str(value)
    return None


def _structured_calls(message: Any, turn: int) -> list[dict[str, str]]:
    calls = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        calls.append(
            {
                "id": getattr(call, "id", None) or f"call_{turn}_{i}",
                "name": getattr(function, "name", "") or "",
                "arguments": getattr(function, "arguments", "") or "",
            }
        )
    return calls


def read_reply(message: Any, finish_reason: str | None, turn: int) -> Reply:
    """The turn as mlpilot uses it, whichever way the server shaped it."""
    content = getattr(message, "content", None)
    thought, answer = split_thinking(content)
    reasoning = _reasoning(message) or thought or None
    reply = Reply(
        text=answer, reasoning=reasoning, finish_reason=finish_reason, raw_content=content
    )
    reply.calls = _structured_calls(message, turn)
    if reply.calls:
        reply.source = "tool_calls"
        reply.text = _BLOCK.sub("", answer)  # a server may echo the text it parsed
    elif _OPEN.search(answer):
        try:
            reply.calls, reply.text = parse_toolcall_text(answer, turn)
            reply.source = "content"
        except UnreadableCalls as exc:
            reply.unreadable = str(exc)
            logger.info("turn %d: unreadable <TOOLCALL> text: %s", turn, exc)
    reply.text = reply.text.strip()
    return reply
