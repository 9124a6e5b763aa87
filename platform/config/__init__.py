"""Typed settings read from the environment (and an optional ``mlpilot.toml``)."""

from __future__ import annotations

from mlpilot.platform.config.settings import ENGINES, LLM_MODES, Settings, get_settings

__all__ = ["ENGINES", "LLM_MODES", "Settings", "get_settings"]
