"""The GPU speedups and Benchmarks pages in Chromium, on recorded benchmark documents saved
into a real (embedded) metadata store the dashboard reads; the page fixture asserts that no
content security policy violation was logged."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Dashboard

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DATA = Path(__file__).parents[1] / "unit" / "data" / "benchmarks"


@pytest.fixture(scope="module")
def bench_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    home = tmp_path_factory.mktemp("bench") / "home"
    store = connect(Settings.from_env({"MLPILOT_HOME": str(home)}))
    docs = [*json.loads((DATA / "compare_gpu_ran.json").read_text())]
    for name in ("compare_gpu_unavailable", "stages_gpu_unavailable", "automl", "scale"):
        docs.append(json.loads((DATA / f"{name}.json").read_text()))
    for doc in docs:
        doc.pop("created_at", None)
        store.save_benchmark(str(doc.pop("_id", None) or uuid.uuid4().hex), doc)
    server = Dashboard(home)
    yield server
    server.stop()


def test_speedups_across_experiments_draw_recorded_speedups_only(
    page: Any, bench_dashboard: Dashboard
) -> None:
    page.goto(bench_dashboard.url + "/speedups")
    page.wait_for_selector("#speedups-across .scatterlayer .trace")
    traces = page.locator("#speedups-across .scatterlayer .trace")
    # load, features, train, total, wall: clean (mostly CPU) and score (refused) are not
    # drawn, nor is any stage of a comparison whose GPU leg did not run
    assert traces.count() == 5
    assert page.locator("#speedups-across .scatterlayer .point").count() == 10
    labels = page.locator("#speedups-across .scatterlayer text").all_text_contents()
    assert "96%" in labels  # the train stage's GPU share beside its point
    assert page.locator("#speedups-across .gl-container canvas").count() == 0  # SVG, no WebGL
    table = page.inner_text("#speedups-across-table")
    assert "NVIDIA H100 80GB HBM3" in table and "6.1×" in table
    assert "unavailable: no CUDA driver (libcuda) on this machine" in table
    assert "benchmarks/stages.py" in table and "search rf" in table
    assert "mostly CPU: 21%" in table and "refused: ran on the CPU" in table


def test_speedups_filter_by_experiment(page: Any, bench_dashboard: Dashboard) -> None:
    page.goto(bench_dashboard.url + "/speedups")
    page.wait_for_selector("#speedups-across-table")
    page.click("#speedups-experiments")
    page.locator("label.dash-dropdown-option", has_text="churn").click()
    page.keyboard.press("Escape")
    page.wait_for_function(
        "() => !document.querySelector('#speedups-across-table').innerText.includes('sales')"
    )
    table = page.inner_text("#speedups-across-table")
    assert "churn" in table and "(stage benchmark)" not in table
    assert page.locator("#speedups-across .scatterlayer .point").count() == 5


def test_benchmarks_page_shows_the_automl_table_and_scale_rows(
    page: Any, bench_dashboard: Dashboard
) -> None:
    page.goto(bench_dashboard.url + "/benchmarks")
    page.wait_for_selector("#benchmarks-automl-table td")
    head = page.inner_text("#benchmarks-automl-table thead")
    for column in ("mlpilot", "flaml", "autogluon", "vs flaml", "vs autogluon"):
        assert column in head
    table = page.inner_text("#benchmarks-automl-table")
    assert "ISLR/Default" in table and "0.9487 in 55.1 s" in table
    assert "failed: autogluon failed" in table
    counts = page.inner_text("#benchmarks-automl-counts")
    assert "mlpilot vs autogluon: 3 wins, 1 ties (±0.005), 0 losses" in counts
    scale = page.inner_text("#benchmarks-scale")
    assert "needs a budget of 900 s" in scale and "peak_mb" in scale and "5,000,000" in scale
    assert page.locator("#nav-benchmarks").count() == 1


def test_benchmarks_and_speedups_pages_say_when_nothing_is_stored(
    page: Any, tmp_path: Path
) -> None:
    server = Dashboard(tmp_path / "empty-home")
    try:
        page.goto(server.url + "/benchmarks")
        page.wait_for_selector("#benchmarks-automl p")
        assert "no AutoML benchmark stored yet" in page.inner_text("#benchmarks-automl")
        assert "no scale benchmark stored yet" in page.inner_text("body")
        page.goto(server.url + "/speedups")
        page.locator("#speedups-across-body", has_text="no engine comparison").wait_for()
    finally:
        server.stop()
