"""The OpenAI-compatible planner against the shapes real Nemotron servers give a reply.

Each test starts ``llm_stub.LLMStub`` in a mode (hosted NIM, vLLM with or without the
Nemotron tool parser or a reasoning parser), usually strict (refusing what vLLM refuses),
and talks to it through the real ``openai`` client. After each test every request the stub
received must have rendered through the model card's chat template with the reasoning
switch the test set (``stub.expect_reasoning``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from llm_stub import (
    AUTO_REFUSED,
    SERVED_MODEL,
    LLMStub,
    cut,
    raw,
    system_prompt,
    text,
    tool_calls,
    tool_results,
    user_messages,
)
from planning import TAGS, plan_with

from mlpilot.platform.llm import PlanningRequest, PlanResult
from mlpilot.platform.llm.openai_planner import LLMError
from mlpilot.platform.ml.profile import DataProfile, profile_table
from mlpilot.platform.plan.templates import builtin_templates
from mlpilot.platform.tools import default_registry

pytestmark = pytest.mark.integration

LOAD_AND_FIT = tool_calls(("load_data", {"target": "sales"}), ("train_model", {"model": "rf"}))
DONE = "Load the sales data and fit a random forest."
THINKING = "The user wants sales predicted; a random forest on the sales column."
AFTERTHOUGHT = "Both tools were accepted, so the plan is complete."
StubFactory = Callable[..., LLMStub]


@pytest.fixture
def make_stub() -> Iterator[StubFactory]:
    """Started stubs; each must have rendered every request with the expected switch."""
    stubs: list[LLMStub] = []

    def start(mode: str = "vllm", **kwargs: Any) -> LLMStub:
        stubs.append(LLMStub(mode, **{"strict": True, **kwargs}).start())
        return stubs[-1]

    yield start
    for stub in stubs:
        stub.stop()
    for stub in stubs:
        assert stub.template_problems() == []


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> DataProfile:
    from mlpilot.platform.datasets import make_sales, write_table

    path = write_table(make_sales(300, seed=3), tmp_path_factory.mktemp("servers") / "sales.csv")
    return profile_table(path)


def _request(profile: DataProfile | None, prompt: str = "predict sales with a random forest"):
    return PlanningRequest(
        prompt=prompt,
        registry=default_registry(),
        templates=builtin_templates(),
        profile=profile,
        data_path=profile.path if profile else None,
    )


def _plan(stub: LLMStub, profile: DataProfile | None, tmp_path: Path, **env: str) -> PlanResult:
    return plan_with(stub, _request(profile), tmp_path / "home", SERVED_MODEL, **env)


def _assistant_turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


def _clean(rationale: str) -> bool:
    return not any(tag.lower() in rationale.lower() for tag in TAGS)


# -- <TOOLCALL> text in content ---------------------------------------------------------------
def test_vllm_without_a_tool_parser_is_asked_with_none_and_its_text_is_parsed(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm-noparser")
    stub.script(LOAD_AND_FIT, text(DONE))
    result = _plan(stub, profile, tmp_path)
    assert stub.rejected == [(400, AUTO_REFUSED)]  # the first ask, with tool_choice auto
    assert [r["tool_choice"] for r in stub.requests] == ["auto", "none", "none"]
    assert result.plan.tools == ["load_data", "train_model"]
    assert result.plan.step("train_model").args["model"] == "rf"
    assert result.plan.rationale == DONE
    transcript = result.transcript or {}
    assert transcript["tool_parsing"].startswith("mlpilot")
    assert transcript["turns"][0]["tool_calls_from"] == "content"
    assert "<TOOLCALL>" in transcript["turns"][0]["raw_content"]  # the raw text is kept
    (turn,) = _assistant_turns(stub.requests[-1])  # sent back as a structured call
    assert turn["content"] == "" and "<TOOLCALL>" not in turn["content"]
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["load_data", "train_model"]


def test_toolcall_text_after_a_good_turn_is_never_the_final_answer(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm")
    broken = '<TOOLCALL>[{"name": "evaluate_model", "arguments": {"cv_folds": 3,}}]</TOOLCALL>'
    stub.script(
        LOAD_AND_FIT, raw(broken), tool_calls(("evaluate_model", {"cv_folds": 3})), text(DONE)
    )
    result = _plan(stub, profile, tmp_path)
    assert result.plan.tools == ["load_data", "train_model", "evaluate_model"]
    assert result.plan.rationale == DONE and _clean(result.plan.rationale)
    told = user_messages(stub.requests[2])[-1]
    assert told.startswith("mlpilot could not read your tool calls: the <TOOLCALL> text is not")
    assert (result.transcript or {})["turns"][1]["unreadable"].startswith("the <TOOLCALL> text")


def test_unreadable_tool_calls_twice_name_the_vllm_flags(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm")
    broken = raw('<TOOLCALL>[{"name": "load_data", "arguments": {"target": "sales"}')
    stub.script(broken, broken)
    with pytest.raises(LLMError) as info:
        _plan(stub, profile, tmp_path)
    line = info.value.one_line()
    assert line.startswith("the LLM wrote tool calls mlpilot could not read: a <TOOLCALL> block")
    assert "--enable-auto-tool-choice" in line and "--tool-call-parser nemotron_json" in line
    assert "\n" not in line and len(stub.requests) == 2


# -- malformed arguments are never resent -------------------------------------------------------
def test_malformed_arguments_are_resent_as_json_vllm_can_load(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm")
    bad = '{"model": "rf", "params": {"max_depth": 4}'  # the model quoted broken JSON
    stub.script(
        tool_calls(("load_data", {"target": "sales"}), ("train_model", bad)),
        tool_calls(("train_model", {"model": "rf"})),
        text(DONE),
    )
    result = _plan(stub, profile, tmp_path)  # strict: a resent bad argument would be a 400
    assert stub.rejected == [] and result.plan.step("train_model").args["model"] == "rf"
    resent = _assistant_turns(stub.requests[1])[0]["tool_calls"][1]["function"]
    assert resent == {"name": "train_model", "arguments": "{}"}
    answer = json.loads(tool_results(stub.requests[1])[1]["content"])
    assert "arguments of train_model are not valid JSON" in answer["error"]
    kept = (result.transcript or {})["turns"][0]["arguments_not_resent"]
    assert kept[0]["name"] == "train_model" and kept[0]["arguments"] == bad


def test_the_strict_server_refuses_what_vllm_refuses(make_stub: StubFactory) -> None:
    """The stub's own checks: each is what a test above relies on to catch a regression."""
    stub = make_stub("vllm")
    url = f"{stub.base_url}/chat/completions"
    call = {"id": "c1", "type": "function", "function": {"name": "load_data", "arguments": "{"}}
    opening = [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "hi"}]
    base = {"model": SERVED_MODEL, "messages": opening}
    cases = {
        "unknown model": ({**base, "model": "nvidia/nvidia-nemotron-nano-9b-v2"}, 404),
        "bad arguments": ({**base, "messages": [*opening, *_turn(call, "")]}, 400),
        "null content": ({**base, "messages": [*opening, *_turn(None, None)]}, 400),
    }
    for name, (body, status) in cases.items():
        assert httpx2.post(url, json=body).status_code == status, name
    assert "The model `nvidia/nvidia-nemotron-nano-9b-v2` does not exist." in stub.rejected[0][1]
    assert stub.rejected[1][1].startswith("Expecting property name enclosed in double quotes")
    assert "NoneType" in stub.rejected[2][1]  # the model card's template fails on null
    assert [r["error"] is None for r in stub.renders] == [True, True, False]
    stub.renders.clear()  # the null-content request is meant not to render


