"""The GPU speedups and Benchmarks pages' computations, on recorded benchmark documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlpilot.dashboards import speedups_view as view

DATA = Path(__file__).parent / "data" / "benchmarks"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def all_docs() -> list[dict[str, Any]]:
    return [
        *load("compare_gpu_ran.json"),
        load("compare_gpu_unavailable.json"),
        load("stages_gpu_unavailable.json"),
        load("automl.json"),
        load("scale.json"),
    ]


def test_only_compare_and_stage_documents_give_points() -> None:
    found = view.points(all_docs())
    assert {p.source for p in found} == {view.SOURCE_COMPARE, view.SOURCE_STAGES}
    assert view.experiments(found) == [view.STAGES_EXPERIMENT, "churn", "sales"]


def test_a_leg_that_did_not_run_is_unavailable_never_estimated() -> None:
    found = view.points([load("compare_gpu_unavailable.json"), load("stages_gpu_unavailable.json")])
    assert found and all(p.speedup is None and p.gpu_s is None for p in found)
    assert all(p.status.startswith("unavailable: no CUDA driver") for p in found)
    assert all(view.point_cells(p)[7] == "unavailable" for p in found)
    assert view.series(found) == {}


def test_series_keep_recorded_speedups_per_stage_by_size_with_the_gpu_share() -> None:
    lines = view.series(view.points(all_docs()))
    # clean is mostly on the CPU and score refused: neither is drawn as a speedup
    assert set(lines) == {"load", "features", "train", "total", "wall"}
    train = lines["train"]
    assert [p.rows for p in train] == [100_000, 1_000_000]
    assert [p.experiment for p in train] == ["sales", "churn"]
    assert train[0].speedup == 6.1 and train[0].gpu_share == 0.96
    assert "GPU share 96%" in view.hover(train[0]) and "NVIDIA H100" in view.hover(train[0])


def test_mostly_cpu_and_refused_stages_say_why_in_the_table() -> None:
    by_stage = {p.stage: p for p in view.points(load("compare_gpu_ran.json")[:1])}
    clean, score = view.point_cells(by_stage["clean"]), view.point_cells(by_stage["score"])
    assert clean[7] == "—" and clean[8] == "21%" and clean[9].startswith("mostly CPU")
    assert score[7] == "—" and score[9].startswith("refused: ran on the CPU")


def test_filter_by_experiment() -> None:
    found = view.points(all_docs())
    assert {p.experiment for p in view.only(found, ["churn"])} == {"churn"}
    assert view.only(found, []) == found


def test_automl_table_has_every_tool_and_verdict_and_shows_a_failure() -> None:
    doc = load("automl.json")
    assert view.automl_header(doc) == [
        "data set",
        "metric",
        "mlpilot",
        "flaml",
        "autogluon",
        "vs flaml",
        "vs autogluon",
    ]
    rows = {r[0]: r for r in view.automl_rows(doc)}
    assert rows["ISLR/Default"][2] == "0.9487 in 55.1 s"
    assert rows["load_wine"][3] == "0.9907 in 58 s (log loss 0.2507)"
    assert rows["ggplot2movies/movies"][4].startswith("failed: autogluon failed")
    assert rows["load_wine"][5] == "loss"
    assert view.automl_counts(doc)[0] == "mlpilot vs flaml: 0 wins, 3 ties (±0.005), 1 losses"


def test_a_table_of_unknown_rows_renders_every_field() -> None:
    columns, rows = view.generic_table(
        [{"tool": "a", "score": 0.123456, "cost": {"s": 3}}, {"tool": "b", "refused": "why"}]
    )
    assert columns == ["tool", "score", "cost.s", "refused"]
    assert rows == [["a", "0.1235", "3", "—"], ["b", "—", "—", "why"]]
    facts = view.doc_facts(load("scale.json"))
    assert facts["kind"] == "scale" and facts["hardware.cpu_count"] == "2" and "rows" not in facts
