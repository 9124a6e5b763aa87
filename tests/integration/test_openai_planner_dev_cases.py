"""Every development case, planned through a Nemotron-shaped server by a model that slips.

For each case of ``prompts-dev.jsonl`` the scripted model drafts the offline planner's plan
with realistic mistakes (target in the wrong case or misspelt, a model name outside the
enum, no trial budget); mlpilot's validation and repairs must bring it to the same target
and tools as the offline planner, with a rationale free of reasoning and tool-call text,
and every request must render through the model's chat template with the right switch.
The stub is strict: it refuses what vLLM refuses, so a request it would reject fails here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from dev_cases import DevCase, load_cases, prepare, target_and_tools
from llm_stub import SERVED_MODEL, LLMStub
from planning import TAGS, plan_with
from scripted_nemotron import MISTAKES, ScriptedNemotron

from mlpilot.platform.errors import MlpilotError

pytestmark = pytest.mark.integration

NIM_MODEL = "nvidia/nvidia-nemotron-nano-9b-v2"  # the hosted NIM id (vLLM: the HF repo id)


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> list[DevCase]:
    base = tmp_path_factory.mktemp("dev-cases")
    return [prepare(case, base) for case in load_cases()]


def _mistakes_answered(case: DevCase, made: list[str], transcript: dict) -> list[str]:
    """The mistakes of the draft that mlpilot did not visibly catch."""
    missed = []
    flagged = case.request.target is not None  # --target wins: a wrong target is replaced
    if "target-case" in made and not flagged and not transcript["adjustments"]:
        missed.append("the wrong-case target was not mapped to its column")
    if "target-typo" in made and not flagged and not transcript["repairs"]:
        missed.append("the misspelt target was not sent back for repair")
    if "model-alias" in made and not transcript["tool_errors"]:
        missed.append("the model name outside the enum was not refused")
    return missed


@pytest.mark.parametrize(
    ("mode", "model", "reasoning", "backend"),
    [("nim", NIM_MODEL, "off", "nim"), ("vllm", SERVED_MODEL, "on", "vllm")],
    ids=["nim-no-think", "vllm-think-no-reasoning-parser"],
)
def test_every_dev_case_is_repaired_into_the_offline_plan(
    cases: list[DevCase], tmp_path: Path, mode: str, model: str, reasoning: str, backend: str
) -> None:
    failures: list[str] = []
    made: Counter[str] = Counter()
    with LLMStub(mode, strict=True, served_model=model) as stub:
        for i, case in enumerate(cases):
            profile = case.request.profile
            scripted = ScriptedNemotron(
                case.offline, profile.names if profile else [], MISTAKES[i % 2]
            )
            stub.script(*[scripted] * 10)  # the same model answers every turn
            env = {"MLPILOT_LLM_REASONING": reasoning, "MLPILOT_LLM_BACKEND": backend}
            try:
                result = plan_with(stub, case.request, tmp_path / "home", model, **env)
            except MlpilotError as exc:
                failures.append(f"{case.id}: {exc.one_line()}")
                continue
            made.update(scripted.made)
            got = target_and_tools(result.plan)
            if got != case.expected:
                failures.append(f"{case.id}: planned {got}, offline {case.expected}")
            if any(tag.lower() in result.plan.rationale.lower() for tag in TAGS):
                failures.append(f"{case.id}: rationale {result.plan.rationale!r}")
            missed = _mistakes_answered(case, scripted.made, result.transcript or {})
            failures += [f"{case.id}: {m}" for m in missed + stub.template_problems()]
    assert failures == []
    assert len(cases) == 30 and set(made) == set(MISTAKES), made  # every kind was made
