"""Plans cannot reach outside: paths are policy, parameters are bounded (DESIGN §8)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import run_cli

from mlpilot.platform.errors import PlanError
from mlpilot.platform.plan import Plan, Step, validate_plan
from mlpilot.platform.plan.paths import PathPolicy, check_paths
from mlpilot.platform.tools import default_registry


def _plan(*steps: tuple[str, dict]) -> Plan:
    return Plan(steps=[Step(tool, args) for tool, args in steps])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "sales.csv"
    path.parent.mkdir()
    path.write_text("x,y\n1,2\n3,4\n")
    return path


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "~/.ssh/id_rsa", "{data}/../../../etc/shadow", "{home}/.aws/credentials"],
)
def test_reads_outside_the_data_file_are_refused(path: str, data: Path, tmp_path: Path) -> None:
    path = path.format(data=data, home=tmp_path)
    plan = _plan(("load_data", {"path": path, "target": "y"}))
    with pytest.raises(PlanError, match="is refused"):
        check_paths(plan, PathPolicy(data_file=str(data)))


def test_the_data_file_and_allowed_folders_are_read(data: Path, tmp_path: Path) -> None:
    other = tmp_path / "shared" / "new.csv"
    plan = _plan(
        ("load_data", {"path": str(data), "target": "y"}),
        ("predict", {"data_path": str(other)}),
    )
    check_paths(plan, PathPolicy(str(data), (str(tmp_path / "shared"),)))
    with pytest.raises(PlanError, match="--allow-read"):
        check_paths(plan, PathPolicy(str(data)))


def test_a_hidden_folder_stays_closed_even_inside_an_allowed_one(tmp_path: Path) -> None:
    plan = _plan(("predict", {"data_path": str(tmp_path / ".secrets" / "keys.csv")}))
    with pytest.raises(PlanError, match=r"hidden folder '\.secrets'"):
        check_paths(plan, PathPolicy(None, (str(tmp_path),)))


def test_a_symlink_into_a_hidden_folder_is_seen_through(tmp_path: Path) -> None:
    hidden = tmp_path / ".ssh"
    hidden.mkdir()
    (hidden / "id_rsa").write_text("KEY")
    link = tmp_path / "innocent.csv"
    os.symlink(hidden / "id_rsa", link)
    plan = _plan(("predict", {"data_path": str(link)}))
    with pytest.raises(PlanError, match="hidden folder"):
        check_paths(plan, PathPolicy(None, (str(tmp_path),)))


@pytest.mark.parametrize("out", ["../../x.csv", "/tmp/x.csv", "~/x.csv", "a/../../b.csv"])
def test_writes_stay_inside_the_run_folder(out: str) -> None:
    plan = _plan(("predict", {"data_path": "d.csv", "output_path": out}))
    with pytest.raises(PlanError, match="output_path"):
        check_paths(plan, PathPolicy("d.csv"))


def test_a_relative_output_is_fine() -> None:
    check_paths(
        _plan(("predict", {"data_path": "d.csv", "output_path": "out/p.csv"})), PathPolicy("d.csv")
    )


@pytest.mark.parametrize(
    "uri",
    ["/tmp/model", "file:///tmp/model", "s3://bucket/model", "http://evil/model", "model.pkl"],
)
def test_models_load_only_from_the_tracking_store(uri: str) -> None:
    plan = _plan(("predict", {"data_path": "d.csv", "model_uri": uri}))
    with pytest.raises(PlanError, match="models:/"):
        check_paths(plan, PathPolicy("d.csv"))


@pytest.mark.parametrize(
    "uri", ["models:/sales@champion", "models:/sales/3", "runs:/abc123/model", "m-0123abcd4567"]
)
def test_store_model_uris_pass(uri: str) -> None:
    check_paths(_plan(("predict", {"data_path": "d.csv", "model_uri": uri})), PathPolicy("d.csv"))


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"n_estimators": 1e12}, "outside"),
        ({"n_estimators": "many"}, "a whole number is needed"),
        ({"n_estimators": 10.5}, "whole number"),
        ({"criterion": "chaos"}, "choose one of"),
        ({"__class__": 1}, "not a parameter"),
        ({"n_jobs": -1}, "not a parameter"),
    ],
)
def test_model_parameters_are_bounded(params: dict, why: str) -> None:
    plan = _plan(
        ("load_data", {"path": "d.csv", "target": "y"}),
        ("train_model", {"model": "rf", "params": params}),
    )
    with pytest.raises(PlanError, match=why):
        validate_plan(plan, default_registry(), None, check_files=False)


def test_sensible_parameters_pass() -> None:
    plan = _plan(
        ("load_data", {"path": "d.csv", "target": "y"}),
        ("train_model", {"model": "xgb", "params": {"n_estimators": 300, "max_depth": 6}}),
    )
    validate_plan(plan, default_registry(), None, check_files=False)


def test_the_search_spaces_lie_within_the_bounds() -> None:
    from mlpilot.platform.ml import families

    for family in families.names():
        for param in families.get(family).params:
            if param.kind != "choice":
                low, high = param.bounds or (0, 0)
                assert low <= float(param.low or 0) <= float(param.high or 0) <= high, (
                    family,
                    param,
                )


@pytest.mark.integration
def test_a_hostile_saved_plan_fails_in_one_line_and_is_recorded(
    tmp_path: Path, home: Path, data: Path
) -> None:
    hostile = tmp_path / "plan.json"
    steps = [
        {"tool": "load_data", "args": {"path": str(data), "target": "y"}},
        {"tool": "train_model", "args": {"model": "linear"}},
        {"tool": "predict", "args": {"data_path": str(data), "output_path": "../../../escape.csv"}},
    ]
    hostile.write_text(json.dumps({"steps": steps}))
    done = run_cli("run", "--plan", str(hostile), "--data", str(data), "--json")
    assert done.returncode == 1
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "FAILED" and outcome["error"]["stage"] == "VALIDATING"
    assert "output_path" in outcome["error"]["message"] and "\n" not in outcome["error"]["message"]
    assert not (tmp_path / "escape.csv").exists()


def test_a_relative_read_is_made_absolute_where_it_was_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline runs in its run folder: a relative name there is another file."""
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "rows.csv").write_text("x\n1\n")
    monkeypatch.chdir(tmp_path)
    plan = _plan(("predict", {"data_path": "new/rows.csv"}))
    check_paths(plan, PathPolicy(read_folders=(str(tmp_path / "new"),)))
    assert plan.steps[0].args["data_path"] == str((tmp_path / "new" / "rows.csv").resolve())


def test_the_saved_plan_hint_only_for_a_saved_plan(tmp_path: Path) -> None:
    outside = str(tmp_path / "other.csv")
    assert "saved plan" not in (PathPolicy().allows_read(outside) or "")
    assert "saved plan" in (PathPolicy(saved_plan=True).allows_read(outside) or "")
