"""Every dashboard page on seeded data, in Debian's Chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import SCRIPT_PROMPT, Dashboard, get_status, wait_until
from helpers import MLPILOT, run_cli

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_runs_page_lists_runs_with_badges_and_links(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#runs-table td")
    assert re.search(r"\d+ runs", page.inner_text("#runs-total"))
    table = page.inner_text("#runs-table")
    assert "SUCCEEDED" in table and "FAILED" in table
    trained = seeded_home["trained"]["run_id"]
    page.click(f"a[href='/run/{trained}']")
    page.wait_for_selector("#run-title")
    assert trained in page.inner_text("#run-title")
    assert "train a random forest to predict sales" in page.inner_text("#run-prompt")
    assert "load_data" in page.inner_text("#run-plan")
    assert "open_pipeline(" in page.inner_text("#run-code")
    assert page.locator("#run-plots img").count() >= 2
    assert "SUCCEEDED" in page.inner_text("#run-events")
    assert "models:/" in page.inner_text("#run-model")


def test_filtering_and_paging_happen_on_the_server(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#runs-table td")
    page.fill("#runs-prompt", "tune xgboost")
    page.keyboard.press("Enter")
    # a locator wait: the page's content security policy refuses wait_for_function's eval
    page.locator("#runs-total", has_text=re.compile(r"^1 run")).wait_for()
    assert "tune xgboost" in page.inner_text("#runs-table")


def test_script_in_a_prompt_is_shown_as_text(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    failed = seeded_home["failed"]
    assert failed and failed["run_id"]
    page.goto(dashboard.url + f"/run/{failed['run_id']}")
    page.wait_for_selector("#run-prompt")
    assert SCRIPT_PROMPT in page.inner_text("#run-prompt")
    assert page.locator("#run-prompt script").count() == 0
    assert page.dialogs == []
    assert "no_such_column" in page.inner_text("#run-error")


def _row(page: Any, run_id: str) -> Any:
    return page.locator(f"#runs-table tr:has(a[href='/run/{run_id}'])")


def test_runs_table_fills_template_and_planner_and_filters_per_column(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#runs-table td")
    tuned = _row(page, seeded_home["tuned"]["run_id"])
    assert tuned.locator("td[data-dash-column='template']").inner_text().strip()
    assert "offline" in tuned.locator("td[data-dash-column='planner']").inner_text()
    value = tuned.locator("td[data-dash-column='value']").inner_text()
    assert re.fullmatch(r"(rmse|mae|r2) [\d.]+", value.strip()), value  # names its metric
    template = tuned.locator("td[data-dash-column='template']").inner_text().strip()
    page.fill("th.dash-filter[data-dash-column='template'] input", template)
    page.keyboard.press("Enter")
    page.locator("#runs-total", has_text=re.compile(r"^\d+ runs?$")).wait_for()
    cells = page.locator("#runs-table td[data-dash-column='template']")
    wait_until(lambda: cells.count() and all(template in t for t in cells.all_inner_texts()))


def test_runs_checkboxes_and_compare_selected(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    a, b = seeded_home["trained"]["run_id"], seeded_home["tuned"]["run_id"]
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#runs-table td")
    assert page.locator("#runs-compare-link").count() == 0  # nothing ticked yet
    for run_id in (a, b):
        _row(page, run_id).locator("input[type=checkbox]").check()
    page.locator("#runs-selection", has_text="2 selected").wait_for()
    page.click("#runs-compare-link")
    page.wait_for_url(re.compile(r"/compare\?runs="))
    assert a in page.url and b in page.url
    _check_compare_page(page, a, b)


def test_compare_two_runs(page: Any, dashboard: Dashboard, seeded_home: dict) -> None:
    a, b = seeded_home["trained"]["run_id"], seeded_home["tuned"]["run_id"]
    page.goto(dashboard.url + "/compare")
    search = page.locator("input.dash-dropdown-search")
    for run_id in (a, b):
        if not search.is_visible():  # choosing an option may close the menu
            page.click("#compare-runs")
        search.fill(run_id[:8])
        page.locator("label.dash-dropdown-option", has_text=run_id[:8]).click()
    _check_compare_page(page, a, b)
    assert "model.family" in page.inner_text("#compare-params")
    page.locator("#compare-diff-only input[type=checkbox]").uncheck()  # every parameter
    page.locator("#compare-body h3", has_text=re.compile(r"^Parameters$")).wait_for()


def _check_compare_page(page: Any, a: str, b: str) -> None:
    """Sections, readable names, best marked, rounded figures, and SVG plots (not WebGL)."""
    page.wait_for_selector("#compare-metrics td")
    metrics = page.inner_text("#compare-metrics")
    assert "test_rmse" in metrics and "★" in metrics and "time_" not in metrics
    assert not re.search(r"\d\.\d{6,}", metrics), metrics  # no 16-digit floats
    assert "time_total_s" in page.inner_text("#compare-timings")
    assert "sales" in page.inner_text("#compare-dataset")
    legend = page.inner_text("#compare-legend")
    assert a[:8] in legend and b[:8] in legend and "·" in legend
    page.wait_for_selector("#compare-parallel .main-svg")
    lines = page.locator("#compare-parallel .scatterlayer .trace")
    assert lines.count() == 2  # one polyline per run, drawn as SVG paths
    assert page.locator("#compare-parallel .scatterlayer path.js-line").count() == 2
    page.wait_for_selector("#compare-bars .main-svg")
    assert page.locator("#compare-bars .barlayer path").count() >= 2
    assert page.locator("#compare-body canvas").count() == 0  # no WebGL anywhere


def _y_ticks(page: Any) -> list[str]:
    return page.locator("#studies-history .yaxislayer-above .ytick text").all_text_contents()


def test_studies_page_opens_on_the_busiest_study_with_every_trial_state(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    mixed = seeded_home["studies"]["mixed"]
    page.goto(dashboard.url + "/studies")
    page.wait_for_selector("#studies-summary td")
    summary = page.inner_text("#studies-summary")
    assert mixed in summary and "minimize" in summary and "rmse" in summary
    page.wait_for_selector("#studies-history .main-svg")  # plots draw after the table
    legend = page.locator("#studies-history .legend").first.text_content() or ""
    for state in ("complete", "pruned", "failed", "best"):
        assert f"{mixed} · {state}" in legend, legend
    assert page.locator("#studies-history .scatterlayer .point").count() >= 40
    # importances per family of the AutoML study, each bar labelled with its value
    page.wait_for_selector("#studies-importances .main-svg")
    titles = page.text_content("#studies-importances") or ""
    assert f"{mixed} · rf" in titles and f"{mixed} · xgb" in titles
    assert "learning_rate" in titles and "n_estimators" in titles
    assert re.search(r"0\.\d{3}", titles)  # the values, not only bars
    # intermediate values, pruned trials among them, and parallel coordinates of a family
    page.wait_for_selector("#studies-intermediate .main-svg")
    assert "pruned" in (page.text_content("#studies-intermediate .legend") or "")
    page.wait_for_selector("#studies-parallel .main-svg")
    assert "parallel coordinates" in (page.text_content("#studies-parallel") or "")


def test_studies_log_axis_and_normalised_overlay(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    names = seeded_home["studies"]
    page.goto(dashboard.url + "/studies")
    page.wait_for_selector("#studies-history .ytick")
    linear = _y_ticks(page)
    assert "0" in linear  # the outlier (5,000) squashes the other trials near zero
    page.click("#studies-log label")
    wait_until(lambda: _y_ticks(page) != linear and _y_ticks(page))
    assert "0" not in _y_ticks(page)  # a log axis has no zero
    # a second study, of another metric and direction: one labelled axis per metric
    page.click("#studies-choice")
    page.locator("input.dash-dropdown-search").fill(names["single"])
    page.locator("label.dash-dropdown-option", has_text=names["single"]).click()
    page.keyboard.press("Escape")
    page.locator("#studies-summary", has_text=names["single"]).wait_for()
    # axis titles are SVG text in the info layer (g-ytitle, g-y2title, …)
    titles = page.text_content("#studies-history .infolayer") or ""
    assert "rmse (minimize)" in titles and "r2 (maximize)" in titles, titles
    page.click("#studies-mode >> text=normalised")
    page.locator("#studies-history .infolayer", has_text="normalised score").wait_for()
    page.click("#studies-x >> text=elapsed time")
    page.locator("#studies-history .infolayer", has_text="elapsed time").wait_for()


def test_studies_are_selected_by_experiment(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + "/studies")
    page.wait_for_selector("#studies-summary td")
    page.click("#studies-experiment")
    page.locator("label.dash-dropdown-option", has_text="mlpilot").click()
    page.keyboard.press("Escape")
    page.locator("#studies-summary", has_text="sales-xgb").wait_for()
    summary = page.inner_text("#studies-summary")
    assert "sales-auto-mixed" not in summary and "mlpilot" in summary


def test_a_search_run_links_to_its_study_and_shows_its_optuna_plots(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    tuned = seeded_home["tuned"]["run_id"]
    page.goto(dashboard.url + f"/run/{tuned}")
    page.wait_for_selector("#run-search")
    assert page.locator("#run-optuna-plots img").count() >= 1
    assert "optimization_history.png" in page.inner_text("#run-optuna-plots")
    page.click("#run-study-link")
    page.locator("#studies-summary", has_text="sales-xgb").wait_for()
    assert "sales-auto-mixed" not in page.inner_text("#studies-summary")


def test_speedups_page_reports_the_missing_gpu(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + "/speedups")
    page.wait_for_selector("#speedups-status")
    assert "GPU leg unavailable" in page.inner_text("#speedups-status")
    assert page.locator("#speedups-bars").count() == 1
    table = page.inner_text("#speedups-table")
    assert "CPU device" in table and "GPU leg unavailable" in table


def test_models_page_shows_versions_aliases_and_lineage(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + "/models")
    page.wait_for_selector("#models-list td")
    text = page.inner_text("#models-list")
    assert "sales-model" in text and "@champion" in text
    assert re.search(r"\b(rmse|mae|r2) \d", text), text  # the lineage metric and its value


def _pick(page: Any, dropdown: str, label: str) -> None:
    page.click(dropdown)
    page.locator("label.dash-dropdown-option", has_text=label).click()


def test_an_alias_is_set_moved_and_deleted_from_the_models_page(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings

    settings = Settings.from_env({"MLPILOT_HOME": str(seeded_home["home"])})
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    # a second version to move to (its files are not what this test is about)
    client.create_model_version("sales-model", source=str(seeded_home["base"]))
    page.goto(dashboard.url + "/models")
    page.wait_for_selector("#models-list td")
    _pick(page, "#models-alias-version", "v2")
    page.fill("#models-alias-name", "challenger")
    page.click("#models-alias-set")
    page.locator("#models-alias-done", has_text="sales-model@challenger → version 2").wait_for()
    page.locator("#models-list", has_text="@challenger → v2").wait_for()
    _pick(page, "#models-alias-version", "v1")
    page.click("#models-alias-set")
    page.locator("#models-alias-done", has_text="(was version 2)").wait_for()
    assert str(client.get_registered_model("sales-model").aliases["challenger"]) == "1"
    page.fill("#models-alias-name", "latest")
    page.click("#models-alias-set")
    page.locator("#models-alias-refused", has_text="refused").wait_for()
    page.fill("#models-alias-name", "challenger")
    page.click("#models-alias-delete")
    page.locator("#models-alias-done", has_text="deleted").wait_for()
    aliases = client.get_registered_model("sales-model").aliases
    assert "challenger" not in aliases and "champion" in aliases
    # the same write from another site is refused by the gate before the callback runs
    body = {
        "output": "..models-alias-result.children...models-list.children..",
        "outputs": [
            {"id": "models-alias-result", "property": "children"},
            {"id": "models-list", "property": "children"},
        ],
        "inputs": [
            {"id": "models-alias-set", "property": "n_clicks", "value": 9},
            {"id": "models-alias-delete", "property": "n_clicks", "value": 0},
        ],
        "state": [
            {"id": "models-alias-model", "property": "value", "value": "sales-model"},
            {"id": "models-alias-version", "property": "value", "value": "2"},
            {"id": "models-alias-name", "property": "value", "value": "champion"},
        ],
        "changedPropIds": ["models-alias-set.n_clicks"],
    }
    answer = page.request.post(
        dashboard.url + "/_dash-update-component",
        data=json.dumps(body),
        headers={"Content-Type": "application/json", "Origin": "http://evil.example"},
    )
    assert answer.status == 403
    assert str(client.get_registered_model("sales-model").aliases["champion"]) == "1"


def test_chat_upload_run_and_watch_it_finish(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    page.goto(dashboard.url + "/chat")
    page.wait_for_selector("#chat-session-id")
    page.set_input_files("#chat-upload input[type=file]", str(seeded_home["data"]))
    page.wait_for_selector("#chat-uploaded")
    page.fill("#chat-prompt", "train a ridge regression to predict sales")
    page.click("#chat-send")
    page.wait_for_selector("#chat-progress")
    page.wait_for_selector("#chat-status", timeout=180_000)
    assert "SUCCEEDED" in page.inner_text("#chat-status")
    assert "RUNNING" in page.inner_text("#chat-progress")
    assert "test_rmse" in page.inner_text("#chat-result")
    assert "train a ridge regression" in page.inner_text("#chat-history")


def test_auth_refuses_requests_without_credentials(seeded_home: dict) -> None:
    server = Dashboard(seeded_home["home"], MLPILOT_DASH_USER="ana", MLPILOT_DASH_PASSWORD="s3cret")
    try:
        for path in ("/", "/models", "/_dash-layout"):
            assert get_status(server.url + path) == 401
            assert get_status(server.url + path, ("ana", "wrong")) == 401
        assert get_status(server.url + "/", ("ana", "s3cret")) == 200
    finally:
        server.stop()


def _watch_the_search_live(page: Any, server: Dashboard, run_id: str) -> None:
    """The Runs page shows the running search's trials and refreshes them by itself."""
    page.goto(server.url + "/")
    bar = page.locator("#runs-live-bars progress")
    bar.first.wait_for()
    cell = _row(page, run_id).locator("td[data-dash-column='progress']")
    first = wait_until(lambda: re.search(r"(\d+)/400 trials", cell.inner_text()), timeout=60)
    # no reload: the interval brings the next count while the run goes on
    wait_until(
        lambda: (
            (m := re.search(r"(\d+)/400 trials", cell.inner_text())) and int(m[1]) > int(first[1])
        ),
        timeout=90,
    )


