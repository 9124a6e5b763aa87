"""The OpenAI-compatible planner: the model plans the request as tool calls.

One planning conversation is a bounded loop. Each model turn may call tools: pipeline and
directive tools are collected into the plan, query tools are answered (``describe_data``
from the profile; the others are run for the user after planning). A turn without tool
calls ends the loop; the plan is then validated against the tools and the data profile,
and a rejected plan goes back to the model with the reason, a bounded number of times.
Everything sent and received is kept in the transcript (never the API key).

Real servers differ (``_openai_reply`` reads them all): a reply cut at ``max_tokens`` is
dropped and asked again once, ``<TOOLCALL>`` text the server did not parse is parsed here
(and a vLLM without a tool parser, which refuses ``tool_choice: "auto"``, is asked with
``"none"``), and tool-call turns go back with ``""`` content and arguments vLLM can load.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import MlpilotError, PlanError
from mlpilot.platform.llm._base import Planner, PlanningRequest, PlanResult
from mlpilot.platform.llm._openai_calls import CallHandler
from mlpilot.platform.llm._openai_client import (
    OFFLINE_HINT,
    Backoff,
    LLMError,
    create_with_retries,
    display_url,
    redact,
)
from mlpilot.platform.llm._openai_messages import (
    NO_PLAN,
    as_data,
    cut_off_message,
    rationale_from,
    repair_message,
    system_prompt,
    thinking_extra_body,
    tool_schemas,
    unreadable_message,
    user_message,
)
from mlpilot.platform.llm._openai_reply import Reply, read_reply, wire_arguments
from mlpilot.platform.llm._openai_steps import merge_steps
from mlpilot.platform.plan import Plan, Step, validate_plan

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

__all__ = ["Backoff", "LLMError", "OpenAIPlanner"]

logger = logging.getLogger(__name__)

MAX_TURNS = 8  # model calls per request, repairs included
MAX_REPAIRS = 2
MAX_CUT_OFFS = 1  # a reply cut at max_tokens is asked again once
MAX_UNREADABLE = 1  # <TOOLCALL> text that cannot be read is sent back once
_NO_TARGET = "load_data: no target column was named"  # validate_plan's wording
# vLLM's words when it was started without a tool parser and gets tool_choice "auto"
_AUTO_REFUSED = '"auto" tool choice requires'
VLLM_TOOL_FLAGS = (
    "--enable-auto-tool-choice --tool-parser-plugin nemotron_toolcall_parser_no_streaming.py "
    "--tool-call-parser nemotron_json"
)


class OpenAIPlanner(Planner):
    """Plans through any OpenAI-compatible chat-completions endpoint with tool calling."""

    name = "openai"

    def __init__(
        self,
        settings: Settings,
        *,
        client: Any = None,
        backoff: Backoff | None = None,
        tracing: bool = True,
        max_turns: int = MAX_TURNS,
        max_repairs: int = MAX_REPAIRS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.backoff = backoff or Backoff()
        self.tracing = tracing
        self.max_turns = max_turns
        self.max_repairs = max_repairs
        self.sleep = sleep
        self._client = client

    @property
    def label(self) -> str:
        return f"openai:{self.settings.llm_model}"

    def client(self) -> Any:
        if self._client is None:
            import openai  # here, not at import time: the CLI starts without it

            self._client = openai.OpenAI(
                base_url=self.settings.llm_base_url,
                # local servers (llama.cpp, vLLM) take no key, but the client refuses to
                # start without one; a server that wants one answers 401, which names it
                api_key=self.settings.llm_api_key or "no-key",
                timeout=self.settings.llm_timeout_s,
                max_retries=0,  # retries are ours: logged, with backoff and Retry-After
            )
        return self._client

    def plan(self, request: PlanningRequest) -> PlanResult:
        conversation = Conversation(self, request)
        try:
            return conversation.run()
        except MlpilotError as exc:
            exc.transcript = conversation.transcript()  # type: ignore[attr-defined]
            raise


class Conversation:
    """One planning conversation: messages, collected steps and the transcript."""

    def __init__(self, planner: OpenAIPlanner, request: PlanningRequest) -> None:
        settings = planner.settings
        self.planner = planner
        self.settings = settings
        self.request = request
        self.registry = request.registry
        self.endpoint = display_url(settings.llm_base_url)
        self.extra_body, thinking_note = thinking_extra_body(
            settings.llm_backend,
            settings.llm_reasoning,
            settings.llm_thinking_min,
            settings.llm_thinking_budget,
        )
        # OpenAI's own API wants the newer name; NIM and vLLM read max_tokens.
        cap = "max_completion_tokens" if settings.llm_backend == "openai" else "max_tokens"
        self.cap = {cap: settings.llm_max_tokens}
        self.tool_choice = "auto"
        # Nemotron's recommended sampling: greedy without reasoning, 0.6 / 0.95 with it.
        self.sampling: dict[str, float] = (
            {"temperature": 0.6, "top_p": 0.95}
            if settings.llm_reasoning == "on"
            else {"temperature": 0.0}
        )
        self.tools = tool_schemas(self.registry)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(settings.llm_reasoning)},
            {"role": "user", "content": user_message(request)},
        ]
        self.steps: list[Step] = []
        self.missing_target = False
        self.cut_offs = 0
        self.unreadable = 0
        self.log = self.new_log(thinking_note)
        self.calls = CallHandler(request, settings, self.log["adjustments"])

    def new_log(self, thinking_note: str) -> dict[str, Any]:
        """The transcript's skeleton: what is sent on every turn, then what happens."""
        settings = self.settings
        return {
            "planner": self.planner.label,
            "request": {
                "base_url": self.endpoint,
                "model": settings.llm_model,
                "backend": settings.llm_backend,
                "reasoning": settings.llm_reasoning,
                "thinking_budget": [settings.llm_thinking_min, settings.llm_thinking_budget],
                "thinking": thinking_note,
                "extra_body": self.extra_body,
                **self.cap,
                **self.sampling,
                "tool_choice": self.tool_choice,
                "tools": [t["function"]["name"] for t in self.tools],
                "timeout_s": settings.llm_timeout_s,
                "max_attempts": self.planner.backoff.attempts,
                "max_turns": self.planner.max_turns,
                "max_repairs": self.planner.max_repairs,
            },
            "tool_parsing": "server",
            "tracing": None,
            "turns": [],
            "tool_errors": [],
            "adjustments": [],
            "validation": [],
            "repairs": 0,
            "final_plan": None,
        }

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> PlanResult:
        from mlpilot.platform.llm._openai_tracing import enable_tracing

        self.log["tracing"] = (
            enable_tracing(self.settings, self.request.experiment)
            if self.planner.tracing
            else {"enabled": False, "error": "tracing is off for this planner"}
        )
        for turn in range(1, self.planner.max_turns + 1):
            reply = self.ask(turn)
            if reply.cut:
                self.after_cut_off()  # the cut reply is dropped, never sent back
                continue
            self.messages.append(assistant_message(reply))
            if reply.unreadable:
                self.after_unreadable(reply.unreadable)
                continue
            if reply.calls:
                self.take_calls(reply.calls, turn)
                if turn < self.planner.max_turns:
                    continue  # the model sees the tool results and goes on
            try:
                rationale = redact(rationale_from(reply.text), self.settings.llm_api_key)
                return self.finish(rationale)
            except PlanError as exc:
                if self.give_up(exc, turn):
                    raise self.user_error(exc) from None
                self.log["repairs"] += 1
                self.say(repair_message(exc.one_line(), self.request.profile, self.steps))
        raise PlanError(
            f"the LLM planner ({self.settings.llm_model}) did not finish within "
            f"{self.planner.max_turns} turns",
            hint="rephrase the request more simply, or set MLPILOT_LLM=offline",
        )

    def say(self, content: str) -> None:
        self.messages.append({"role": "user", "content": content})

    def after_cut_off(self) -> None:
        self.cut_offs += 1
        cap = self.settings.llm_max_tokens
        if self.cut_offs > MAX_CUT_OFFS:
            # a template that drops the tools leaves a model rambling to the limit
            if not self.steps and (dropped := self.tools_dropped()) is not None:
                raise dropped
            raise LLMError(
                f"the LLM's reply was cut off at MLPILOT_LLM_MAX_TOKENS={cap} tokens "
                f"{self.cut_offs} times, so there is no plan",
                hint="raise MLPILOT_LLM_MAX_TOKENS, lower MLPILOT_LLM_THINKING_BUDGET or set "
                f"MLPILOT_LLM_REASONING=off, {OFFLINE_HINT}",
            )
        self.say(cut_off_message(cap))

    def after_unreadable(self, error: str) -> None:
        self.unreadable += 1
        if self.unreadable > MAX_UNREADABLE:
            raise LLMError(
                f"the LLM wrote tool calls mlpilot could not read: {error}",
                hint=f"on vLLM, serve the model with {VLLM_TOOL_FLAGS} (README: Local vLLM), "
                + OFFLINE_HINT,
            )
        self.say(unreadable_message(error))

    def ask(self, turn: int) -> Reply:
        """One model turn (with retries), read into a :class:`Reply`; nothing is appended."""
        kwargs: dict[str, Any] = {
            "model": self.settings.llm_model,
            "messages": self.messages,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            **self.cap,
            **self.sampling,
        }
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        record: dict[str, Any] = {"turn": turn, "attempts": []}
        self.log["turns"].append(record)
        response = self.create(kwargs, record)
        if not getattr(response, "choices", None):
            raise LLMError(
                f"the LLM endpoint {self.endpoint} answered without a message",
                hint="check that MLPILOT_LLM_BASE_URL is an OpenAI-compatible chat endpoint",
            )
        choice = response.choices[0]
        reply = read_reply(choice.message, choice.finish_reason, turn)
        usage = getattr(response, "usage", None)
        if usage is not None:
            record["usage"] = usage.model_dump(exclude_none=True)
        record.update(describe_reply(reply))
        self.note_served_model(getattr(response, "model", None))
        return reply

    def note_served_model(self, served: Any) -> None:
        """Record the model the server says answered: llama.cpp answers with the model it
        loaded whatever id is asked for, so the asked-for id alone would misname the planner."""
        if not isinstance(served, str) or not served or "served_model" in self.log:
            return
        self.log["served_model"] = served
        if served != self.settings.llm_model:
            logger.info("asked for %s, the endpoint served %s", self.settings.llm_model, served)

    def create(self, kwargs: dict[str, Any], record: dict[str, Any]) -> Any:
        def send() -> Any:
            return create_with_retries(
                self.planner.client().chat.completions.create,
                kwargs,
                backoff=self.planner.backoff,
                endpoint=self.endpoint,
                timeout_s=self.settings.llm_timeout_s,
                log=record["attempts"],
                sleep=self.planner.sleep,
            )

        try:
            return send()
        except LLMError as exc:
            if exc.status == 400 and _AUTO_REFUSED in exc.detail and self.tool_choice == "auto":
                # vLLM without a tool parser: the tools still reach the template with "none",
                # and the model's <TOOLCALL> text comes back in content for us to parse.
                logger.info("the endpoint parses no tool calls: asking with tool_choice none")
                self.tool_choice = kwargs["tool_choice"] = "none"
                self.log["tool_parsing"] = "mlpilot (the server refused tool_choice auto)"
                return send()
            if exc.status == 404:
                raise self.unknown_model(exc) from None
            raise

    def unknown_model(self, exc: LLMError) -> LLMError:
        """A 404: name the models the server does serve (vLLM serves the id it was given)."""
        try:
            served = [m.id for m in self.planner.client().models.list()][:8]
        except Exception as listing:  # the listing only improves the message
            logger.info("cannot list the endpoint's models: %s", listing)
            return exc
        if not served:
            return exc
        return LLMError(
            exc.message,
            hint=f"this endpoint serves {', '.join(served)}: set MLPILOT_LLM_MODEL to one of "
            f"them, {OFFLINE_HINT}",
        )

    # -- tool calls -------------------------------------------------------------------------
    def take_calls(self, calls: list[dict[str, str]], turn: int) -> None:
        """Answer every call (the API wants one tool message each) and merge the steps."""
        new: list[Step] = []
        for call in calls:
            name, raw = call["name"], call["arguments"]
            answer = self.calls.handle(name, raw, new)
            if "error" in answer:
                self.log["tool_errors"].append({"turn": turn, "tool": name, **answer})
            self.messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": as_data(answer)}
            )
        self.steps = merge_steps(self.steps, new, self.registry)

    def finish(self, rationale: str) -> PlanResult:
        if self.steps:
            steps = [Step(s.tool, dict(s.args)) for s in self.steps]
        elif self.calls.last_query is not None:
            steps = [Step(self.calls.last_query.tool, dict(self.calls.last_query.args))]
        else:
            raise PlanError(NO_PLAN)
        for step in steps:
            self.calls.prefill(step)
        load = next((s for s in steps if s.tool == "load_data"), None)
        self.missing_target = (
            load is not None
            and load.args.get("target") is None
            and self.request.profile is not None
        )
        is_query = len(steps) == 1 and self.registry.get(steps[0].tool).kind == "query"
        plan = Plan(
            steps=steps,
            template="query" if is_query else "custom",
            rationale=rationale
            or f"Planned by {self.settings.llm_model}: " + " → ".join(s.tool for s in steps),
        )
        validated = validate_plan(plan, self.registry, self.request.profile, check_files=False)
        self.log["final_plan"] = validated.plan.to_dict()
        served = self.log.get("served_model")
        notes = list(validated.notes)
        if served and served != self.settings.llm_model:
            notes.append(
                f"planned by {served}, the model the endpoint served "
                f"(MLPILOT_LLM_MODEL asked for {self.settings.llm_model})"
            )
        return PlanResult(
            plan=validated.plan,
            planner=self.planner.label,
            task=validated.task,
            notes=notes,
            transcript=self.transcript(),
        )

    def give_up(self, exc: PlanError, turn: int) -> bool:
        # A missing target is the user's to name (never guessed), so it is not repaired:
        # sent back, the model would pick one of the candidates it is shown.
        self.missing_target = self.missing_target and exc.message.startswith(_NO_TARGET)
        final = (
            self.missing_target
            or turn >= self.planner.max_turns
            or self.log["repairs"] >= self.planner.max_repairs
        )
        self.log["validation"].append(
            {
                "turn": turn,
                "error": exc.one_line(),
                "action": "gave up" if final else f"repair {self.log['repairs'] + 1}",
            }
        )
        return final

    def user_error(self, exc: PlanError) -> PlanError:
        if self.missing_target:
            return exc
        model = self.settings.llm_model
        if not self.steps and self.calls.last_query is None:
            server = (
                f"the endpoint parses no tool calls: on vLLM serve the model with {VLLM_TOOL_FLAGS}; "
                if self.tool_choice == "none"
                else ""
            )
            if not server and (dropped := self.tools_dropped()) is not None:
                return dropped
            return PlanError(
                f"the LLM planner ({model}) called no tool, so there is no plan",
                hint=f"{server}rephrase the request, or set MLPILOT_LLM=offline",
            )
        repairs = self.log["repairs"]
        return PlanError(
            f"the LLM planner ({model}) gave no valid plan after {repairs} "
            f"repair{'s' if repairs != 1 else ''}: {exc.message}",
            hint=(f"{exc.hint}; " if exc.hint else "")
            + "rephrase the request, name the column with --target, or set MLPILOT_LLM=offline",
        )

    def tools_dropped(self) -> PlanError | None:
        """The error to give when the server's chat template drops the tools, else None."""
        if not self.template_drops_tools():
            return None
        return PlanError(
            f"the LLM planner ({self.settings.llm_model}) called no tool: the server's chat "
            "template does not support tools, so the model never saw them",
            hint="serve the model with a tool-capable chat template (llama-server --jinja "
            "--chat-template-file FILE), or set MLPILOT_LLM=offline",
        )

    def template_drops_tools(self) -> bool:
        """Whether the server says its chat template cannot render tools (llama.cpp's
        ``/props``): such a template drops them without an error. False when unknown."""
        root = self.settings.llm_base_url.rstrip("/").removesuffix("/v1")
        key = self.settings.llm_api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            request = urllib.request.Request(f"{root}/props", headers=headers)
            with urllib.request.urlopen(request, timeout=5.0) as answer:
                caps = json.loads(answer.read(1_000_000)).get("chat_template_caps") or {}
        except Exception as exc:  # only improves the message: most servers have no /props
            logger.info("cannot read the endpoint's /props: %s", exc)
            return False
        self.log["chat_template_caps"] = caps
        return caps.get("supports_tools") is False

    def transcript(self) -> dict[str, Any]:
        data = {**self.log, "messages": self.messages}
        return redact(data, self.settings.llm_api_key)


