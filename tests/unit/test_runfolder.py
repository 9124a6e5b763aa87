"""The parent's no-follow access to run folders: planted links are never followed."""

from __future__ import annotations

import os

import pytest

from mlpilot.tracking.runfolder import RunFolder, UnsafeFile


@pytest.fixture
def folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "secret").write_text("root only")
    with RunFolder(run) as handle:
        yield handle


def test_reads_regular_files_and_refuses_links(folder, tmp_path):
    (folder.path / "result.json").write_text("{}")
    assert folder.read_text("result.json", 100) == "{}"
    assert folder.read_text("missing.json", 100) is None
    os.symlink(tmp_path / "secret", folder.path / "stdout.txt")
    with pytest.raises(UnsafeFile, match="link"):
        folder.read_text("stdout.txt", 100)


def test_refuses_oversized_files_and_fifos(folder):
    (folder.path / "big.txt").write_bytes(b"x" * 101)
    with pytest.raises(UnsafeFile, match="over 100"):
        folder.read_bytes("big.txt", 100)
    os.mkfifo(folder.path / "fifo")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        folder.read_bytes("fifo", 100)


def test_a_linked_folder_on_the_way_is_refused(folder, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.txt").write_text("outside")
    os.symlink(tmp_path / "elsewhere", folder.path / "outbox")
    with pytest.raises(UnsafeFile):
        folder.read_text("outbox/x.txt", 100)
    assert list(folder.files()) == []
    with pytest.raises(UnsafeFile):
        folder.write_new("outbox/y.txt", "data")
    assert not (tmp_path / "elsewhere" / "y.txt").exists()


def test_write_new_replaces_a_planted_link_not_its_target(folder, tmp_path):
    os.symlink(tmp_path / "secret", folder.path / "mlflow_run_id")
    folder.write_new("mlflow_run_id", "abc")
    assert (tmp_path / "secret").read_text() == "root only"
    assert not (folder.path / "mlflow_run_id").is_symlink()
    assert (folder.path / "mlflow_run_id").read_text() == "abc"


def test_names_outside_the_folder_are_refused(folder):
    for name in ("../secret", "/etc/passwd", "a/../../secret", ""):
        with pytest.raises(UnsafeFile):
            folder.read_text(name, 100)


def test_files_lists_regular_files_only(folder, tmp_path):
    (folder.path / "a").mkdir()
    (folder.path / "a" / "one.txt").write_text("1")
    (folder.path / "two.txt").write_text("22")
    os.symlink(tmp_path / "secret", folder.path / "a" / "link.txt")
    assert sorted(folder.files()) == [("a/one.txt", 1), ("two.txt", 2)]
    assert list(folder.files("a")) == [("a/one.txt", 1)]


def test_copy_out_and_remove(folder, tmp_path):
    (folder.path / "plot.png").write_bytes(b"png")
    assert folder.copy_out("plot.png", tmp_path / "copy.png", 10)
    assert (tmp_path / "copy.png").read_bytes() == b"png"
    os.symlink(tmp_path / "secret", folder.path / "cancel-requested")
    folder.remove("cancel-requested")
    assert (tmp_path / "secret").exists() and not folder.exists("cancel-requested")


def test_create_removes_a_planted_link_and_writes_a_new_file(folder, tmp_path):
    os.symlink(tmp_path / "secret", folder.path / "stdout.txt")
    fd = folder.create("stdout.txt")
    with os.fdopen(fd, "wb") as out:
        out.write(b"captured")
    assert (tmp_path / "secret").read_text() == "root only"
    assert not (folder.path / "stdout.txt").is_symlink()
    assert (folder.path / "stdout.txt").read_bytes() == b"captured"


def test_rename_moves_the_entry_itself(folder, tmp_path):
    os.symlink(tmp_path / "secret", folder.path / "events.jsonl")
    assert folder.rename("events.jsonl", "gpu-events.jsonl")
    assert (folder.path / "gpu-events.jsonl").is_symlink()
    assert (tmp_path / "secret").read_text() == "root only"
    assert not folder.rename("events.jsonl", "gpu-events.jsonl")


def test_the_run_links_mlpilot_makes_are_opened_other_links_are_not(tmp_path):
    real = tmp_path / "runs" / "20260101-000000-abcdef"
    real.mkdir(parents=True)
    (real / "result.json").write_text("{}")
    (real.parent / "run-id").symlink_to(real.name, target_is_directory=True)
    with RunFolder(real.parent / "run-id") as handle:
        assert handle.read_text("result.json", 10) == "{}"
    (tmp_path / "elsewhere").mkdir()
    (real.parent / "planted").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (real.parent / "up").symlink_to("..", target_is_directory=True)
    for name in ("planted", "up"):
        with pytest.raises(UnsafeFile, match="cannot be opened safely"):
            RunFolder(real.parent / name)
