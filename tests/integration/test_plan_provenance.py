"""Runs from a saved plan record where it came from; `--adapter NAME|none` on plan and run."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from helpers import run_cli

pytestmark = pytest.mark.integration

CHURN = "customer_id,tenure,monthly_charges,payment_method,churned\n" + "".join(
    f"C{i:04d},{i % 50},{40 + i % 37}.5,{['card', 'bank', 'cash'][i % 3]},{'yes' if i % 4 == 0 else 'no'}\n"
    for i in range(200)
)
LOANS = "loan_id,income,loan_amount,grade,interest_rate,default\n" + "".join(
    f"L{i:04d},{30 + i % 70}000,{5 + i % 20}000,{'ABCD'[i % 4]},{5 + i % 9}.5,{int(i % 6 == 0)}\n"
    for i in range(200)
)


@pytest.fixture
def churn_csv(tmp_path: Path) -> Path:
    path = tmp_path / "churn.csv"
    path.write_text(CHURN, encoding="utf-8")
    return path


def _plan(*args: str) -> dict:
    done = run_cli("plan", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_adapter_option_on_plan(home: Path, churn_csv: Path) -> None:
    """Detection itself is covered by the planner cases (kind "adapter"); here the option."""
    loans = churn_csv.with_name("loans.csv")
    loans.write_text(LOANS, encoding="utf-8")
    assert _plan("predict default", "--data", str(loans), "--adapter", "none")["adapter"] is None
    bad = run_cli("plan", "predict churned", "--data", str(churn_csv), "--adapter", "insurance")
    assert bad.returncode == 1 and "finance, medical, retail" in bad.stderr


def test_a_run_from_a_plan_file_records_its_digest_and_prompt(
    home: Path, churn_csv: Path, tmp_path: Path
) -> None:
    prompt = "clean the churn data, fill missing values with the median"
    plan = _plan(prompt, "--data", str(churn_csv), "--target", "churned")
    assert plan["template"] == "clean-only"
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps({**plan, "prompt": prompt}, indent=2), encoding="utf-8")
    digest = hashlib.sha256(saved.read_bytes()).hexdigest()

    done = run_cli(
        "run",
        "--plan",
        str(saved),
        "--data",
        str(churn_csv),
        "--adapter",
        "none",
        "--json",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "SUCCEEDED" and outcome["plan"]["adapter"] is None

    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import open_store
    from mlpilot.tracking.mlflow_store import make_client

    settings = Settings.from_env(dict(os.environ))
    run = make_client(settings).get_run(outcome["run_id"])
    assert run.data.tags["mlpilot.plan.sha256"] == digest
    assert run.data.tags["mlpilot.plan.file"] == str(saved.resolve())
    assert run.data.tags["mlpilot.prompt"] == prompt
    assert open_store(settings).get_run(outcome["run_id"])["prompt"] == prompt