def test_the_cancel_button_stops_a_running_run(
    page: Any, seeded_home: dict, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "MLPILOT_HOME": str(home), "MLPILOT_LLM": "offline"}
    for name in ("MLFLOW_TRACKING_URI", "MLPILOT_MONGO_URI", "MLPILOT_DASH_USER"):
        env.pop(name, None)
    prompt = "tune a random forest for 400 trials to predict sales"
    running = subprocess.Popen(
        [MLPILOT, "run", prompt, "--data", str(seeded_home["data"]), "--engine", "cpu"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def running_run() -> dict | None:
        done = run_cli("runs", "list", "--limit", "1", "--json", env={"MLPILOT_HOME": str(home)})
        runs = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []
        return runs[0] if runs and runs[0]["status"] == "RUNNING" else None

    server = None
    try:
        run = wait_until(running_run, timeout=90)
        server = Dashboard(home)
        _watch_the_search_live(page, server, run["run_id"])
        page.goto(f"{server.url}/run/{run['run_id']}")
        page.click("#run-cancel")
        page.locator("#run-cancel-result", has_text="CANCELLED").wait_for()
        assert running.wait(timeout=60) == 130  # the owner stopped, saying it was cancelled
        page.reload()
        page.wait_for_selector("#run-title")
        assert "CANCELLED" in page.inner_text("#run-title")
        assert page.locator("#run-cancel").count() == 0  # nothing left to cancel
    finally:
        running.kill()
        if server is not None:
            server.stop()
