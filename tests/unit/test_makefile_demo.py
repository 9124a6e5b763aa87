"""What `make demo` tells a newcomer to open, and what `make test` installs first."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = (Path(__file__).resolve().parents[2] / "Makefile").read_text(encoding="utf-8")


def _recipe(target: str) -> str:
    match = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", MAKEFILE, re.MULTILINE)
    assert match, f"no {target} rule"
    return match.group(1)


def test_the_demo_names_the_dashboard_beside_the_mlflow_ui_and_the_cli() -> None:
    where = _recipe("demo").split("Where to look:", 1)[1]
    assert "mlpilot dashboard" in where and "http://127.0.0.1:8050/" in where
    assert "mlflow ui" in where and "mlpilot runs list" in where


def test_make_test_installs_chromium_and_a_cjk_font() -> None:
    prerequisites = re.search(r"^test:(.*)$", MAKEFILE, re.MULTILINE)
    assert prerequisites and "$(CHROMIUM)" in prerequisites.group(1)
    assert "$(CJK_FONT)" in prerequisites.group(1)
    assert "$(CJK_FONT): APT_PACKAGE = fonts-noto-cjk" in MAKEFILE
