"""The Optuna storage proxy in one process: the JSON forms, the policy, the end of a leg.

A real journal in a temporary folder, a real socketpair and the real server thread; the
contained side is tested in ``tests/security/test_optuna_proxy.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from mlpilot.platform.execution.optuna_proxy import StorageProxy, StudyPolicy
from mlpilot.platform.ml.hpo import proxy as P
from mlpilot.platform.ml.hpo.storage import open_storage

RUN_ID = "0123456789abcdef0123456789abcdef"
OWN = f"sales-linear-{RUN_ID[:8]}"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[StorageProxy, Any, str]]:
    journal = str(tmp_path / "optuna" / "journal.log")
    policy = StudyPolicy(targets=["sales"], models=["linear"], run_id=RUN_ID)
    server = StorageProxy(journal, policy).start()
    client = P._make_class()(server.child_fd)
    yield server, client, journal
    server.close()


def test_a_trial_travels_as_json_and_back() -> None:
    study = optuna.create_study()
    study.enqueue_trial({"x": 0.5, "c": "b"}, user_attrs={"note": [1, 2]})
    trial = study.ask(
        {
            "x": optuna.distributions.FloatDistribution(0, 1, log=False),
            "c": optuna.distributions.CategoricalDistribution(["a", "b", None]),
            "n": optuna.distributions.IntDistribution(1, 9, step=2),
        }
    )
    trial.report(math.inf, 3)
    study.tell(trial, 0.25)
    frozen = study.trials[0]
    again = P.decode_trial(P.encode_trial(frozen))
    assert again == frozen and again.distributions == frozen.distributions
    assert again.datetime_start == frozen.datetime_start and again.intermediate_values == {
        3: math.inf
    }


def test_the_study_of_the_run_works_through_the_proxy(served: Any) -> None:
    server, client, journal = served
    study = optuna.create_study(study_name=OWN, storage=client, direction="maximize")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=5)
    direct = optuna.load_study(study_name=OWN, storage=open_storage(journal))
    assert [t.value for t in direct.trials] == [t.value for t in study.trials]
    assert study.best_value == direct.best_value and len(server.own) == 5
    # loading it again (a rerun of the same run) is allowed
    assert len(optuna.create_study(study_name=OWN, storage=client, load_if_exists=True).trials) == 5


@pytest.mark.parametrize(
    "name",
    ["victim", "sales-linear-ffffffff", "sales-rf-01234567", "other-linear-01234567", None],
)
def test_other_studies_are_refused(served: Any, name: str | None) -> None:
    server, client, journal = served
    optuna.create_study(study_name="victim", storage=open_storage(journal))
    with pytest.raises(P.StorageRefused, match="not the study of this run"):
        optuna.create_study(study_name=name, storage=client, load_if_exists=True)
    assert server.refusals


def test_an_untracked_leg_creates_only_fresh_timestamped_studies(tmp_path: Path) -> None:
    journal = str(tmp_path / "journal.log")
    server = StorageProxy(journal, StudyPolicy(targets=["sales"], models=["linear"])).start()
    try:
        client = P._make_class()(server.child_fd)
        fresh = "sales-linear-20261204-101010-abcd"
        assert optuna.create_study(study_name=fresh, storage=client).study_name == fresh
        optuna.create_study(
            study_name="sales-linear-20200101-000000-0000", storage=open_storage(journal)
        )
        with pytest.raises(P.StorageRefused):  # it exists already: not this leg's
            optuna.create_study(
                study_name="sales-linear-20200101-000000-0000", storage=client, load_if_exists=True
            )
    finally:
        server.close()


def test_recipes_and_attributes_are_checked(served: Any) -> None:
    _, client, _ = served
    study = optuna.create_study(study_name=OWN, storage=client)
    ok = {"steps": [{"tool": "load_data", "function": "mlpilot.platform.ml.steps:load_data"}]}
    study.set_user_attr("mlpilot", {**ok, "data_path": "x", "target": "t", "task": "regression",
                                    "model": "linear", "metric": "rmse", "seed": 1})  # fmt: skip
    for function in ("pydoc:pipepager", "os:system", "mlpilot.platform.ml.steps:optimize_model"):
        recipe = {"steps": [{"tool": "load_data", "function": function}]}
        with pytest.raises(P.StorageRefused, match=function):
            study.set_user_attr("mlpilot", recipe)
    with pytest.raises(P.StorageRefused, match="over"):
        study.set_user_attr("big", "x" * 100_000)
    with pytest.raises(P.StorageRefused, match="deletes no study"):
        client.delete_study(study._study_id)
    assert study.user_attrs["mlpilot"]["model"] == "linear"


def test_the_parent_owns_the_trials_and_fails_what_a_dead_leg_left_running(served: Any) -> None:
    from mlpilot.platform.ml.hpo.storage import OWNER_ATTR, owner_record

    server, client, journal = served
    study = optuna.create_study(study_name=OWN, storage=client)
    trial = study.ask()
    trial.set_user_attr(OWNER_ATTR, {"host": "elsewhere", "pid": 1})
    server.close()  # the leg ended with the trial RUNNING
    left = optuna.load_study(study_name=OWN, storage=open_storage(journal)).trials[0]
    assert left.state.name == "FAIL" and left.user_attrs[OWNER_ATTR] == owner_record()
    assert "ended while the trial ran" in left.user_attrs["mlpilot.fail_reason"]


def test_finished_trials_travel_once(served: Any) -> None:
    server, client, _ = served
    study = optuna.create_study(study_name=OWN, storage=client)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    sent: list[int] = []
    answer = server._m_get_all_trials
    server._m_get_all_trials = lambda *a: sent.append(len(r := answer(*a))) or r  # type: ignore[method-assign]
    assert len(study.trials) == 3  # whatever was not cached yet comes now, once
    sent.clear()
    assert len(study.trials) == 3 and len(study.trials) == 3
    assert sent == [0, 0]  # every finished trial was kept: none travels again


def test_an_oversized_or_malformed_request_ends_the_connection(served: Any) -> None:
    import struct

    server, client, _ = served
    with pytest.raises(RuntimeError, match="closed the connection"):
        with client._lock:
            client._sock.sendall(struct.pack(">I", P.MAX_MESSAGE_BYTES + 1))
        client._call("get_all_studies")
    server._thread.join(timeout=10)  # the server gave up on the connection
    assert not server._thread.is_alive()
    assert client._sock.recv(1) == b""


def test_the_child_gets_no_store_and_keeps_its_namespace(tmp_path: Path) -> None:
    """Neither the MLflow store nor the Optuna storage is writable for a pipeline, and a
    server store keeps no pipeline on the host network (the parent talks to it)."""
    import os

    from mlpilot.platform.config import Settings
    from mlpilot.platform.execution.containment import _network, set_up_child

    journal = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    setup = set_up_child(journal, engine="cpu", run_dir=tmp_path / "runs" / "r1", reads=[])
    try:
        writable = setup.contain.get("writable", [])
        assert str(Path(journal.optuna_storage).parent) not in writable
        assert str(tmp_path) not in writable and setup.contain.get("groups", []) == []
        assert all(
            w.startswith(str(tmp_path / "runs" / "r1")) or not w.startswith(str(tmp_path))
            for w in writable
        )
    finally:
        if setup.watch is not None:
            setup.watch.end()
        setup.close_fds()
    rdb = Settings.from_env(
        {
            "MLPILOT_HOME": str(tmp_path),
            "MLPILOT_OPTUNA_STORAGE": "postgresql://u:pw@db/optuna",
            "MLFLOW_TRACKING_URI": "http://127.0.0.1:5999",
        }
    )
    isolated, words = _network(rdb)
    assert isolated is (os.geteuid() == 0) and "optuna" not in words


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="ownership checks need root")
def test_the_journal_folder_is_made_mlpilots_own_again(tmp_path: Path) -> None:
    import os
    import stat

    from mlpilot.platform.errors import MlpilotError
    from mlpilot.platform.execution.optuna_proxy import keep_journal_private

    folder = tmp_path / "optuna"
    folder.mkdir()
    journal = folder / "journal.log"
    journal.write_text("")
    folder.chmod(0o2770)
    journal.chmod(0o660)
    os.setxattr(folder, "system.posix_acl_default", _default_acl())
    keep_journal_private(str(journal))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750
    assert stat.S_IMODE(journal.stat().st_mode) == 0o640
    assert "system.posix_acl_default" not in os.listxattr(folder)
    left = folder / "journal.log.lock"  # created by a pipeline before the proxy
    left.write_text("")
    os.chown(left, 65534, 65534)
    keep_journal_private(str(journal))
    assert left.stat().st_uid == 0
    (folder / "planted").symlink_to("/etc/shadow")
    with pytest.raises(MlpilotError, match="not a plain file"):
        keep_journal_private(str(journal))


def _default_acl() -> bytes:
    import struct

    entries = [(0x01, 7, 0xFFFFFFFF), (0x04, 7, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
