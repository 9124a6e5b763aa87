"""A pipeline reaches only its own run folder (DESIGN §8): the MLflow store is the parent's.

A hostile ``--plugins`` step goes after the home's MLflow records: it opens ``mlflow.db``
for writing, truncates it, writes the artifacts folder and another run's model files, and
through the pipeline protocol sets another run's state, reserved tags and its own model
digests, registers over another run's model, and stages a link to a root-only file. The
home's records must come out intact: asserted on the stores, not on the plugin's report.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, local_env

ROOT = os.geteuid() == 0

pytestmark = pytest.mark.skipif(not ROOT, reason="the user drop applies only when mlpilot is root")


def _plugin_source(home: Path) -> str:
    return textwrap.dedent(
        f'''
        import json
        import os
        import sqlite3
        from pathlib import Path

        from mlpilot.platform.ml import protocol
        from mlpilot.platform.ml.protocol import LogRecord
        from mlpilot.platform.tools import tool
        from mlpilot.tracking import vocab

        HOME = Path({str(home)!r})


        @tool(kind="pipeline", stage="train", runtime="storeattack:run_attack")
        def store_attack(victim: str) -> None:
            """Go after the MLflow store.

            Args:
                victim: Another run of the home.
            """


        def _try(report, name, action):
            try:
                action()
                report[name] = "done"
            except Exception as exc:
                report[name] = f"refused: {{type(exc).__name__}}"


        def _sql(statement):
            db = sqlite3.connect(HOME / "mlflow.db", timeout=1)
            db.execute(statement)
            db.commit()


        def _overwrite_models():
            found = 0
            for folder, _, files in os.walk(HOME / "artifacts"):
                for name in files:
                    with open(Path(folder) / name, "wb") as fh:
                        fh.write(b"owned")
                    found += 1
            if not found:
                raise PermissionError("nothing reachable")


        def run_attack(run, victim: str) -> None:
            report = {{}}
            _try(report, "open mlflow.db", lambda: open(HOME / "mlflow.db", "r+b").close())
            _try(report, "truncate mlflow.db", lambda: os.truncate(HOME / "mlflow.db", 0))
            _try(report, "sqlite update", lambda: _sql("UPDATE tags SET value = 'owned'"))
            _try(report, "write artifacts", lambda: (HOME / "artifacts" / "x").write_text("x"))
            _try(report, "overwrite models", _overwrite_models)
            log = run.logger
            # through the protocol: reserved tags on its own run, another run's tags
            log.set_tags({{vocab.TAG_STATE: "CANCELLED"}})
            log.set_tags({{vocab.TAG_MODEL_DIGESTS: json.dumps({{"MLmodel": "0" * 64}})}})
            log.set_tags({{"mlflow.parentRunId": victim}})
            journal = log._journal
            journal.append(
                LogRecord(type="tags", run=victim, values={{vocab.TAG_STATE: "FAILED"}})
            )
            journal.append(LogRecord(type="end_run", run=victim, status="FAILED"))
            # a nested run that claims to be an agent run
            journal.append(
                LogRecord(type="start_run", run="k1", name="x", tags={{vocab.TAG_KIND: "agent_run"}})
            )
            # register over the victim's model, which the plan never asked for
            log.register("victim", alias="champion", source_run=victim, metric=None, lineage={{}})
            # artifacts outside the staging folder, and a link to a root-only file
            journal.append(LogRecord(type="artifact", path="../../../mlflow.db"))
            staged = run.run_dir / protocol.STAGED_DIR / "evil"
            staged.mkdir(parents=True)
            os.symlink("/etc/shadow", staged / "shadow")
            journal.append(LogRecord(type="artifact", path="evil/shadow"))
            # a forged result: digests and a model URI of its own choosing
            run.result.model_digests = {{"MLmodel": "0" * 64}}
            (run.run_dir / "attack.json").write_text(json.dumps(report))
        '''
    )


def _run(lab: Path, steps: list[dict[str, Any]]) -> tuple[subprocess.CompletedProcess, dict]:
    plan = lab / f"plan-{uuid.uuid4().hex[:6]}.json"
    load = {"tool": "load_data", "args": {"path": str(lab / "sales.csv"), "target": "sales"}}
    plan.write_text(json.dumps({"steps": [load, *steps]}))
    argv = [
        MLPILOT, "run", "stores", "--plan", str(plan), "--data", str(lab / "sales.csv"),
        "--plugins", "storeattack", "--json",
    ]  # fmt: skip
    env = {**os.environ, **local_env(lab / "home", PYTHONPATH=str(lab / "plugins"))}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.stdout.strip(), done.stderr[-3000:]
    return done, json.loads(done.stdout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mlpilot.platform.datasets import make_sales, write_table

    base = tmp_path_factory.mktemp("stores")
    write_table(make_sales(300, seed=5), base / "sales.csv")
    (base / "plugins").mkdir()
    (base / "plugins" / "storeattack.py").write_text(_plugin_source(base / "home"))
    return base


@pytest.fixture(scope="module")
def victim(lab: Path) -> dict[str, Any]:
    """A normal run of the home: a model, registered as victim@champion."""
    train = {"tool": "train_model", "args": {"model": "linear"}}
    register = {"tool": "register_model", "args": {"name": "victim", "alias": "champion"}}
    done, outcome = _run(lab, [train, register])
    assert done.returncode == 0, done.stderr[-3000:]
    return outcome


@pytest.fixture(scope="module")
def attack(lab: Path, victim: dict[str, Any]) -> dict[str, Any]:
    step = {"tool": "store_attack", "args": {"victim": victim["run_id"]}}
    done, outcome = _run(lab, [step])
    report = json.loads((Path(outcome["run_dir"]) / "attack.json").read_text())
    return {"done": done, "outcome": outcome, "report": report}


def _client(lab: Path) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{lab / 'home' / 'mlflow.db'}")


def test_the_child_cannot_write_the_store_or_its_artifacts(lab: Path, attack: dict) -> None:
    report = attack["report"]
    for name in ("open mlflow.db", "truncate mlflow.db", "write artifacts", "overwrite models"):
        # refused by permissions, or hidden by its own mounts (test homes live in /tmp)
        assert report[name].startswith(
            ("refused: PermissionError", "refused: FileNotFoundError")
        ), report
    assert report["sqlite update"].startswith("refused: OperationalError"), report
    db = sqlite3.connect(lab / "home" / "mlflow.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM tags WHERE value = 'owned'").fetchone() == (0,)
    assert not (lab / "home" / "artifacts" / "x").exists()


def test_the_other_run_and_its_registered_model_stay_intact(
    lab: Path, victim: dict, attack: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlpilot.tracking.trust import fetch_verified
    from mlpilot.tracking.vocab import TAG_STATE

    client = _client(lab)
    run = client.get_run(victim["run_id"])
    assert run.info.status == "FINISHED" and run.data.tags[TAG_STATE] == "SUCCEEDED"
    versions = client.search_model_versions("name = 'victim'")
    assert [str(v.version) for v in versions] == ["1"]
    champion = client.get_model_version_by_alias("victim", "champion")
    assert str(champion.version) == "1" and champion.run_id == victim["run_id"]
    assert victim["registered"]["version"] == "1"
    # its files are still exactly those logged (a changed file would refuse the load), as
    # that home's private anchors say
    monkeypatch.setenv("MLPILOT_HOME", str(lab / "home"))
    assert fetch_verified(client, "models:/victim@champion", lab / "verified").is_dir()


def test_refused_records_are_notes_never_applied(lab: Path, attack: dict) -> None:
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect
    from mlpilot.tracking.vocab import TAG_KIND, TAG_MODEL_DIGESTS, TAG_STATE

    done, outcome = attack["done"], attack["outcome"]
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    client = _client(lab)
    run = client.get_run(outcome["run_id"])
    tags = run.data.tags
    assert run.info.status == "FINISHED" and tags[TAG_STATE] == "SUCCEEDED"
    assert TAG_MODEL_DIGESTS not in tags and "mlflow.parentRunId" not in tags
    # no nested run was made from the record that claimed another kind
    nested = client.search_runs(
        [run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'"
    )
    assert [r.data.tags.get(TAG_KIND) for r in nested] == []
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "mlflow.db" not in artifacts and "shadow" not in artifacts
    refused = [n for n in outcome["notes"] if n.startswith("a tracking record was refused")]
    assert len(refused) >= 8, outcome["notes"]
    assert any("registering 'victim' was not asked for" in n for n in refused)
    doc = connect(Settings.from_env({"MLPILOT_HOME": str(lab / "home")})).get_run(run.info.run_id)
    assert doc["status"] == "SUCCEEDED"
    assert not (doc.get("model") or {}).get("sha256"), doc.get("model")
    assert outcome["model_uri"] is None


# -- the relay alone: real sqlite MLflow, no pipeline process --------------------------------
@pytest.fixture
def relayed(tmp_path: Path) -> Any:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("e", artifact_location=(tmp_path / "art").as_uri())
    run = client.create_run(experiment)
    (tmp_path / "run").mkdir()
    return client, run.info.run_id, tmp_path / "run"


def test_a_relayed_model_is_a_logged_model_that_loads_verified(relayed: Any) -> None:
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from mlpilot.platform.execution.relay import Relay
    from mlpilot.platform.ml.relayed_logger import RelayedRunLogger
    from mlpilot.tracking.trust import load_verified, recorded_digests

    client, run_id, run_dir = relayed
    frame = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20.0) % 3})
    model = make_pipeline(StandardScaler(), Ridge()).fit(frame, frame["a"] * 2)
    assert RelayedRunLogger(run_dir).log_model(model, input_example=frame.head(3)) is None
    out = Relay(run_dir, client, run_id).drain()
    assert out.notes == [] and out.model_uri and out.model_uri.startswith("models:/m-")
    found = client.search_logged_models(
        [client.get_run(run_id).info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    assert [f"models:/{m.model_id}" for m in found] == [out.model_uri]
    assert str(found[0].status) in ("READY", "LoggedModelStatus.READY")
    assert recorded_digests(client, out.model_uri) == out.model_digests
    loaded = load_verified(client, out.model_uri, run_dir.parent / "check")
    assert np.allclose(loaded.predict(frame.head(3)), model.predict(frame.head(3)))


def test_hostile_lines_are_refused_and_nothing_of_them_is_logged(relayed: Any) -> None:
    from mlpilot.platform.execution.relay import Relay

    client, run_id, run_dir = relayed
    lines = [
        '{"type": "metrics", "values": {"x": NaN}}',
        '{"type": "metrics", "values": {"bad key!": 1}}',
        '{"type": "params", "values": {"p": 3}}',
        '{"type": "tags", "values": {"mlpilot.state": "FAILED"}}',
        '{"type": "tags", "values": {"mlflow.user": "root"}}',
        '{"type": "tags", "values": {"mlpilot.trust.key": "x"}}',
        '{"type": "shell", "values": {}}',
        '{"type": "tags", "values": {"ok": "1"}, "extra": 1}',
        "[1, 2]",
        '{"type": "artifact", "path": "/etc/passwd"}',
        '{"type": "model", "path": "../.."}',
        '{"type": "end_run", "status": "FINISHED"}',
        '{"type": "artifact", "path": "1/pipeline.py"}',
        '{"type": "artifact", "path": "1/stdout.txt", "artifact_path": "logs"}',
        '{"type": "metrics", "values": {"kept": 1.5}}',
    ]
    (run_dir / "staged" / "1").mkdir(parents=True)
    for name in ("pipeline.py", "stdout.txt"):  # would replace what mlpilot itself logged
        (run_dir / "staged" / "1" / name).write_text("import os")
    (run_dir / "tracking.jsonl").write_text("\n".join(lines) + "\n")
    out = Relay(run_dir, client, run_id).drain()
    assert out.refused == len(lines) - 1, out.notes
    data = client.get_run(run_id).data
    assert data.metrics == {"kept": 1.5} and data.params == {}
    assert not {"mlpilot.state", "mlflow.user", "mlpilot.trust.key", "ok"} & set(data.tags)
    assert client.list_artifacts(run_id) == []


def test_a_linked_record_file_is_never_read(relayed: Any, tmp_path: Path) -> None:
    from mlpilot.platform.execution.relay import Relay

    client, run_id, run_dir = relayed
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text('{"type": "metrics", "values": {"planted": 1}}\n')
    (run_dir / "tracking.jsonl").symlink_to(elsewhere)
    out = Relay(run_dir, client, run_id).drain()
    assert out.refused == 1 and "link" in out.notes[0]
    assert client.get_run(run_id).data.metrics == {}


def test_a_plan_predicts_with_a_store_model_the_parent_verified(
    lab: Path, victim: dict[str, Any]
) -> None:
    """The pipeline cannot reach the store: mlpilot fetches and verifies the model into a
    read-only folder of the run before it starts, and the pipeline loads that copy."""
    steps = [
        {"tool": "predict", "args": {"data_path": str(lab / "sales.csv"), "model_uri": uri}}
        for uri in ("models:/victim@champion", None)  # None: the experiment's best
    ]
    done, outcome = _run(lab, steps)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = Path(outcome["run_dir"])
    provided = sorted((run_dir / "store-models").iterdir())
    assert [p.name for p in provided] == ["0", "1"]
    for folder in provided:
        assert (folder.stat().st_mode & 0o222) == 0 and (folder / "MLmodel").is_file()
        assert all(p.stat().st_mode & 0o222 == 0 for p in folder.rglob("*"))
    assert outcome["predictions"]["model"] in (
        "models:/victim@champion",
        "the experiment's best model",
    )
    assert outcome["predictions"]["rows"] == 300


def test_a_registration_whose_alias_fails_leaves_no_version(relayed: Any) -> None:
    import numpy as np
    import pandas as pd
    from mlflow.exceptions import MlflowException
    from sklearn.linear_model import Ridge

    from mlpilot.platform.errors import TrackingError
    from mlpilot.platform.execution.relay import Relay
    from mlpilot.platform.ml.relayed_logger import RelayedRunLogger
    from mlpilot.tracking import registry

    client, run_id, run_dir = relayed
    frame = pd.DataFrame({"a": np.arange(10.0)})
    RelayedRunLogger(run_dir).log_model(Ridge().fit(frame, frame["a"]))
    uri = Relay(run_dir, client, run_id).drain().model_uri
    assert uri
    with pytest.raises(TrackingError):  # MLflow reserves aliases like v3 for versions
        registry.register(client, model_uri=uri, name="atomic", alias="v3", source_run_id=run_id)
    assert client.search_model_versions("name = 'atomic'") == []
    with pytest.raises(MlflowException):
        client.get_registered_model("atomic")
    done = registry.register(client, model_uri=uri, name="atomic", alias="ok", source_run_id=run_id)
    assert done["version"] == "1"
    assert str(client.get_model_version_by_alias("atomic", "ok").version) == "1"
