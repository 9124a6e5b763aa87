"""A scripted stand-in for Nemotron that knows the right plan and drafts it with slips.

It is a reply for :class:`llm_stub.LLMStub` (a callable of the request body). Its first
draft carries the mistakes a small model makes (the target in the wrong case or misspelt,
a model name outside the enum, the trial budget left out); afterwards it reads what mlpilot
sent back and, like a model, fixes only what it was told about: a tool answer with an
``error`` or a "mlpilot rejected the plan" message. Then it replies with one sentence.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm_stub import text, tool_calls

from mlpilot.platform.plan import Plan

MODEL_ALIASES = {
    "rf": "random_forest",
    "xgb": "xgboost",
    "lgbm": "lightgbm",
    "hgb": "hist_gradient_boosting",
    "svm": "svc",
    "linear": "logistic_regression",
    "knn": "k_nearest_neighbors",
    "auto": "automl",
}
MISTAKES = ("target-case", "target-typo", "model-alias", "no-budget")
_REJECTED = re.compile(r"mlpilot rejected the plan: (?:the plan is invalid: step (\d+): )?(\w+)")


def wrong_case(name: str) -> str | None:
    flipped = name.upper() if name != name.upper() else name.lower()
    return flipped if flipped != name else None  # a name without letters has no case


def misspelt(name: str, columns: list[str]) -> str:
    """``name`` without its middle character: a typo no other spelling of a column matches."""
    for drop in (len(name) // 2, len(name) - 1, 0):
        typo = name[:drop] + name[drop + 1 :]
        folded = {c.strip().casefold() for c in columns}
        if typo and typo.casefold() not in folded:
            return typo
    return name + "x"


class ScriptedNemotron:
    """Plans ``plan`` over ``columns``; ``target_mistake`` is target-case or target-typo."""

    def __init__(
        self,
        plan: Plan,
        columns: list[str],
        target_mistake: str = "target-case",
        rationale: str | None = None,
        reasoning: str | None = None,
    ) -> None:
        self.steps = [(s.tool, self.arguments(s.tool, s.args)) for s in plan.steps]
        self.columns = columns
        self.target_mistake = target_mistake
        self.rationale = rationale or "The plan: " + ", then ".join(plan.tools) + "."
        self.reasoning = reasoning
        self.made: list[str] = []  # the mistakes of the first draft

    @staticmethod
    def arguments(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        # mlpilot fills in the data file; a model passes what it decided, not null defaults
        return {k: v for k, v in args.items() if v is not None and k != "path"}

    def draft(self) -> list[tuple[str, dict[str, Any]]]:
        calls = []
        for tool, args in self.steps:
            args = dict(args)
            target = args.get("target")
            if tool == "load_data" and isinstance(target, str):
                slip = wrong_case(target) if self.target_mistake == "target-case" else None
                args["target"] = slip or misspelt(target, self.columns)
                self.made.append("target-case" if slip else "target-typo")
            if tool in ("train_model", "optimize_model") and args.get("model") in MODEL_ALIASES:
                args["model"] = MODEL_ALIASES[args["model"]]
                self.made.append("model-alias")
            if tool == "optimize_model" and {"trials", "timeout_s"} & set(args):
                args.pop("trials", None)
                args.pop("timeout_s", None)
                self.made.append("no-budget")
            calls.append((tool, args))
        return calls

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        if last is None:
            return tool_calls(*self.draft(), reasoning=self.reasoning)
        fixes = self.told_to_fix(messages[last], messages[last + 1 :])
        if fixes:
            right = dict(self.steps)
            return tool_calls(*[(t, right[t]) for t in fixes], reasoning=self.reasoning)
        return text(self.rationale, reasoning=self.reasoning)

    def told_to_fix(self, turn: dict[str, Any], after: list[dict[str, Any]]) -> list[str]:
        """The tools mlpilot said were wrong since the model's last turn, in plan order."""
        names = {c["id"]: c["function"]["name"] for c in turn.get("tool_calls") or []}
        tools = {s for s, _ in self.steps}
        wrong: set[str] = set()
        for message in after:
            if message["role"] == "tool" and "error" in json.loads(message["content"]):
                wrong.add(names.get(message["tool_call_id"], ""))
            elif message["role"] == "user" and message["content"].startswith("mlpilot rejected"):
                found = _REJECTED.match(message["content"])
                step = found and found.group(1)
                named = self.steps[int(step) - 1][0] if step else found and found.group(2)
                wrong |= {named} if named in tools else tools  # unclear: send the whole plan
            elif message["role"] == "user":  # cut off, unreadable: say it all again
                wrong |= tools
        return [t for t, _ in self.steps if t in wrong]
