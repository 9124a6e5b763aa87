"""The built-in offline planner (no LLM, no network)."""

from __future__ import annotations

from mlpilot.platform.llm.offline._planner import OfflinePlanner, asks_to_compare

__all__ = ["OfflinePlanner", "asks_to_compare"]
