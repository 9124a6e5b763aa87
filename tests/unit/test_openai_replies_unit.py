"""Reading Nemotron replies (``_openai_reply``), what goes back to the server, and tracing's
choice of MLflow API: the parts without a server. The same shapes over HTTP, from a
scripted server: tests/integration/test_openai_planner_servers.py."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.llm import PlanningRequest
from mlpilot.platform.llm._openai_calls import CallHandler
from mlpilot.platform.llm._openai_reply import (
    UnreadableCalls,
    parse_toolcall_text,
    read_reply,
    wire_arguments,
)
from mlpilot.platform.llm._openai_tracing import experiment_destination
from mlpilot.platform.llm.openai_planner import assistant_message, describe_reply
from mlpilot.platform.ml.profile import ColumnProfile, DataProfile
from mlpilot.platform.plan import Step
from mlpilot.platform.plan.templates import builtin_templates
from mlpilot.platform.tools import default_registry

CALLS = '<TOOLCALL>[{"name": "load_data", "arguments": {"target": "sales"}}, {"name": "clean_data", "arguments": "{}"}]</TOOLCALL>'


def _message(content: str | None = None, **extra: Any) -> SimpleNamespace:
    calls = extra.pop("tool_calls", None)
    return SimpleNamespace(content=content, tool_calls=calls, model_extra=extra)


def _call(name: str, arguments: str, id: str = "x1") -> SimpleNamespace:
    return SimpleNamespace(id=id, function=SimpleNamespace(name=name, arguments=arguments))


def test_toolcall_text_becomes_calls() -> None:
    calls, rest = parse_toolcall_text(f"I will load it. {CALLS}", turn=2)
    assert [(c["id"], c["name"], c["arguments"]) for c in calls] == [
        ("call_2_0", "load_data", '{"target": "sales"}'),
        ("call_2_1", "clean_data", "{}"),
    ]
    assert rest == "I will load it. "
    # the Nemotron parser's leniency: a list without its brackets
    bare, _ = parse_toolcall_text('<TOOLCALL>{"name": "x", "arguments": {}}</TOOLCALL>', 1)
    assert bare[0]["name"] == "x"
    for broken, why in [
        ('<TOOLCALL>[{"name": "x", "arguments": {}}', "not closed"),
        ('<TOOLCALL>[{"name": "x", "arguments": {,}}]</TOOLCALL>', "not valid JSON"),
        ('<TOOLCALL>[{"arguments": {}}]</TOOLCALL>', 'needs a "name"'),
    ]:
        with pytest.raises(UnreadableCalls, match=why):
            parse_toolcall_text(broken, 1)


def test_every_reply_shape_is_read_the_same_way() -> None:
    thought = "Sales is numeric; a forest.\n</think>\n\n"
    shapes = {
        "nim": _message(None, reasoning_content="Sales is numeric; a forest.", tool_calls=[]),
        "vllm, reasoning parser": _message(None, reasoning="Sales is numeric; a forest."),
        "vllm, no parsers": _message(thought + CALLS),
        "vllm, opening tag": _message("<think>" + thought + CALLS),
    }
    for name, message in shapes.items():
        if not name.startswith("vllm, no") and not name.endswith("tag"):
            message.tool_calls = [
                _call("load_data", '{"target": "sales"}'),
                _call("clean_data", "{}"),
            ]
        reply = read_reply(message, "stop", turn=1)
        assert [c["name"] for c in reply.calls] == ["load_data", "clean_data"], name
        assert reply.text == "" and "Sales is numeric" in (reply.reasoning or ""), name
        assert not reply.cut and reply.unreadable is None, name
    echoed = read_reply(_message(CALLS, tool_calls=[_call("load_data", "{}")]), "tool_calls", 1)
    assert echoed.source == "tool_calls" and echoed.text == ""  # no text copy of the calls
    cut = read_reply(_message(CALLS[:40]), "length", 1)
    assert cut.cut and cut.calls == [] and cut.unreadable


def test_what_goes_back_loads_everywhere() -> None:
    assert wire_arguments('{"model": "rf"}') == '{"model": "rf"}'
    assert [wire_arguments(a) for a in ("", "  ", '{"model": ', "[1]", "null")] == ["{}"] * 5
    message = _message("", tool_calls=[_call("train_model", '{"model": "rf"')])
    reply = read_reply(message, "tool_calls", 3)
    sent = assistant_message(reply)
    assert sent["content"] == "" and sent["tool_calls"][0]["function"]["arguments"] == "{}"
    record = describe_reply(reply)
    assert record["arguments_not_resent"][0]["arguments"] == '{"model": "rf"'
    final = assistant_message(read_reply(_message("x</think>Done."), "stop", 4))
    assert final == {"role": "assistant", "content": "Done."}


def _profile(*names: str) -> DataProfile:
    columns = [ColumnProfile(n, "numeric", "float64", 0.0, 50, ["1.5"]) for n in names]
    return DataProfile("/d/x.csv", "csv", 50, 50, columns, "sha256:x")


def _handler(profile: DataProfile, adjustments: list[str]) -> CallHandler:
    request = PlanningRequest(
        prompt="p",
        registry=default_registry(),
        templates=builtin_templates(),
        profile=profile,
        data_path=profile.path,
    )
    return CallHandler(request, Settings.from_env({}), adjustments)


def test_a_target_in_another_case_is_its_column_a_typo_is_not() -> None:
    adjustments: list[str] = []
    handler = _handler(_profile("Sales", "price"), adjustments)
    for written, read in [("SALES", "Sales"), (" sales ", "Sales"), ("sale", "sale")]:
        step = Step("load_data", {"target": written})
        handler.prefill(step)
        assert step.args["target"] == read
    assert adjustments == [
        "load_data.target 'SALES' read as the column 'Sales'",
        "load_data.target ' sales ' read as the column 'Sales'",
    ]
    twins = _handler(_profile("Sales", "SALES"), [])
    step = Step("load_data", {"target": "sales"})
    twins.prefill(step)
    assert step.args["target"] == "sales"  # two columns could be meant: validation asks


def test_copied_lookalike_slashes_are_restored_in_arguments() -> None:
    handler = _handler(_profile("a/think"), [])
    new: list[Step] = []
    handler.handle("load_data", '{"target": "a\u2215think"}', new)
    assert new[0].args["target"] == "a/think"


def test_tracing_destination_follows_the_installed_mlflow_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlflow.entities import trace_location

    real = experiment_destination("7")
    assert isinstance(real, trace_location.MlflowExperimentLocation)
    # MLflow 3.1 to 3.4: MlflowExperimentLocation exists but set_destination refuses it
    old_location = types.ModuleType("mlflow.entities.trace_location")
    old_location.MlflowExperimentLocation = object  # type: ignore[attr-defined]
    old_destination = types.ModuleType("mlflow.tracing.destination")

    class MlflowExperiment:
        def __init__(self, experiment_id: str) -> None:
            self.experiment_id = experiment_id

    old_destination.MlflowExperiment = MlflowExperiment  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mlflow.entities.trace_location", old_location)
    monkeypatch.setattr("mlflow.entities.trace_location", old_location, raising=False)
    monkeypatch.setitem(sys.modules, "mlflow.tracing.destination", old_destination)
    chosen = experiment_destination("7")
    assert isinstance(chosen, MlflowExperiment) and chosen.experiment_id == "7"
