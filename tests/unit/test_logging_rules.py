"""No exception is swallowed silently: a broad handler re-raises or leaves a log line.

Checked by walking the source (nothing is imported): every ``except Exception`` or
``except BaseException`` either raises again or calls the module's logger, ``suppress``
never hides ``Exception``, and a module with such a handler has a module logger
(``logging.getLogger(__name__)``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

FOLDERS = ("platform", "tracking", "dashboards", "adapters")
BROAD = {"Exception", "BaseException"}
LOG_CALLS = {"debug", "info", "warning", "error", "exception", "critical"}


def sources() -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((REPO / folder).rglob("*.py"))]


def _broad(handler: ast.ExceptHandler) -> bool:
    kind = handler.type
    names = kind.elts if isinstance(kind, ast.Tuple) else [kind] if kind is not None else []
    return kind is None or any(isinstance(n, ast.Name) and n.id in BROAD for n in names)


def _handled(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(handler):
        if isinstance(node, ast.Raise):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOG_CALLS
            and ast.unparse(node.func.value) in ("logger", "log", "_log", "logging")
        ):
            return True
        # a module's own helper that logs the failure (``_log_failure(exc, stage)``)
        helper = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if helper and node.func.id.startswith("_log"):  # type: ignore[union-attr]
            return True
    return False


def test_broad_handlers_raise_or_log() -> None:
    silent = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and _broad(node) and not _handled(node):
                silent.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert silent == []


def test_suppress_never_hides_every_exception() -> None:
    found = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func).endswith("suppress")
                and any(ast.unparse(a) in BROAD for a in node.args)
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_modules_that_handle_errors_have_a_module_logger() -> None:
    missing = []
    for path in sources():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        handles = any(isinstance(n, ast.ExceptHandler) and _broad(n) for n in ast.walk(tree))
        if handles and "getLogger(__name__)" not in text:
            missing.append(str(path.relative_to(REPO)))
    assert missing == []
