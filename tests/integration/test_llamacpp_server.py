"""mlpilot's OpenAI client against llama.cpp's own server: a protocol test, not a quality one.

The scripted servers (``llm_stub``) give the shapes Nemotron servers are known to give;
this one is a real server (``llamacpp_server``: xllamacpp with Gemma 3 270M, one thread),
so the tool calls are parsed by llama.cpp itself, the follow-up turns go through its chat
template and prompt cache, and its errors are its own words. Gemma 3 270M cannot plan
mlpilot's requests: the tests check what crosses the wire and the hints errors get.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llamacpp_server import ALIAS, TOOLS_TEMPLATE, LlamaServer, assemble_model

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.llm import PlanningRequest
from mlpilot.platform.llm.openai_planner import Backoff, LLMError, OpenAIPlanner
from mlpilot.platform.ml import families
from mlpilot.platform.ml.profile import DataProfile, profile_table
from mlpilot.platform.plan.templates import builtin_templates
from mlpilot.platform.tools import ToolRegistry, default_registry, params_schema

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ASKED_MODEL = "nvidia/nvidia-nemotron-nano-9b-v2"  # llama.cpp serves its model whatever is asked
TOOLS = ("load_data", "train_model")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return assemble_model(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def server(model: Path) -> Iterator[LlamaServer]:
    with LlamaServer(model, template=TOOLS_TEMPLATE) as started:
        yield started


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> DataProfile:
    from mlpilot.platform.datasets import make_sales, write_table

    path = write_table(make_sales(200, seed=3), tmp_path_factory.mktemp("llamacpp") / "sales.csv")
    return profile_table(path)


def _plan(server: LlamaServer, profile: DataProfile, home: Path, **env: str) -> dict[str, Any]:
    """Plan "predict sales with a random forest" with two tools; the outcome and transcript."""
    settings = Settings.from_env(
        {
            "MLPILOT_HOME": str(home),
            "MLPILOT_LLM": "openai",
            "MLPILOT_LLM_BACKEND": "llamacpp",
            "MLPILOT_LLM_BASE_URL": server.base_url,
            "MLPILOT_LLM_MODEL": ASKED_MODEL,
            "MLPILOT_LLM_MAX_TOKENS": "128",
            **env,
        }
    )
    registry = default_registry()
    request = PlanningRequest(
        prompt="predict sales with a random forest",
        registry=ToolRegistry(registry.get(name) for name in TOOLS),
        templates=builtin_templates(),
        profile=profile,
        data_path=profile.path,
    )
    planner = OpenAIPlanner(
        settings, backoff=Backoff(base_s=0.01, cap_s=0.05), tracing=False, max_turns=2
    )
    try:
        result = planner.plan(request)
    except MlpilotError as exc:
        return {"error": exc, "transcript": exc.transcript}  # type: ignore[attr-defined]
    return {"result": result, "transcript": result.transcript}


def test_real_tool_calls_are_parsed_and_the_follow_up_turn_is_accepted(
    server: LlamaServer, profile: DataProfile, tmp_path: Path
) -> None:
    outcome = _plan(server, profile, tmp_path)
    transcript = outcome["transcript"]
    first, second = transcript["turns"]
    # llama.cpp parsed the call out of the model's text: it came back as tool_calls
    assert [a["status"] for a in first["attempts"]] == [200]
    assert first["finish_reason"] == "tool_calls" and first["tool_calls_from"] == "tool_calls"
    calls = [
        call["function"]
        for message in transcript["messages"]
        for call in message.get("tool_calls", [])
    ]
    assert calls and {call["name"] for call in calls} <= set(TOOLS)
    bounded = set(params_schema(families.plan_names()))
    for call in calls:
        arguments = json.loads(call["arguments"])
        assert isinstance(arguments, dict)
        # the bounded schema held the server's grammar: only known keys, nothing run on
        assert set(arguments.get("params", {})) <= bounded, arguments
    # the tool results went back and the server took them, reusing its prompt cache
    assert [a["status"] for a in second["attempts"]] == [200]
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    # no call ran on to the token limit (an unbounded params object let it); text may
    called = [turn for turn in transcript["turns"] if "tool_calls_from" in turn]
    assert called and all(turn["finish_reason"] == "tool_calls" for turn in called)
    tool_messages = [m for m in transcript["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == len(calls)
    # the model that answered is the one the server reports, not the id that was asked for
    assert transcript["served_model"] == ALIAS
    if "result" in outcome:
        assert any(ALIAS in note for note in outcome["result"].notes)
    else:  # a 270M model may plan badly; that must still be one line naming the model
        assert "\n" not in outcome["error"].one_line() and ASKED_MODEL in str(outcome["error"])


def test_a_template_that_drops_the_tools_is_named(
    model: Path, profile: DataProfile, tmp_path: Path
) -> None:
    with LlamaServer(model) as plain:  # the GGUF's own template: no tools in it
        outcome = _plan(plain, profile, tmp_path, MLPILOT_LLM_MAX_TOKENS="32")
    line = outcome["error"].one_line()
    assert "chat template does not support tools" in line and "--jinja" in line
    assert outcome["transcript"]["chat_template_caps"]["supports_tools"] is False


def test_a_context_too_small_is_named_and_not_retried(
    model: Path, profile: DataProfile, tmp_path: Path
) -> None:
    with LlamaServer(model, n_ctx=1024, template=TOOLS_TEMPLATE) as small:
        outcome = _plan(small, profile, tmp_path)
    error = outcome["error"]
    assert isinstance(error, LLMError) and error.status == 400
    assert "exceeds the available context size" in error.detail
    assert "context window" in error.one_line() and "-c 8192" in error.one_line()
    assert len(outcome["transcript"]["turns"][0]["attempts"]) == 1
