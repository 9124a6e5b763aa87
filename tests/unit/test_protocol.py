"""The parent ↔ pipeline protocol: one module both sides use, strict on both ends."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest
from helpers import REPO

from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.context import PipelineRun
from mlpilot.platform.ml.protocol import PipelineEvent, PipelineResult, ProtocolError


def test_a_result_round_trips() -> None:
    result = PipelineResult(
        status=protocol.SUCCEEDED,
        metrics={"test_rmse": 1.5},
        importance=[{"feature": "x", "importance": 1.0}],
        error=None,
    )
    assert PipelineResult.from_json(result.to_json()) == result


def test_a_field_written_on_one_side_only_fails() -> None:
    data = json.loads(PipelineResult(status=protocol.FAILED).to_json())
    data["renamed_field"] = 1
    with pytest.raises(ProtocolError, match="renamed_field"):
        PipelineResult.from_json(json.dumps(data))


def test_another_protocol_version_is_refused() -> None:
    data = json.loads(PipelineResult(status=protocol.FAILED).to_json())
    data["version"] = protocol.PROTOCOL_VERSION + 1
    with pytest.raises(ProtocolError, match="version"):
        PipelineResult.from_json(json.dumps(data))


def test_events_are_short_and_strict() -> None:
    event = PipelineEvent(type="stage_end", at="t", stage="train", seconds=1.25)
    assert json.loads(event.to_json()) == {
        "type": "stage_end",
        "at": "t",
        "stage": "train",
        "seconds": 1.25,
    }
    assert PipelineEvent.from_json(event.to_json()) == event
    with pytest.raises(ProtocolError, match="unknown pipeline event type"):
        PipelineEvent(type="stage_done", at="t")
    with pytest.raises(ProtocolError, match="colour"):
        PipelineEvent.from_json('{"type": "note", "at": "t", "colour": "red"}')


def test_the_pipeline_writes_what_the_parent_reads(tmp_path: Path) -> None:
    """A run's own result and events go through the protocol's records."""
    run = PipelineRun(plan={}, seed=3, data_path=None, run_dir=tmp_path)
    with run:
        with run.stage("load"):
            run.note("a note")
        run.result.importance = [{"feature": "a", "importance": 1.0}]
    result = PipelineResult.read(tmp_path)
    assert result is not None and result.ok and result.seed == 3
    assert result.notes == ["a note"] and "load" in result.timings
    lines = (tmp_path / protocol.EVENTS_FILE).read_text().splitlines()
    kinds = [PipelineEvent.from_json(line).type for line in lines]
    assert kinds == ["pipeline_start", "stage_start", "note", "stage_end", "pipeline_end"]


def test_every_result_key_the_runtime_sets_is_a_protocol_field() -> None:
    """``run.result.X = …`` anywhere in the runtime must name a field of PipelineResult."""
    known = {f.name for f in fields(PipelineResult)}
    written = set()
    for path in (REPO / "platform" / "ml").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(target, ast.Attribute) and ast.unparse(target.value).endswith(
                "run.result"
            ):
                written.add(target.attr)
    assert written and written <= known


def test_no_module_spells_the_protocol_names_itself() -> None:
    """Environment and file names of the protocol appear in protocol.py alone."""
    # the parent ↔ child names; user settings (MLPILOT_HOME, …) belong to Settings
    names = [
        protocol.ENV_RUN_DIR,
        protocol.ENV_DATA,
        protocol.ENV_ENGINE_USED,
        protocol.ENV_RELAY,
        protocol.ENV_STORE_MODELS,
        protocol.EVENTS_FILE,
        protocol.RESULT_FILE,
        protocol.TRACKING_FILE,
        protocol.STAGED_DIR,
        protocol.STORE_MODELS_DIR,
    ]
    offenders = []
    for folder in ("platform", "tracking", "dashboards"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "protocol.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            # a report's own key that happens to share a name is not the protocol's
            keys = {id(k) for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in names and id(node) not in keys:
                    offenders.append(f"{path.relative_to(REPO)}: {node.value!r}")
    assert offenders == []