def assistant_message(reply: Reply) -> dict[str, Any]:
    """The turn as it is sent back: ``""`` content (``null`` breaks Nemotron's template) and
    arguments every server can load (the raw text stays in the turn's record)."""
    # unreadable <TOOLCALL> text stays in the text: the model sees what it wrote, and why not
    entry: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.calls:
        entry["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": wire_arguments(call["arguments"])},
            }
            for call in reply.calls
        ]
    return entry


def describe_reply(reply: Reply) -> dict[str, Any]:
    """What the transcript keeps of a turn beyond the message sent back."""
    record: dict[str, Any] = {"finish_reason": reply.finish_reason}
    if reply.reasoning:
        record["reasoning"] = reply.reasoning  # kept for the record, never sent back
    if reply.raw_content and (reply.cut or reply.raw_content.strip() != reply.text):
        record["raw_content"] = reply.raw_content
    if reply.calls:
        record["tool_calls_from"] = reply.source
    unsent = [c for c in reply.calls if wire_arguments(c["arguments"]) != c["arguments"]]
    if unsent:
        record["arguments_not_resent"] = unsent  # sent back as {}: not JSON objects
    if reply.unreadable:
        record["unreadable"] = reply.unreadable
    if reply.cut:
        record["cut_off"] = "dropped: the reply hit max_tokens"
    return record
