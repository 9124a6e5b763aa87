"""A full disk: telling it from other write errors, and room kept to record a run's end.

With the default stores (the sqlite MLflow store, the embedded metadata store, the outbox)
all under ``$MLPILOT_HOME``, a disk that fills while a run is recorded would leave nothing
able to say that it failed: the run would stay RUNNING in both stores. So the parent
keeps a small reserve file in its private folder while it works, and gives it up when a
write fails for want of space: what that frees is enough to end the run FAILED in both
stores. The next run puts the reserve back when there is room again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["RESERVE_BYTES", "keep_reserve", "out_of_space", "release_reserve", "space_left"]

#: below this much free space an I/O error is taken for a full disk
LOW_SPACE_BYTES = 4 * 2**20
#: room kept to record the end of a run on a full disk (a few sqlite pages in each store)
RESERVE_BYTES = 4 * 2**20
RESERVE_NAME = "space-reserve"
_FULL_TEXTS = ("disk is full", "No space left", "Disk quota exceeded")


def out_of_space(exc: BaseException, folder: Path) -> bool:
    """Whether ``exc`` (an OSError, sqlite's, SQLAlchemy's or MLflow's error, or one that
    wraps them) came of a full disk under ``folder``: it says so, or it is an I/O error
    (sqlite's word for it on tmpfs) while next to no space is left there."""
    seen: BaseException | None = exc
    io_error = False
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(seen) for text in _FULL_TEXTS):
            return True
        io_error = io_error or "disk I/O error" in str(seen)
        io_error = io_error or (isinstance(seen, OSError) and seen.errno == errno.EIO)
        seen = seen.__cause__ or seen.__context__
    if not io_error:
        return False
    try:
        return shutil.disk_usage(folder).free < LOW_SPACE_BYTES
    except OSError:
        return False


def space_left(folder: Path) -> str:
    """``"12 KiB free"`` on the file system of ``folder``, for a message."""
    try:
        return f"{shutil.disk_usage(folder).free // 1024} KiB free"
    except OSError:
        return "free space unknown"


def keep_reserve(private_dir: Path) -> None:
    """Make sure the reserve exists (best effort: with no room for it, there is none)."""
    path = private_dir / RESERVE_NAME
    try:
        if path.stat().st_size >= RESERVE_BYTES:
            return
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.debug("space reserve not checked: %s", exc)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        logger.debug("no space reserve: %s", exc)
        return
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)  # blocks really taken, not a sparse file
    except OSError as exc:
        logger.debug("no room for the space reserve: %s", exc)
        with contextlib.suppress(OSError):
            os.unlink(path)
    finally:
        os.close(fd)


def release_reserve(private_dir: Path) -> bool:
    """Give the reserve's room back (a write failed for want of space); False if none."""
    try:
        os.unlink(private_dir / RESERVE_NAME)
    except FileNotFoundError:
        return False
    except OSError as exc:
        logger.debug("space reserve not released: %s", exc)
        return False
    logger.info("the disk is full: the space reserve was released to record the run")
    return True
