"""The MLflow schema template: a new store starts as its copy only when it is trustworthy."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from mlpilot.platform.config import Settings
from mlpilot.tracking import schema_cache
from mlpilot.tracking.mlflow_store import make_client


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mlpilot"


def _new_store(home: Path) -> object:
    return make_client(Settings.from_env({"MLPILOT_HOME": str(home)}))


def _template(cache: Path) -> Path:
    (template,) = cache.glob("mlflow-schema-*.db")
    return template


def _experiments(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT name, artifact_location FROM experiments").fetchall()
    con.close()
    return rows


def test_a_new_store_is_a_copy_of_the_template_with_its_own_default(
    cache: Path, tmp_path: Path
) -> None:
    _new_store(tmp_path / "one")
    template = _template(cache)
    assert _experiments(template) == []  # the template itself stays empty
    assert oct(template.stat().st_mode & 0o777) == "0o600"
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    client = _new_store(tmp_path / "two")
    (default,) = _experiments(tmp_path / "two" / "mlflow.db")
    assert default == ("Default", (tmp_path / "two" / "artifacts" / "0").as_uri())
    run = client.create_run("0")  # a working store, schema verified by MLflow
    assert client.get_run(run.info.run_id).info.experiment_id == "0"


def test_a_template_holding_records_is_not_copied(cache: Path, tmp_path: Path) -> None:
    _new_store(tmp_path / "one")
    template = _template(cache)
    with sqlite3.connect(template) as con:
        con.execute(
            "INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage)"
            " VALUES (7, 'planted', 'file:///elsewhere', 'active')"
        )
    con.close()
    _new_store(tmp_path / "two")
    names = [name for name, _ in _experiments(tmp_path / "two" / "mlflow.db")]
    assert names == ["Default"]


@pytest.mark.parametrize("make_untrusted", ["group-writable", "a link", "folder writable"])
def test_an_untrusted_template_is_not_read(
    cache: Path, tmp_path: Path, make_untrusted: str
) -> None:
    _new_store(tmp_path / "one")
    template = _template(cache)
    planted = tmp_path / "planted.db"
    planted.write_bytes(template.read_bytes())
    with sqlite3.connect(planted) as con:  # a valid empty schema, marked
        con.execute("CREATE TABLE planted (x)")
    con.close()
    if make_untrusted == "group-writable":
        template.write_bytes(planted.read_bytes())
        template.chmod(0o620)
    elif make_untrusted == "a link":
        template.unlink()
        template.symlink_to(planted)
    else:
        template.write_bytes(planted.read_bytes())
        cache.chmod(0o777)
    _new_store(tmp_path / "two")  # migrated from scratch instead
    assert "planted" not in _tables(tmp_path / "two" / "mlflow.db")
    assert [n for n, _ in _experiments(tmp_path / "two" / "mlflow.db")] == ["Default"]


def test_a_trusted_template_is_what_a_new_store_copies(cache: Path, tmp_path: Path) -> None:
    """The counterpart of the test above: the same marked template, kept private, is used."""
    _new_store(tmp_path / "one")
    template = _template(cache)
    with sqlite3.connect(template) as con:
        con.execute("CREATE TABLE planted (x)")
    con.close()
    _new_store(tmp_path / "two")
    assert "planted" in _tables(tmp_path / "two" / "mlflow.db")


def _tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    con.close()
    return {name for (name,) in rows}


def test_no_cache_folder_still_creates_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir under a file fails
    _new_store(tmp_path / "home")
    assert [n for n, _ in _experiments(tmp_path / "home" / "mlflow.db")] == ["Default"]


def test_the_copy_never_overwrites(cache: Path, tmp_path: Path) -> None:
    _new_store(tmp_path / "one")
    existing = tmp_path / "existing"
    existing.write_text("kept")
    with pytest.raises(FileExistsError):
        schema_cache.copy_template(existing)
    assert existing.read_text() == "kept"
    assert os.path.lexists(_template(cache))
