"""Planning in this process against an :class:`llm_stub.LLMStub` (tracing off, fast retries)."""

from __future__ import annotations

from pathlib import Path

from llm_stub import LLMStub

from mlpilot.platform.config import Settings
from mlpilot.platform.llm import PlanningRequest, PlanResult
from mlpilot.platform.llm.openai_planner import Backoff, OpenAIPlanner

KEY = "test-key"
FAST = Backoff(base_s=0.01, cap_s=0.05)
TAGS = ("<think>", "</think>", "<TOOLCALL>", "</TOOLCALL>")


def settings_for(stub: LLMStub, home: Path, model: str, **extra: str) -> Settings:
    """Settings pointing at ``stub``; the developer's own LLM variables are kept out."""
    stub.expect_reasoning = extra.get("MLPILOT_LLM_REASONING") or "off"
    env = {
        "MLPILOT_HOME": str(home),
        "MLPILOT_LLM": "openai",
        "MLPILOT_LLM_BASE_URL": stub.base_url,
        "MLPILOT_LLM_MODEL": model,
        "NVIDIA_API_KEY": KEY,
    }
    return Settings.from_env({**env, **extra})


def plan_with(
    stub: LLMStub, request: PlanningRequest, home: Path, model: str, **extra: str
) -> PlanResult:
    planner = OpenAIPlanner(settings_for(stub, home, model, **extra), backoff=FAST, tracing=False)
    return planner.plan(request)
