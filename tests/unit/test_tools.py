"""The @tool decorator builds schemas from hints and docstrings; arguments are validated."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Annotated, Literal

import pytest

from mlpilot.platform.errors import MlpilotError, PlanError
from mlpilot.platform.tools import (
    BUILTIN_TOOLS,
    CLASSIFICATION_METRICS,
    METRICS,
    REGRESSION_METRICS,
    Bounds,
    default_registry,
    tool,
)

CANONICAL = {
    "load_data",
    "clean_data",
    "engineer_features",
    "train_model",
    "optimize_model",
    "evaluate_model",
    "feature_importance",
    "compare_engines",
    "register_model",
    "predict",
    "describe_data",
    "show_runs",
    "show_best_model",
    "compare_runs",
    "show_study",
}


def test_every_canonical_tool_is_declared() -> None:
    assert {t.name for t in BUILTIN_TOOLS} == CANONICAL
    kinds = {t.name: t.kind for t in BUILTIN_TOOLS}
    assert {n for n, k in kinds.items() if k == "query"} == {
        "describe_data",
        "show_runs",
        "show_best_model",
        "compare_runs",
        "show_study",
    }


def test_schema_from_hints_and_docstring() -> None:
    @tool(kind="pipeline", runtime="pkg.mod:step")
    def smooth(
        window: Annotated[int, Bounds(1, 50)],
        method: Literal["mean", "median"] = "mean",
        label: str | None = None,
    ) -> None:
        """Smooth a column.

        Args:
            window: Rolling window length.
            method: How to aggregate the
                window.
            label: Optional label.
        """

    params = smooth.parameters
    assert smooth.description == "Smooth a column."
    assert params["required"] == ["window"]
    assert params["properties"]["window"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 50,
        "description": "Rolling window length.",
    }
    assert params["properties"]["method"]["enum"] == ["mean", "median"]
    assert params["properties"]["method"]["description"] == "How to aggregate the window."
    assert params["properties"]["label"]["type"] == ["string", "null"]
    assert smooth.function_schema()["function"]["name"] == "smooth"


def test_undocumented_argument_is_refused() -> None:
    with pytest.raises(ValueError, match="not documented"):

        @tool(kind="query")
        def broken(x: int) -> None:
            """No args section."""


def test_validation_fills_defaults_and_reports_every_problem_for_the_llm() -> None:
    registry = default_registry()
    optimize = registry.get("optimize_model")
    assert optimize.validate({"model": "rf", "trials": 35.0})["trials"] == 35
    assert optimize.validate({})["early_stopping"] is True
    with pytest.raises(PlanError) as info:
        optimize.validate({"model": "forest", "trials": 0, "speed": "fast"})
    text = info.value.one_line()
    assert "unknown argument 'speed'" in text
    assert "'model' must be one of" in text and "'rf'" in text
    assert "'trials' must be at least 1" in text


def test_booleans_are_not_integers() -> None:
    with pytest.raises(PlanError, match="must be a integer"):
        default_registry().get("evaluate_model").validate({"cv_folds": True})


def test_unknown_tool_lists_valid_ones() -> None:
    with pytest.raises(PlanError) as info:
        default_registry().get("train_everything")
    assert "train_model" in info.value.one_line()


def test_plugin_module_adds_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_tools.py").write_text(
        textwrap.dedent(
            '''
            from mlpilot.platform.tools import tool

            @tool(kind="pipeline", stage="features", runtime="my_tools:add_ratio")
            def add_ratio(numerator: str, denominator: str) -> None:
                """Add a ratio column.

                Args:
                    numerator: Column on top.
                    denominator: Column below.
                """
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = default_registry(["my_tools"])
    assert registry.get("add_ratio").kind == "pipeline"
    sys.modules.pop("my_tools", None)
    with pytest.raises(MlpilotError, match="cannot import plugin module"):
        default_registry(["no_such_module_xyz"])


def test_metric_names_agree_between_the_tools_and_the_runtime() -> None:
    from mlpilot.platform.ml import metrics

    assert tuple(CLASSIFICATION_METRICS) == metrics.CLASSIFICATION
    assert tuple(REGRESSION_METRICS) == metrics.REGRESSION
    assert set(METRICS) == set(metrics.CLASSIFICATION) | set(metrics.REGRESSION)
