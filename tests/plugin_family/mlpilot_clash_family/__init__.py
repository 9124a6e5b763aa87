"""A plugin model family for the tests that takes a built-in family's name (refused)."""

from __future__ import annotations

from typing import Any

from mlpilot.platform.ml.families import Build, Family

__all__ = ["AnotherForest"]


class AnotherForest(Family):
    name = "rf"
    label = "another random forest"

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        raise AssertionError("a refused family is never built")
