"""Registering a run's model from the Run and Models pages, moving its aliases, and the
version history and lineage, in Debian's Chromium driven by Playwright (issue 28 item 5).

Every write here is a Dash callback behind the dashboard's gate; the same write posted
from another site is refused before it runs. The page fixture fails a test whose page
broke the content security policy."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import Dashboard

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: after "sales-model" in the alphabet: the alias test of test_dashboard_pages.py finds
#: sales-model first in its dropdown whichever file runs first
MODEL = "tree-model"


def _stores(seeded_home: dict) -> tuple[Any, Any]:
    from mlflow import MlflowClient

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    settings = Settings.from_env({"MLPILOT_HOME": str(seeded_home["home"])})
    return MlflowClient(tracking_uri=settings.tracking_uri), connect(settings)


def _pick(page: Any, dropdown: str, label: str) -> None:
    page.click(dropdown)
    page.locator("label.dash-dropdown-option", has_text=label).click()


def _changes(store: Any, run_id: str) -> list[tuple[Any, ...]]:
    doc = store.get_run(run_id)
    return [(c["action"], c["version"], c.get("alias")) for c in doc["model"]["registry"]]


def test_a_runs_model_is_registered_from_the_run_page(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    client, store = _stores(seeded_home)
    run_id = seeded_home["trained"]["run_id"]
    page.goto(f"{dashboard.url}/run/{run_id}")
    page.fill("#run-register-name", MODEL)
    page.fill("#run-register-alias", "latest")  # MLflow's reserved word: refused, nothing made
    page.click("#run-register")
    page.locator("#run-register-refused", has_text="refused").wait_for()
    assert not client.search_registered_models(f"name = '{MODEL}'")
    page.fill("#run-register-alias", "champion")
    page.click("#run-register")
    page.locator(
        "#run-register-done", has_text=f"registered {MODEL} version 1 as @champion"
    ).wait_for()
    page.locator("#run-registered", has_text=f"{MODEL} version 1").wait_for()
    version = client.get_model_version(MODEL, "1")
    assert version.run_id == run_id and version.source.startswith("models:/m-")
    doc = store.get_run(run_id)
    assert doc["model"]["registered_name"] == MODEL and doc["model"]["version"] == "1"
    assert _changes(store, run_id) == [("registered", "1", "champion")]
    assert doc["model"]["registry"][0]["by"] == "dashboard"


def test_the_models_page_registers_moves_an_alias_and_shows_history_and_lineage(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    client, store = _stores(seeded_home)
    run_id = seeded_home["trained"]["run_id"]
    if not client.search_registered_models(f"name = '{MODEL}'"):  # run alone: version 1 first
        client.create_registered_model(MODEL)
        client.create_model_version(MODEL, source=str(seeded_home["base"]), run_id=run_id)
    page.goto(f"{dashboard.url}/models?run={run_id}")  # the run chosen, as the Run page links
    page.fill("#models-register-name", MODEL)
    page.fill("#models-register-alias", "challenger")
    page.click("#models-register-submit")
    page.locator("#models-register-done", has_text=f"{MODEL} version 2 as @challenger").wait_for()
    page.reload()
    _pick(page, "#models-alias-model", MODEL)
    _pick(page, "#models-alias-version", "v2")
    page.fill("#models-alias-name", "champion")
    page.click("#models-alias-set")
    page.locator("#models-alias-done", has_text=f"{MODEL}@champion → version 2").wait_for()
    assert str(client.get_registered_model(MODEL).aliases["champion"]) == "2"
    assert ("alias moved", "2", "champion") in _changes(store, run_id)  # recorded in both stores
    # the history: every version with its run, created time, aliases and lineage
    card = page.locator(f"[id='models-{MODEL}']")
    card.locator("td", has_text="alias moved").wait_for()
    text = card.inner_text()
    template = store.get_run(run_id)["plan"]["template"]
    for expected in ("@challenger @champion", template, "sales.csv", "registered"):
        assert expected in text, (expected, text)
    assert text.count(run_id[:8]) >= 2, text  # each version names its source run
    assert re.search(r"\b20\d\d-\d\d-\d\d \d\d:\d\d", text), text  # created time
    changes = card.locator(".models-changes").inner_text()
    assert "alias moved" in changes and "v1" in changes and "dashboard" in changes
    # lineage: the source run links to its Run page, which lists the versions made from it
    card.locator(f"a[href='/run/{run_id}']").first.click()
    page.wait_for_url(f"**/run/{run_id}")
    page.locator("#run-registered", has_text=f"{MODEL} version 2").wait_for()
    page.click("#run-registry-changes summary")
    assert "alias moved" in page.inner_text("#run-registry-changes")


def test_a_registration_posted_from_another_site_is_refused(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    client, _ = _stores(seeded_home)
    run_id = seeded_home["trained"]["run_id"]
    page.goto(f"{dashboard.url}/run/{run_id}")  # a page of the dashboard: its token cookie set
    body = {
        "output": "..run-register-result.children...run-model-versions.children..",
        "outputs": [
            {"id": "run-register-result", "property": "children"},
            {"id": "run-model-versions", "property": "children"},
        ],
        "inputs": [{"id": "run-register", "property": "n_clicks", "value": 1}],
        "state": [
            {"id": "run-register-id", "property": "data", "value": run_id},
            {"id": "run-register-name", "property": "value", "value": "evil-model"},
            {"id": "run-register-alias", "property": "value", "value": "champion"},
        ],
        "changedPropIds": ["run-register.n_clicks"],
    }
    url = dashboard.url + "/_dash-update-component"
    headers = {"Content-Type": "application/json"}
    cross = page.request.post(
        url, data=json.dumps(body), headers={**headers, "Origin": "http://evil.example"}
    )
    assert cross.status == 403 and "another site" in cross.text()
    # same origin but without the token dash-renderer sends: refused too
    tokenless = page.request.post(
        url, data=json.dumps(body), headers={**headers, "Origin": dashboard.url}
    )
    assert tokenless.status == 403 and "CSRF" in tokenless.text()
    assert not client.search_registered_models("name = 'evil-model'")
