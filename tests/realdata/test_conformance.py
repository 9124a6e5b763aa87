"""Real public data sets through ``mlpilot run`` and ``mlpilot predict``, as a user runs them.

Each set must succeed on its named target and family, and its logged model must predict
held-out raw rows better than a trivial baseline, on a metric that sees through
imbalance: balanced accuracy at least 0.05 above 1/(number of classes), or r² above 0.05.
"""

from __future__ import annotations

import pandas as pd
import pytest
from sklearn.metrics import balanced_accuracy_score, r2_score

from realdata.cases import CASES, FAMILIES, Case
from realdata.conftest import CaseResult

pytestmark = [pytest.mark.integration, pytest.mark.slow]
MARGIN = 0.05


def _label(value: object) -> str:
    """Labels compared as a person reads them: case, spaces and 1 vs 1.0 aside."""
    text = str(value).strip().lower()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def _explain(result: CaseResult) -> str:
    outcome = result.outcome
    return (
        f"{result.case.name}: status {outcome.get('status')}, error {outcome.get('error')}\n"
        f"run stderr: {result.run_stderr[-1500:]}\nprediction: {result.predict_error}"
    )


def score(result: CaseResult) -> tuple[float, float]:
    """(score on the held-out rows, the baseline it must beat)."""
    assert result.predictions is not None, _explain(result)
    predicted = result.predictions["prediction"]
    truth = result.truth
    assert truth is not None and len(predicted) == len(truth)
    known = truth.notna().to_numpy()  # held-out rows without a target cannot be scored
    predicted, truth = predicted[known], truth[known]
    if result.case.task == "regression":  # the baseline predicts the mean: r² 0
        return float(r2_score(truth.astype(float), predicted.astype(float))), 0.0
    y_true, y_pred = truth.map(_label), predicted.map(_label)
    classes = y_true.nunique()
    return float(balanced_accuracy_score(y_true, y_pred)), 1.0 / classes


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_real_data_set(case: Case, realdata_results: dict[str, CaseResult]) -> None:
    result = realdata_results[case.name]
    outcome = result.outcome
    assert outcome.get("status") == "SUCCEEDED", _explain(result)
    steps = {s["tool"]: s["args"] for s in outcome["plan"]["steps"]}
    assert steps["load_data"]["target"] == case.target  # the named target, never another
    model_step = steps.get("train_model") or steps.get("optimize_model")
    assert model_step is not None and model_step["model"] == case.family
    main = f"test_{outcome['main_metric']}"
    assert main in outcome["metrics"], sorted(outcome["metrics"])
    value, baseline = score(result)
    assert value > baseline + MARGIN, f"{case.name}: {value:.3f} vs baseline {baseline:.3f}"


def test_family_coverage() -> None:
    """Each model family runs on a binary, a multiclass and a regression set."""
    seen = {(c.family, c.task) for c in CASES}
    missing = [(f, t) for f in FAMILIES for t in ("binary", "multiclass", "regression")]
    assert [pair for pair in missing if pair not in seen] == []


def test_label_kinds_covered() -> None:
    labels = {c.label for c in CASES if c.task != "regression"}
    for kind in ("int", "bool", "yes/no text", "text", "mixed-case text", "float-coded int"):
        assert kind in labels


def report(results: dict[str, CaseResult]) -> pd.DataFrame:
    """The table the closing note quotes: set, task, labels, score, baseline, seconds."""
    rows = []
    for name, result in results.items():
        value = baseline = float("nan")
        if result.predictions is not None:
            value, baseline = score(result)
        rows.append(
            {
                "set": name,
                "task": result.case.task,
                "labels": result.case.label,
                "family": result.case.family,
                "status": result.outcome.get("status"),
                "score": round(value, 3),
                "baseline": round(baseline, 3),
                "seconds": round(result.seconds, 1),
            }
        )
    return pd.DataFrame(rows)


def test_print_report(
    realdata_results: dict[str, CaseResult], capsys: pytest.CaptureFixture[str]
) -> None:
    table = report(realdata_results)
    with capsys.disabled():
        print("\n" + table.to_string(index=False))
    assert len(table) == len(CASES)
