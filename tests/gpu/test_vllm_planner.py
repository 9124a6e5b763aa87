"""Opt-in: the development cases planned by Nemotron Nano 9B v2 on a real vLLM server.

Serve the model as README "Local vLLM" says, then::

    MLPILOT_TEST_VLLM_BASE_URL=http://127.0.0.1:8000/v1 \\
        .venv/bin/python -m pytest -m gpu -rs tests/gpu/test_vllm_planner.py

``MLPILOT_TEST_VLLM_MODEL`` (default: the Hugging Face id vLLM serves) and
``MLPILOT_TEST_VLLM_API_KEY`` (vLLM's ``--api-key``) are optional. Without the URL the test
skips. Each plan's target and tools are compared with the offline planner's; a real model
may differ on a few cases, so most must agree, and none may leak reasoning or tool-call text
into its rationale. The scripted server reproduces these replies in
tests/integration/test_openai_planner_dev_cases.py, where every case must agree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from integration.dev_cases import load_cases, prepare, target_and_tools

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.llm.openai_planner import OpenAIPlanner

pytestmark = pytest.mark.gpu

URL = os.environ.get("MLPILOT_TEST_VLLM_BASE_URL", "")
MODEL = os.environ.get("MLPILOT_TEST_VLLM_MODEL") or "nvidia/NVIDIA-Nemotron-Nano-9B-v2"
KEY = os.environ.get("MLPILOT_TEST_VLLM_API_KEY") or "local"
AGREEMENT = 0.8  # share of cases whose target and tools must equal the offline planner's
TAGS = ("<think>", "</think>", "<toolcall>", "</toolcall>")


@pytest.fixture(scope="module", autouse=True)
def _require_vllm() -> None:
    if not URL:
        pytest.skip(
            "no vLLM endpoint: set MLPILOT_TEST_VLLM_BASE_URL to a server of "
            "nvidia/NVIDIA-Nemotron-Nano-9B-v2 (README: Local vLLM)"
        )


@pytest.mark.parametrize("reasoning", ["off", "on"])
def test_dev_cases_on_a_real_vllm_server(tmp_path: Path, reasoning: str) -> None:
    settings = Settings.from_env(
        {
            "MLPILOT_HOME": str(tmp_path / "home"),
            "MLPILOT_LLM": "openai",
            "MLPILOT_LLM_BACKEND": "vllm",
            "MLPILOT_LLM_BASE_URL": URL,
            "MLPILOT_LLM_MODEL": MODEL,
            "OPENAI_API_KEY": KEY,
            "MLPILOT_LLM_REASONING": reasoning,
            "MLPILOT_LLM_TIMEOUT": "300",
        }
    )
    planner = OpenAIPlanner(settings, tracing=False)
    agreed, report, leaks = 0, [], []
    cases = load_cases()
    for case in cases:
        prepared = prepare(case, tmp_path)
        try:
            result = planner.plan(prepared.request)
        except MlpilotError as exc:
            report.append(f"{case['id']}: {exc.one_line()}")
            continue
        got = target_and_tools(result.plan)
        if got == prepared.expected:
            agreed += 1
        else:
            report.append(f"{case['id']}: planned {got}, offline {prepared.expected}")
        if any(tag in result.plan.rationale.lower() for tag in TAGS):
            leaks.append(f"{case['id']}: {result.plan.rationale!r}")
    assert leaks == []
    assert agreed >= AGREEMENT * len(cases), "\n".join(report)
