"""The OpenAI-compatible planner: the model plans the request as tool calls.

One planning conversation is a bounded loop. Each model turn may call tools: pipeline and
directive tools are collected into the plan, query tools are answered (``describe_data``
from the profile; the others are run for the user after planning). A turn without tool
calls ends the loop; the plan is then validated against the tools and the data profile,
and a rejected plan goes back to the model with the reason, a bounded number of times.
Everything sent and received is kept in the transcript (never the API key).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import MlpilotError, PlanError
from mlpilot.platform.llm._base import Planner, PlanningRequest, PlanResult
from mlpilot.platform.llm._openai_calls import CallHandler
from mlpilot.platform.llm._openai_client import (
    Backoff,
    LLMError,
    create_with_retries,
    display_url,
    redact,
)
from mlpilot.platform.llm._openai_messages import (
    NO_PLAN,
    as_data,
    rationale_from,
    repair_message,
    system_prompt,
    thinking_extra_body,
    tool_schemas,
    user_message,
)
from mlpilot.platform.llm._openai_steps import merge_steps
from mlpilot.platform.plan import Plan, Step, validate_plan

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

__all__ = ["Backoff", "LLMError", "OpenAIPlanner"]

MAX_TURNS = 8  # model calls per request, repairs included
MAX_REPAIRS = 2
_NO_TARGET = "load_data: no target column was named"  # validate_plan's wording


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
                api_key=self.settings.llm_api_key,
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
        self.extra_body = thinking_extra_body(
            settings.llm_thinking_budget, settings.llm_thinking_field
        )
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
        self.log: dict[str, Any] = {
            "planner": planner.label,
            "request": {
                "base_url": self.endpoint,
                "model": settings.llm_model,
                "reasoning": settings.llm_reasoning,
                "thinking_budget": settings.llm_thinking_budget,
                "thinking_field": settings.llm_thinking_field,
                "extra_body": self.extra_body,
                **self.sampling,
                "tool_choice": "auto",
                "tools": [t["function"]["name"] for t in self.tools],
                "timeout_s": settings.llm_timeout_s,
                "max_attempts": planner.backoff.attempts,
                "max_turns": planner.max_turns,
                "max_repairs": planner.max_repairs,
            },
            "tracing": None,
            "turns": [],
            "tool_errors": [],
            "adjustments": [],
            "validation": [],
            "repairs": 0,
            "final_plan": None,
        }
        self.calls = CallHandler(request, settings, self.log["adjustments"])

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> PlanResult:
        from mlpilot.platform.llm._openai_tracing import enable_tracing

        self.log["tracing"] = (
            enable_tracing(self.settings, self.request.experiment)
            if self.planner.tracing
            else {"enabled": False, "error": "tracing is off for this planner"}
        )
        for turn in range(1, self.planner.max_turns + 1):
            entry = self.ask(turn)
            calls = entry.get("tool_calls", [])
            if calls:
                self.take_calls(calls, turn)
                if turn < self.planner.max_turns:
                    continue  # the model sees the tool results and goes on
            try:
                rationale = redact(rationale_from(entry.get("content")), self.settings.llm_api_key)
                return self.finish(rationale)
            except PlanError as exc:
                if self.give_up(exc, turn):
                    raise self.user_error(exc) from None
                self.log["repairs"] += 1
                self.messages.append(
                    {
                        "role": "user",
                        "content": repair_message(exc.one_line(), self.request.profile, self.steps),
                    }
                )
        raise PlanError(f"the LLM planner did not finish within {self.planner.max_turns} turns")

    def ask(self, turn: int) -> dict[str, Any]:
        """One model turn (with retries); its message is appended to the conversation."""
        kwargs: dict[str, Any] = {
            "model": self.settings.llm_model,
            "messages": self.messages,
            "tools": self.tools,
            "tool_choice": "auto",
            **self.sampling,
        }
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        record: dict[str, Any] = {"turn": turn, "attempts": []}
        self.log["turns"].append(record)
        response = create_with_retries(
            self.planner.client().chat.completions.create,
            kwargs,
            backoff=self.planner.backoff,
            endpoint=self.endpoint,
            timeout_s=self.settings.llm_timeout_s,
            log=record["attempts"],
            sleep=self.planner.sleep,
        )
        if not getattr(response, "choices", None):
            raise LLMError(
                f"the LLM endpoint {self.endpoint} answered without a message",
                hint="check that MLPILOT_LLM_BASE_URL is an OpenAI-compatible chat endpoint",
            )
        choice = response.choices[0]
        message = choice.message
        record["finish_reason"] = choice.finish_reason
        usage = getattr(response, "usage", None)
        if usage is not None:
            record["usage"] = usage.model_dump(exclude_none=True)
        extra = getattr(message, "model_extra", None) or {}
        reasoning = getattr(message, "reasoning_content", None) or extra.get("reasoning_content")
        if reasoning:
            record["reasoning"] = str(reasoning)  # kept for the record, never sent back
        entry: dict[str, Any] = {"role": "assistant", "content": message.content}
        calls = []
        for i, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            calls.append(
                {
                    "id": call.id or f"call_{turn}_{i}",
                    "type": "function",
                    "function": {
                        "name": getattr(function, "name", "") or "",
                        "arguments": getattr(function, "arguments", "") or "",
                    },
                }
            )
        if calls:
            entry["tool_calls"] = calls
        self.messages.append(entry)
        return entry

    # -- tool calls -------------------------------------------------------------------------
    def take_calls(self, calls: list[dict[str, Any]], turn: int) -> None:
        """Answer every call (the API wants one tool message each) and merge the steps."""
        new: list[Step] = []
        for call in calls:
            name, raw = call["function"]["name"], call["function"]["arguments"]
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
        return PlanResult(
            plan=validated.plan,
            planner=self.planner.label,
            task=validated.task,
            notes=list(validated.notes),
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
            return PlanError(
                f"the LLM planner ({model}) called no tool, so there is no plan",
                hint="rephrase the request, or set MLPILOT_LLM=offline",
            )
        repairs = self.log["repairs"]
        return PlanError(
            f"the LLM planner ({model}) gave no valid plan after {repairs} "
            f"repair{'s' if repairs != 1 else ''}: {exc.message}",
            hint=(f"{exc.hint}; " if exc.hint else "")
            + "rephrase the request, name the column with --target, or set MLPILOT_LLM=offline",
        )

    def transcript(self) -> dict[str, Any]:
        data = {**self.log, "messages": self.messages}
        return redact(data, self.settings.llm_api_key)
