"""Alias rules: MLflow's own checks, whichever names its release gives them."""

from __future__ import annotations

import pytest

from mlpilot.tracking import registry

CASES = {
    "champion": None,
    "bad'alias": "Invalid alias name",
    "latest": "reserved",
    "LATEST": "reserved",
    "v3": "reserved",
    "V12": "reserved",
    "": "empty",
    "a" * 256: "255",
}


@pytest.mark.parametrize("alias", CASES)
def test_mlflows_alias_rules_are_found_under_either_name(alias: str) -> None:
    expected = CASES[alias]
    problem = registry.alias_problem(alias)
    assert (problem is None) == (expected is None)
    if expected:
        assert expected.lower() in problem.lower()  # type: ignore[union-attr]


@pytest.mark.parametrize("alias", CASES)
def test_without_mlflows_checks_the_same_rules_apply(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.utils import validation

    for names in registry._ALIAS_CHECKS:
        for name in names:
            monkeypatch.delattr(validation, name, raising=False)
    problem = registry.alias_problem(alias)
    assert (problem is None) == (CASES[alias] is None), problem
