"""A study too big to draw every trial of: the Studies page draws a sample and says so."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from conftest import Dashboard

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRIALS = 2500  # above the page's 2,000 markers a figure


def _big_study(home: Path) -> None:
    import optuna
    from optuna.distributions import FloatDistribution

    from mlpilot.platform.config import Settings
    from mlpilot.platform.ml.hpo import open_storage

    storage = open_storage(Settings.from_env({"MLPILOT_HOME": str(home)}).optuna_storage)
    study = optuna.create_study(study_name="big-sampled", storage=storage)
    rng = random.Random(3)
    dist = {"x": FloatDistribution(0.0, 1.0)}
    study.add_trials(
        [
            optuna.trial.create_trial(
                params={"x": (x := rng.random())}, distributions=dist, value=x + rng.random()
            )
            for _ in range(TRIALS)
        ]
    )


def test_a_big_study_draws_a_sample_and_says_so(page: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _big_study(home)
    server = Dashboard(home)
    try:
        page.goto(server.url + "/studies?study=big-sampled")
        notice = page.locator("#studies-history .gtitle", has_text=f"of {TRIALS:,} trials drawn")
        notice.wait_for()
        assert "best-so-far lines and the table count every trial" in notice.text_content()
        markers = page.locator("#studies-history .scatterlayer .point").count()
        assert 2000 <= markers < TRIALS  # a sample, every new best among it
        assert page.locator("#studies-history .scatterlayer path.js-line").count() == 1
        summary = page.inner_text("#studies-summary")
        assert f"{TRIALS}" in summary and f"of {TRIALS:,}" in summary  # counted, then drawn
    finally:
        server.stop()
