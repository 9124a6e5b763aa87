"""The parent's access to a run folder it does not trust (DESIGN §8).

A pipeline can write its own run folder, so anything in it may be a link planted to make
the privileged parent read or write somewhere else (``stdout.txt`` → ``/etc/shadow``,
``mlflow_run_id.tmp`` → a root-only file, a folder swapped for a link between two calls).
``RunFolder`` opens the folder once and does every access relative to that handle: each
path component is opened with ``O_NOFOLLOW``, files are read only when they are regular
files under a size limit, and files the parent writes are created exclusively (a planted
entry is removed first, which removes the link, never its target). Paths are names below
the folder: absolute paths and ``..`` are refused.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from mlpilot.platform.errors import MlpilotError

logger = logging.getLogger(__name__)

__all__ = ["RunFolder", "UnsafeFile"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFile(MlpilotError):
    """A run-folder entry is a link, not a regular file, or larger than allowed."""


class RunFolder:
    """One run folder, opened once; every access relative to its handle, no link followed."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            self.fd = _open_folder(self.path)
        except OSError as exc:
            raise UnsafeFile(f"the run folder {self.path} cannot be opened safely: {exc}") from exc

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- names --------------------------------------------------------------------------------
    @staticmethod
    def _parts(name: str) -> list[str]:
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or any(p in ("..", ".") for p in parts):
            raise UnsafeFile(f"{name!r} is not a name inside the run folder")
        return list(parts)

    def _parent_fd(self, parts: list[str], *, create: bool = False) -> int:
        """A new handle on the folder holding ``parts[-1]`` (close it), no link followed."""
        fd = os.dup(self.fd)
        try:
            for part in parts[:-1]:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as exc:
            os.close(fd)
            raise UnsafeFile(
                f"{'/'.join(parts)}: a folder on the way is not a plain folder"
            ) from exc
        return fd

    # -- reading ------------------------------------------------------------------------------
    def open_file(self, name: str, limit: int | None = None) -> int | None:
        """A read-only descriptor on a regular file (the caller closes it); None if absent."""
        parts = self._parts(name)
        folder = self._parent_fd(parts)
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a link
            raise UnsafeFile(f"{name} in the run folder is a link or unreadable: not read") from exc
        finally:
            os.close(folder)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise UnsafeFile(f"{name} in the run folder is not a regular file: not read")
        if limit is not None and info.st_size > limit:
            os.close(fd)
            raise UnsafeFile(f"{name} in the run folder is {info.st_size} bytes, over {limit}")
        os.set_blocking(fd, True)
        return fd

    def read_bytes(self, name: str, limit: int) -> bytes | None:
        """The file's bytes (at most ``limit``, else ``UnsafeFile``); None when it is absent."""
        fd = self.open_file(name, limit)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:  # grew after the check
            raise UnsafeFile(f"{name} in the run folder grew past {limit} bytes")
        return data

    def read_text(self, name: str, limit: int) -> str | None:
        data = self.read_bytes(name, limit)
        return None if data is None else data.decode("utf-8", errors="replace")

    def exists(self, name: str) -> bool:
        """Whether an entry of that name exists (a link counts; nothing is followed)."""
        parts = self._parts(name)
        try:
            folder = self._parent_fd(parts)
        except UnsafeFile:
            return False
        try:
            os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(folder)

    def copy_out(self, name: str, dest: Path, limit: int) -> bool:
        """Copy a regular file of the run folder to ``dest`` (a path the parent chose)."""
        fd = self.open_file(name, limit)
        if fd is None:
            return False
        with os.fdopen(fd, "rb") as source, open(dest, "wb") as target:
            copied = 0
            while chunk := source.read(1 << 20):
                copied += len(chunk)
                if copied > limit:
                    raise UnsafeFile(f"{name} in the run folder grew past {limit} bytes")
                target.write(chunk)
        return True

    def files(self, subfolder: str = "") -> Iterator[tuple[str, int]]:
        """Regular files below ``subfolder`` as (name relative to the run folder, size).

        Links and anything else that is neither a file nor a plain folder are skipped.
        """
        prefix = self._parts(subfolder) if subfolder else []
        start = self._parent_fd([*prefix, "x"]) if prefix else os.dup(self.fd)
        yield from self._walk(start, prefix)

    def _walk(self, fd: int, prefix: list[str]) -> Iterator[tuple[str, int]]:
        try:
            entries = sorted(os.listdir(fd))
            for entry in entries:
                info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    yield "/".join([*prefix, entry]), info.st_size
                elif stat.S_ISDIR(info.st_mode):
                    try:
                        child = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # swapped for a link meanwhile
                    yield from self._walk(child, [*prefix, entry])
        finally:
            os.close(fd)

    # -- writing ------------------------------------------------------------------------------
    def create(self, name: str, mode: int = 0o644) -> int:
        """A new, empty file of the parent's to write (the caller closes the descriptor).

        Whatever stood at ``name`` is removed first (a link goes, never its target); the
        file is then created exclusively, so nothing planted meanwhile is written through.
        """
        parts = self._parts(name)
        folder = self._parent_fd(parts, create=True)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(parts[-1], dir_fd=folder)
            return os.open(parts[-1], _NEW_FLAGS, mode, dir_fd=folder)
        except OSError as exc:
            raise UnsafeFile(f"{name} in the run folder cannot be created: {exc}") from exc
        finally:
            os.close(folder)

    def rename(self, name: str, new_name: str) -> bool:
        """Rename an entry inside the folder (a link is renamed, not followed); False if absent."""
        old_parts, new_parts = self._parts(name), self._parts(new_name)
        source, target = self._parent_fd(old_parts), self._parent_fd(new_parts)
        try:
            os.rename(old_parts[-1], new_parts[-1], src_dir_fd=source, dst_dir_fd=target)
        except FileNotFoundError:
            return False
        finally:
            os.close(source)
            os.close(target)
        return True

    def write_new(self, name: str, data: bytes | str, mode: int = 0o644) -> None:
        """Create ``name`` with ``data``, atomically: written under a fresh name, renamed in.

        Whatever stood at ``name`` (a planted link, a file) is replaced, never written
        through: ``rename`` replaces the entry itself.
        """
        raw = data.encode("utf-8") if isinstance(data, str) else data
        parts = self._parts(name)
        folder = self._parent_fd(parts, create=True)
        temporary = f".{parts[-1]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(temporary, _NEW_FLAGS, mode, dir_fd=folder)
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
            os.rename(temporary, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
        except IsADirectoryError as exc:
            os.unlink(temporary, dir_fd=folder)
            raise UnsafeFile(f"{name} in the run folder is a folder: not written") from exc
        finally:
            os.close(folder)

    def remove(self, name: str) -> None:
        """Remove an entry (a link is removed, not its target); absent is fine."""
        parts = self._parts(name)
        try:
            folder = self._parent_fd(parts)
        except UnsafeFile:
            return
        try:
            os.unlink(parts[-1], dir_fd=folder)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            logger.debug("%s is a folder: left", name)
        finally:
            os.close(folder)


def _open_folder(path: Path) -> int:
    """The folder itself, never through a link; except the sibling-name link mlpilot makes
    itself (``runs/<run id>`` → ``<its folder>``, see ``agent.launching.link_run_dir``)."""
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not path.is_symlink():
            raise
        target = os.readlink(path)
        if "/" in target or target in ("", ".", ".."):
            raise
        parent = os.open(path.parent, _DIR_FLAGS & ~os.O_NOFOLLOW)
        try:
            return os.open(target, _DIR_FLAGS, dir_fd=parent)
        finally:
            os.close(parent)
