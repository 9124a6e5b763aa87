"""No function in ``platform/agent/`` is longer than 60 lines (signature and body)."""

from __future__ import annotations

import ast

from helpers import REPO

MAX_LINES = 60
AGENT = REPO / "platform" / "agent"


def function_lengths() -> dict[str, int]:
    """``file:function`` → its length in lines, from ``def`` (or its first decorator) to
    its last line; nested functions and methods are counted on their own too."""
    lengths: dict[str, int] = {}
    for path in sorted(AGENT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                lengths[f"{path.name}:{node.name}"] = node.end_lineno - first + 1
    return lengths


def test_the_count_sees_the_orchestrator() -> None:
    lengths = function_lengths()
    assert "orchestrator.py:run" in lengths and "preparing.py:prepare" in lengths
    assert all(n > 0 for n in lengths.values())


def test_no_agent_function_is_over_60_lines() -> None:
    too_long = {name: n for name, n in function_lengths().items() if n > MAX_LINES}
    assert too_long == {}
