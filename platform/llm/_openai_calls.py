"""Answering the model's tool calls during planning.

Pipeline and directive calls become steps (their arguments checked at once, so the model
hears about a bad argument in the same turn); query calls are answered: ``describe_data``
from the data profile, the others after planning, for the user. Whatever goes wrong in a
call goes back to the model as the tool's result, written for it, never as a crash.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import MlpilotError, PlanError
from mlpilot.platform.llm._openai_messages import ELLIPSIS, for_model, restore_switches
from mlpilot.platform.llm._openai_steps import BadArguments, parse_arguments
from mlpilot.platform.plan import Step

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings
    from mlpilot.platform.llm._base import PlanningRequest
    from mlpilot.platform.ml.profile import DataProfile
    from mlpilot.platform.tools import Tool

logger = logging.getLogger(__name__)


class CallHandler:
    """Turns tool calls into steps and answers; remembers the last query asked."""

    def __init__(
        self, request: PlanningRequest, settings: Settings, adjustments: list[str]
    ) -> None:
        self.request = request
        self.registry = request.registry
        self.settings = settings
        self.adjustments = adjustments  # what mlpilot changed in the model's arguments
        self.last_query: Step | None = None

    def handle(self, name: str, raw: str, new: list[Step]) -> dict[str, Any]:
        """The tool message for one call; a pipeline step is appended to ``new``."""
        if name not in self.registry:
            valid = ", ".join(self.registry.names())
            return {"error": f"there is no tool named {name!r}; valid tools: {valid}"}
        try:
            args = restore_switches(parse_arguments(name, raw))
        except BadArguments as exc:
            return {"error": str(exc)}
        tool = self.registry.get(name)
        if tool.kind == "query":
            return self.answer_query(tool, args)
        step = Step(name, args)
        self.prefill(step)
        new.append(step)
        try:
            tool.validate(step.args)
        except PlanError as exc:
            return {
                "status": "added to the plan, but invalid",
                "error": exc.one_line(),
                "fix": f"call {name} again with corrected arguments",
            }
        return {"status": "added to the plan"}

    def answer_query(self, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        try:
            clean = tool.validate(args)
        except PlanError as exc:
            return {"error": exc.one_line()}
        self.last_query = Step(tool.name, dict(args))
        if tool.name != "describe_data":
            # Reading MLflow or Optuna mid-planning costs seconds; the user gets the answer.
            return {
                "status": "scheduled",
                "note": f"{tool.name} is answered for the user after planning. If the request "
                "asks only for this, reply with one sentence and no tool call.",
            }
        if self.request.profile is None:
            return {"error": "no data file was given, so there is no data to describe"}
        from mlpilot.platform.tools.queries import QueryContext

        context = QueryContext(
            settings=self.settings,
            profile=self.request.profile,
            experiment=self.request.experiment,
        )
        try:
            return for_model(tool(context, **clean))
        except MlpilotError as exc:
            return {"error": exc.one_line()}

    def prefill(self, step: Step) -> None:
        """What mlpilot knows better than the model: the data file and the --target."""
        if step.tool != "load_data":
            return
        request, args = self.request, step.args
        if request.data_path:
            # The model may only plan over the file the user gave, whatever it writes.
            if args.get("path") not in (None, request.data_path):
                self.adjustments.append(
                    f"load_data.path {args['path']!r} replaced by the data file {request.data_path!r}"
                )
            args["path"] = request.data_path
        if request.target:
            args["target"] = request.target  # the command line wins
            return
        profile = request.profile
        if profile is None:
            return
        target = args.get("target")
        remembered = request.context.get("target")
        if target is None and isinstance(remembered, str) and profile.column(remembered):
            args["target"] = remembered
        elif isinstance(target, str) and not profile.column(target):
            found = _spelled_differently(target, profile)
            if found is not None:
                self.adjustments.append(f"load_data.target {target!r} read as the column {found!r}")
                args["target"] = found


def _spelled_differently(target: str, profile: DataProfile) -> str | None:
    """The one column ``target`` names in another spelling: cut by the schema card, or in
    another case or with spaces around it. A near miss (a typo) is not guessed: validation
    sends it back to the model with the valid columns."""
    if target.endswith(ELLIPSIS):
        prefix = target[: -len(ELLIPSIS)]
        matches = [n for n in profile.names if n.startswith(prefix)]
    else:
        folded = target.strip().casefold()
        matches = [n for n in profile.names if n.strip().casefold() == folded]
    if len(matches) == 1:
        return matches[0]
    logger.debug("target %r matches %d columns in another spelling", target, len(matches))
    return None
