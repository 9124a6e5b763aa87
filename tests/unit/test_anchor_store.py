"""The anchor store (``tracking/anchors.py``): per-home, per-store entries, owner-only,
written renamed-in, never read through a link or from a misfiled entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking.anchors import AnchorStore, check_script, record_script

URI = "sqlite:////home/a/mlflow.db"


def _store(tmp_path: Path) -> AnchorStore:
    return AnchorStore(tmp_path / "home" / "private")


def test_a_model_is_trusted_only_for_the_store_it_was_recorded_from(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.model_digests(URI, "m-1") is None
    store.record_model(URI, "m-1", {"model.pkl": "ab"}, "run1")
    assert store.model_digests(URI, "m-1") == {"model.pkl": "ab"}
    assert store.model_digests("sqlite:////home/b/mlflow.db", "m-1") is None
    assert store.model_digests(URI, "m-2") is None
    assert _store(tmp_path.parent / "other").model_digests(URI, "m-1") is None
    for path in (store.folder, store.folder / "models"):
        assert path.stat().st_mode & 0o777 == 0o700
    (entry,) = (store.folder / "models").iterdir()
    assert entry.stat().st_mode & 0o777 == 0o600


def test_a_misfiled_entry_is_not_trusted(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.record_model(URI, "m-1", {"model.pkl": "ab"}, None)
    store.record_model(URI, "m-2", {"model.pkl": "cd"}, None)
    first, second = sorted((store.folder / "models").iterdir())
    # one entry's content under the other's name: the key inside decides
    first.write_text(second.read_text())
    assert {store.model_digests(URI, key) is None for key in ("m-1", "m-2")} == {True, False}


def test_a_linked_entry_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.record_model(URI, "m-1", {"model.pkl": "ab"}, None)
    (entry,) = (store.folder / "models").iterdir()
    fake = tmp_path / "fake.json"
    fake.write_text(json.dumps({"tracking_uri": URI, "model": "m-1", "digests": {}}))
    entry.unlink()
    entry.symlink_to(fake)
    with pytest.raises(TrackingError, match="cannot read a trust anchor"):
        store.model_digests(URI, "m-1")


def test_a_script_is_checked_against_its_run_folders_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    run_dir = home / "runs" / "20260101-000000-abc"
    run_dir.mkdir(parents=True)
    monkeypatch.setenv("MLPILOT_HOME", str(home))
    script = run_dir / "pipeline.py"
    script.write_text("print('hi')\n")
    record_script(script, "print('hi')\n")
    assert check_script(script) is None
    script.write_text("print('changed')\n")
    with pytest.raises(TrackingError, match="not the script mlpilot generated"):
        check_script(script)
    copy = tmp_path / "elsewhere" / "pipeline.py"
    copy.parent.mkdir()
    copy.write_text("print('hi')\n")
    assert "digest was not checked" in (check_script(copy) or "")
    unrecorded = home / "runs" / "20250101-000000-old" / "pipeline.py"
    unrecorded.parent.mkdir()
    unrecorded.write_text("print('old')\n")
    assert "no recorded digest" in (check_script(unrecorded) or "")
