"""A pristine MLflow schema, built once per MLflow version and copied into each new store.

Creating an embedded store runs every MLflow migration from an empty database: over a
second of CPU for each new home (each test, each fresh machine, each compose volume).
Where those migrations end depends only on MLflow's version, so the empty schema is
built once, in the invoking account's cache folder, and a new store starts as a copy of
it; MLflow then finds its tables, checks the schema revision and adds the Default
experiment under the home's own artifact root, as it does for any store.

The template is a trust anchor like the others (DESIGN §8): every store of the account
starts from it. It is used only when its folder and file are the invoking account's
own, written by no group or other, and reached with no link followed; and only while it
holds no experiment. Anything else, or an unreadable cache, and the store is created by
the migrations as before (the cache is a speed-up, never a requirement).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["cache_folder", "copy_template"]

_CHUNK = 1 << 20


def cache_folder() -> Path | None:
    """``$XDG_CACHE_HOME/mlpilot`` (``~/.cache/mlpilot``); None without a home folder."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no passwd entry
            return None
    return Path(base) / "mlpilot"


def copy_template(building: Path) -> bool:
    """Write the empty schema to ``building`` (a new file); False when there is none to
    copy, and the caller runs the migrations. Errors writing ``building`` propagate
    (a full disk is the caller's to report); errors of the cache only log."""
    source = _open_template()
    if source is None:
        return False
    with os.fdopen(source, "rb") as src:
        fd = os.open(building, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as dst:
            while block := src.read(_CHUNK):
                dst.write(block)
    try:
        if _is_empty_schema(building):
            return True
        logger.warning("the MLflow schema template holds records: not used, migrating")
    except sqlite3.Error as exc:
        logger.warning("the MLflow schema template is unreadable (%s): migrating", exc)
    building.unlink()
    return False


def _template_path() -> Path | None:
    import mlflow.version

    folder = cache_folder()
    return None if folder is None else folder / f"mlflow-schema-{mlflow.version.VERSION}.db"


def _open_template() -> int | None:
    """A read handle on the template, building it first when missing; None if untrusted."""
    path = _template_path()
    if path is None:
        return None
    try:
        if not os.path.lexists(path):
            _build(path)
        return _open_trusted(path)
    except (OSError, sqlite3.Error) as exc:
        logger.debug("no MLflow schema template (%s): migrating instead", exc)
        return None


def _owned_privately(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_trusted(path: Path) -> int | None:
    folder = os.lstat(path.parent)
    if not stat.S_ISDIR(folder.st_mode) or not _owned_privately(folder):
        logger.warning("%s is not this account's own folder: template not used", path.parent)
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and _owned_privately(info):
        return fd
    os.close(fd)
    logger.warning("%s is not this account's own file: not used", path)
    return None


def _build(path: Path) -> None:
    """Run the migrations once on an empty file beside ``path``, then rename it in."""
    import sqlalchemy
    from mlflow.store.db import utils

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".schema-", suffix=".db", dir=path.parent)
    os.close(fd)
    engine = sqlalchemy.create_engine(f"sqlite:///{name}")
    try:
        utils._initialize_tables(engine)
        engine.dispose()
        os.chmod(name, 0o600)
        os.replace(name, path)  # two builders at once: either whole file wins
    finally:
        engine.dispose()
        if os.path.exists(name):
            os.unlink(name)


def _is_empty_schema(path: Path) -> bool:
    """MLflow's tables are there, at a stamped revision, and hold no experiment."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        revision = db.execute("SELECT version_num FROM alembic_version").fetchall()
        experiments = db.execute("SELECT count(*) FROM experiments").fetchone()[0]
    db.close()
    return len(revision) == 1 and experiments == 0
