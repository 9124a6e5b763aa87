"""A full disk told from other write errors, and the reserve kept to record a run's end."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from mlpilot.tracking import space


def test_a_full_disk_is_told_from_other_errors(tmp_path: Path) -> None:
    assert space.out_of_space(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert space.out_of_space(sqlite3.OperationalError("database or disk is full"), tmp_path)
    try:  # wrapped, as SQLAlchemy and MLflow wrap sqlite's error
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as inner:
            raise RuntimeError("(sqlite3.OperationalError) …") from inner
    except RuntimeError as outer:
        assert space.out_of_space(outer, tmp_path)
    assert not space.out_of_space(ValueError("bad value"), tmp_path)
    # an I/O error counts only where next to no space is left (not in tmp_path)
    assert not space.out_of_space(sqlite3.OperationalError("disk I/O error"), tmp_path)


def test_the_reserve_is_kept_and_given_back_once(tmp_path: Path) -> None:
    space.keep_reserve(tmp_path)
    reserve = tmp_path / space.RESERVE_NAME
    assert reserve.stat().st_size == space.RESERVE_BYTES
    assert reserve.stat().st_blocks * 512 >= space.RESERVE_BYTES  # really allocated
    assert space.release_reserve(tmp_path) and not reserve.exists()
    assert not space.release_reserve(tmp_path)
    space.keep_reserve(tmp_path / "missing")  # best effort: no folder, no reserve, no error
