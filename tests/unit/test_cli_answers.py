"""Query answers as the chat and ``mlpilot run`` print them: tables for people."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from mlpilot.platform.cli import answers

STAMP = 1_765_000_000_000  # epoch milliseconds, as MLflow stores start times


def _printed(capsys: pytest.CaptureFixture[str], tool: str, answer: dict) -> str:
    answers.print_answer(tool, answer)
    return capsys.readouterr().out


def test_a_run_listing_shows_local_times_and_short_ids(capsys: pytest.CaptureFixture[str]) -> None:
    run = {
        "run_id": "0123456789abcdef0123456789abcdef",
        "experiment": "sales",
        "start_time": STAMP,
        "state": "SUCCEEDED",
        "metric": "rmse",
        "metrics": {"test_rmse": 12.3456789, "cv_rmse": 13.0},
        "prompt": "predict sales",
    }
    out = _printed(capsys, "show_runs", {"scope": "all", "runs": [run]})
    local = datetime.fromtimestamp(STAMP / 1000).strftime("%m-%d %H:%M")
    assert "runs of every experiment, newest first" in out
    assert local in out and "01234567" in out and "rmse=12.35" in out
    assert "{" not in out and str(STAMP) not in out and "0123456789abcdef0123" not in out


def test_a_comparison_lists_scores_first_and_says_what_it_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = [
        {
            "run_id": f"{i}" * 32,
            "start_time": STAMP,
            "metrics": {"test_f1": 0.5 + i / 10, "cv_f1": 0.4},
            "params": {"model.family": fam, **{f"p{k}": str(i + k) for k in range(12)}},
        }
        for i, fam in ((1, "rf"), (2, "xgb"))
    ]
    answer = {
        "runs": runs,
        "metric_keys": ["cv_f1", "test_f1"],
        "differing_params": ["model.family", *(f"p{k}" for k in range(12))],
    }
    out = _printed(capsys, "compare_runs", answer)
    assert out.index("test_f1") < out.index("cv_f1")
    assert re.search(r"model\.family\s+rf\s+xgb", out)
    assert "5 more rows: mlpilot runs compare 11111111 22222222" in out


def test_a_question_back_is_printed_as_itself(capsys: pytest.CaptureFixture[str]) -> None:
    out = _printed(capsys, "none", {"question": "Which column?", "reason": "names nothing"})
    assert out.strip() == "Which column?"


def test_brackets_from_a_run_are_shown_not_read_as_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A prompt, experiment or parameter a run carries is printed as it is."""
    run = {"run_id": "ab" * 16, "experiment": "[bold]exp", "prompt": "[red]x[/red]", "metrics": {}}
    out = _printed(capsys, "show_runs", {"scope": "all", "runs": [run]})
    assert "[bold]exp" in out and "[red]x[/red]" in out
    out = _printed(capsys, "show_study", {"name": "[blink]s", "n_trials": 1, "best_params": {}})
    assert "study [blink]s" in out


def test_the_chat_page_gets_the_same_cells_the_cli_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One formatter: the dashboard renders ``answer_table``'s rows, the CLI prints them."""
    answer = {
        "path": "sales.csv",
        "rows": 3,
        "columns": [{"name": "price", "kind": "numeric", "missing": 0.5, "unique": 3}],
    }
    shown = answers.answer_table("describe_data", answer)
    assert isinstance(shown, answers.AnswerTable)
    assert shown.title == "sales.csv: 3 rows"
    assert shown.columns == ["column", "kind", "missing", "unique"]
    assert shown.rows == [["price", "numeric", "0.5", "3"]]
    assert re.search(r"price\s+numeric\s+0\.5\s+3", _printed(capsys, "describe_data", answer))
    assert answers.answer_table("show_runs", {"scope": "all", "runs": []}) == (
        "runs of every experiment, newest first: none yet"
    )
    assert answers.answer_table("no_such_tool", answer) is None  # shown as JSON