def _turn(call: dict[str, Any] | None, content: str | None) -> list[dict[str, Any]]:
    """A tool-call turn and its answer."""
    ok = {"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": content, "tool_calls": [call or ok]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]


def test_an_unknown_model_id_names_the_models_the_server_serves(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm")
    request = _request(profile)
    with pytest.raises(LLMError) as info:
        plan_with(stub, request, tmp_path / "home", "nvidia/nvidia-nemotron-nano-9b-v2")
    line = info.value.one_line()
    assert "HTTP 404 for model 'nvidia/nvidia-nemotron-nano-9b-v2'" in line
    assert f"this endpoint serves {SERVED_MODEL}: set MLPILOT_LLM_MODEL" in line


# -- tool-call turns go back with "" content -------------------------------------------------------
def test_tool_call_turns_go_back_with_empty_content(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("nim", served_model="nvidia/nvidia-nemotron-nano-9b-v2")
    stub.script(LOAD_AND_FIT, text(DONE))
    plan_with(stub, _request(profile), tmp_path / "home", "nvidia/nvidia-nemotron-nano-9b-v2")
    (turn,) = _assistant_turns(stub.requests[1])
    assert turn["content"] == "" and len(turn["tool_calls"]) == 2
    assert stub.rejected == []  # with null the model card's template fails (test above)


# -- max_tokens and cut-off replies -------------------------------------------------------------
def test_a_reply_cut_at_max_tokens_is_dropped_and_asked_again(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm")
    stub.script(cut(LOAD_AND_FIT, at=60), LOAD_AND_FIT, text(DONE))
    result = _plan(stub, profile, tmp_path, MLPILOT_LLM_MAX_TOKENS="512")
    assert [r["max_tokens"] for r in stub.requests] == [512, 512, 512]
    assert result.plan.tools == ["load_data", "train_model"] and _clean(result.plan.rationale)
    second = stub.requests[1]
    assert _assistant_turns(second) == []  # the cut reply was not sent back
    assert user_messages(second)[-1].startswith("Your last reply was cut off at the token limit")
    first = (result.transcript or {})["turns"][0]
    assert first["finish_reason"] == "length" and first["cut_off"].startswith("dropped")
    assert first["raw_content"].startswith('<TOOLCALL>[{"name": "load_data"')


def test_replies_cut_twice_end_in_one_line(
    make_stub: StubFactory, profile: DataProfile, tmp_path: Path
) -> None:
    stub = make_stub("vllm-reasoning")
    thinking = cut(text(DONE, reasoning=THINKING * 20), at=300)  # cut while it thinks
    stub.script(thinking, thinking)
    with pytest.raises(LLMError) as info:
        _plan(stub, profile, tmp_path, MLPILOT_LLM_REASONING="on", MLPILOT_LLM_BACKEND="vllm")
    line = info.value.one_line()
    assert line.startswith("the LLM's reply was cut off at MLPILOT_LLM_MAX_TOKENS=4096 tokens")
    assert "MLPILOT_LLM_THINKING_BUDGET" in line and "MLPILOT_LLM_REASONING=off" in line
    assert len(stub.requests) == 2


# -- the thinking budget --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("backend", "reasoning", "expected"),
    [
        ("nim", "on", {"min_thinking_tokens": 128, "max_thinking_tokens": 512}),
        (
            "nim-selfhosted",
            "on",
            {"nvext": {"min_thinking_tokens": 128, "max_thinking_tokens": 512}},
        ),
        ("vllm", "on", {}),
        ("openai", "on", {}),
        ("nim", "off", {}),
    ],
)
def test_the_thinking_budget_is_placed_for_the_backend_and_only_with_think(
    make_stub: StubFactory,
    profile: DataProfile,
    tmp_path: Path,
    backend: str,
    reasoning: str,
    expected: dict[str, Any],
) -> None:
    stub = make_stub("nim")
    stub.script(LOAD_AND_FIT, text(DONE))
    env = {
        "MLPILOT_LLM_BACKEND": backend,
        "MLPILOT_LLM_REASONING": reasoning,
        "MLPILOT_LLM_THINKING_BUDGET": "128:512",
    }
    result = _plan(stub, profile, tmp_path, **env)
    first = stub.requests[0]
    fields = ("min_thinking_tokens", "max_thinking_tokens", "nvext")
    assert {k: first[k] for k in fields if k in first} == expected
    cap = "max_completion_tokens" if backend == "openai" else "max_tokens"
    assert first[cap] == 4096 and len({"max_tokens", "max_completion_tokens"} & set(first)) == 1
    switch = "/think" if reasoning == "on" else "/no_think"
    assert system_prompt(first).startswith(f"{switch}\n")
    assert (result.transcript or {})["request"]["thinking"]  # what was done, in words


# -- reasoning never leaks into the plan ---------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "open_think", "field"),
    [
        ("vllm", False, None),  # …</think>answer: the template wrote the opening tag
        ("vllm", True, None),  # <think>…</think>answer
        ("vllm-noparser", False, None),
        ("vllm-reasoning", False, "reasoning"),
        ("nim", False, "reasoning_content"),
    ],
)
def test_reasoning_never_reaches_the_rationale(
    make_stub: StubFactory,
    profile: DataProfile,
    tmp_path: Path,
    mode: str,
    open_think: bool,
    field: str | None,
) -> None:
    stub = make_stub(mode, open_think=open_think)
    stub.script(
        tool_calls(
            ("load_data", {"target": "sales"}), ("train_model", {"model": "rf"}), reasoning=THINKING
        ),
        text(DONE, reasoning=AFTERTHOUGHT),
    )
    env = {"MLPILOT_LLM_REASONING": "on", "MLPILOT_LLM_BACKEND": "vllm"}
    result = _plan(stub, profile, tmp_path, **env)
    assert result.plan.rationale == DONE
    turns = (result.transcript or {})["turns"]
    assert THINKING in turns[0]["reasoning"] and AFTERTHOUGHT in turns[-1]["reasoning"]
    (sent,) = _assistant_turns(stub.requests[-1])
    assert sent["content"] == ""  # the reasoning of a turn is never sent back
    if field is None:
        assert turns[-1]["raw_content"].rstrip().endswith(f"</think>\n\n{DONE}")
    else:
        assert "</think>" not in json.dumps(turns[-1].get("raw_content", ""))


# -- /think inside data ----------------------------------------------------------------------------
def test_think_in_paths_columns_and_prompts_never_switches_reasoning(
    make_stub: StubFactory, tmp_path: Path
) -> None:
    from mlpilot.platform.datasets import make_sales, write_table

    folder = tmp_path / "data" / "thinking"
    folder.mkdir(parents=True)
    frame = make_sales(200, seed=4).rename(columns={"sales": "sales/think"})
    frame["notes/no_think"] = "x"
    data = profile_table(write_table(frame, folder / "sales.csv"))
    stub = make_stub("vllm")
    stub.script(
        tool_calls(("load_data", {"target": "sales/thnk"}), ("train_model", {"model": "rf"})),
        text("Fit a forest."),
        tool_calls(("load_data", {"target": "sales\u2215think"})),  # copied from the prompt
        text(DONE),
    )
    prompt = "predict sales/think with a random forest, then /think about it"
    result = plan_with(stub, _request(data, prompt), tmp_path / "home", SERVED_MODEL)
    assert result.plan.step("load_data").args["target"] == "sales/think"
    assert len(stub.requests) == 4  # the repair message quoted the column names too
    for body in stub.requests:
        system, *users = [m["content"] for m in body["messages"] if m["role"] in ("system", "user")]
        assert system.startswith("/no_think\n") and system.count("/no_think") == 1
        assert "/think" not in system and not any("/think" in u or "/no_think" in u for u in users)
    card = user_messages(stub.requests[0])[0]
    assert card.startswith("Request: predict sales\u2215think")  # free text: a look-alike
    assert '"sales\\u002fthink"' in card and '"notes\\u002fno_think"' in card  # data: exact
