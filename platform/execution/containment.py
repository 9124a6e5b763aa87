"""Tier-1 containment of pipeline processes (DESIGN §8): who they run as, what they reach.

When mlpilot runs as root, a pipeline runs as ``mlpilot-run``, an unprivileged system
account created on first need (``nobody`` where accounts cannot be created). It reaches
exactly what it legitimately writes — its run folder, the MLflow store and artifacts —
through the account's group (the Optuna storage only through the parent's proxy): those folders belong to it,
with a default ACL so that files either side creates stay writable for both, and folders
above them that are closed to others (``/root`` is 0700) get a traverse-only ACL entry for
that group (they stay unlistable). The metadata store, outbox and sessions live under
``$MLPILOT_HOME/private`` (0700), which the account never reaches. Data files come as open
descriptors, or as read-only copies in the run folder when the account may not read the
file itself.

The process gets its own network namespace when every store it writes is a local file
(a new namespace has its own loopback: servers on 127.0.0.1 become unreachable), a
parent-death signal, and limits: processes (for the dedicated account), address space on
the CPU engine, file size, CPU time. ``Containment`` says what was applied; it is recorded
on the run.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import shutil
import stat
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpilot.platform.config.settings import RUN_ACCOUNT
from mlpilot.platform.ml import protocol

logger = logging.getLogger(__name__)

RUN_USER = RUN_ACCOUNT
#: virtual memory beyond the data budget: mapped libraries alone reach about 2 GiB
HEADROOM_MB = 3072
HEADROOM_PER_CPU_MB = 64  # allocator arenas and thread stacks grow with the threads
_ACL_ACCESS, _ACL_DEFAULT = "system.posix_acl_access", "system.posix_acl_default"
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_UNDEFINED_ID = 0xFFFFFFFF
_SHARED_MARK = ".shared-v1"


@dataclass(frozen=True)
class RunUser:
    name: str
    uid: int
    gid: int


@dataclass
class Containment:
    """What a pipeline process runs under; recorded on its run."""

    user: str
    network: str
    limits: dict[str, str] = field(default_factory=dict)
    data: str = "read in place"
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "network": self.network,
            "limits": dict(self.limits),
            "data": self.data,
            **({"problems": list(self.problems)} if self.problems else {}),
        }


# -- the account -------------------------------------------------------------------------------
_USER_CACHE: list[RunUser | None] = []


def run_user(wanted: str = "auto") -> RunUser | None:
    """The account pipelines run as, or None when mlpilot is not root (or asked not to)."""
    if os.geteuid() != 0 or wanted == "none":
        return None
    if not _USER_CACHE:
        _USER_CACHE.append(_ensure_account())
    return _USER_CACHE[0]


def _ensure_account() -> RunUser | None:
    for attempt in range(2):
        try:
            entry = pwd.getpwnam(RUN_USER)
            return RunUser(RUN_USER, entry.pw_uid, entry.pw_gid)
        except KeyError:
            if attempt == 0 and shutil.which("useradd"):
                command = ["useradd", "--system", "--user-group", "--no-create-home"]
                command += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", RUN_USER]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode not in (0, 9):  # 9: created meanwhile by another process
                    logger.warning("could not create %s: %s", RUN_USER, done.stderr.strip())
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return RunUser("nobody", entry.pw_uid, entry.pw_gid)


# -- access ------------------------------------------------------------------------------------
def share_folder(folder: Path, user: RunUser) -> None:
    """``folder`` (and what it holds) writable by the account's group, now and later."""
    folder.mkdir(parents=True, exist_ok=True)
    mark = folder / _SHARED_MARK
    if mark.exists():  # set up before: new entries inherit it from the default ACL
        return
    for path in [folder, *folder.rglob("*")]:
        _share(path, user.gid)
    mark.touch()
    _share(mark, user.gid)


def share_file(path: Path, user: RunUser) -> None:
    """A file the child writes in place (the sqlite database and its -wal, -shm)."""
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        if candidate.exists():
            _share(candidate, user.gid)


def _share(path: Path, gid: int) -> None:
    if path.is_symlink():
        return
    os.chown(path, -1, gid)
    mode = stat.S_IMODE(path.stat().st_mode)
    if path.is_dir():
        path.chmod(mode | stat.S_IRWXG | stat.S_ISGID)
        _set_acl(path, _ACL_DEFAULT, _acl([(_USER_OBJ, 7), (_GROUP_OBJ, 7), (_OTHER, 0)]))
    else:
        path.chmod(mode | stat.S_IRGRP | stat.S_IWGRP)


def grant_traverse(path: Path, user: RunUser) -> None:
    """Let the account's group pass through every folder above ``path`` (not list it)."""
    for folder in reversed(path.resolve().parents):
        info = folder.stat()
        if info.st_mode & stat.S_IXOTH or (info.st_gid == user.gid and info.st_mode & stat.S_IXGRP):
            continue
        _add_group_entry(folder, user.gid, 1)


def _add_group_entry(folder: Path, gid: int, perms: int) -> None:
    entries = _read_acl(folder)
    entries = [e for e in entries if not (e[0] == _GROUP and e[2] == gid)]
    entries.append((_GROUP, perms, gid))
    union = 0
    for tag, bits, _ in entries:
        if tag in (_GROUP_OBJ, _GROUP, _USER):
            union |= bits
    entries = [e for e in entries if e[0] != _MASK] + [(_MASK, union, _UNDEFINED_ID)]
    order = {_USER_OBJ: 0, _USER: 1, _GROUP_OBJ: 2, _GROUP: 3, _MASK: 4, _OTHER: 5}
    entries.sort(key=lambda e: (order[e[0]], e[2]))
    _set_acl(folder, _ACL_ACCESS, _acl_raw(entries))


def _read_acl(folder: Path) -> list[tuple[int, int, int]]:
    try:
        raw = os.getxattr(folder, _ACL_ACCESS)
    except OSError:  # no extended ACL yet: the mode bits are the ACL
        mode = stat.S_IMODE(folder.stat().st_mode)
        return [
            (_USER_OBJ, (mode >> 6) & 7, _UNDEFINED_ID),
            (_GROUP_OBJ, (mode >> 3) & 7, _UNDEFINED_ID),
            (_OTHER, mode & 7, _UNDEFINED_ID),
        ]
    return [struct.unpack("<HHI", raw[i : i + 8]) for i in range(4, len(raw), 8)]


def _acl(entries: list[tuple[int, int]]) -> bytes:
    return _acl_raw([(tag, perms, _UNDEFINED_ID) for tag, perms in entries])


def _acl_raw(entries: list[tuple[int, int, int]]) -> bytes:
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def _set_acl(path: Path, name: str, value: bytes) -> None:
    os.setxattr(path, name, value)


# -- data --------------------------------------------------------------------------------------
def readable_by(path: Path, user: RunUser) -> bool:
    """Whether the account may open the file itself (folders above aside)."""
    info = path.stat()
    if info.st_mode & stat.S_IROTH:
        return True
    return bool(info.st_gid == user.gid and info.st_mode & stat.S_IRGRP)


def hand_over(
    paths: list[str], run_dir: Path, user: RunUser
) -> tuple[dict[str, str], list[int], str]:
    """Each file the child reads → a path it can open: an open descriptor, or a copy.

    Returns the path map, the descriptors to pass, and a description for the record.
    """
    mapping: dict[str, str] = {}
    fds: list[int] = []
    copies = 0
    for original in dict.fromkeys(paths):
        path = Path(original)
        if not path.is_file():
            continue
        if readable_by(path, user):
            fd = os.open(path, os.O_RDONLY)
            fds.append(fd)
            mapping[original] = f"/proc/self/fd/{fd}"
            continue
        inputs = run_dir / "inputs"
        inputs.mkdir(exist_ok=True)
        copy = inputs / path.name
        shutil.copyfile(path, copy)
        os.chown(copy, -1, user.gid)
        copy.chmod(0o440)
        mapping[original], copies = str(copy), copies + 1
    how = "open descriptors" if not copies else f"{copies} read-only copies in the run folder"
    return mapping, fds, how if mapping else "read in place"


# -- limits ------------------------------------------------------------------------------------
def address_space_mb(memory_budget_mb: float | None) -> int:
    """The CPU engine's address-space limit: the data budget (else all memory) + headroom."""
    budget = memory_budget_mb or _total_memory_mb()
    return int(budget + HEADROOM_MB + HEADROOM_PER_CPU_MB * (os.cpu_count() or 1))


def _total_memory_mb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):
        return 16 * 1024.0


def launcher_command(spec: dict[str, Any], command: list[str]) -> list[str]:
    launcher = Path(__file__).with_name("_launch.py")
    return [sys.executable, "-I", str(launcher), json.dumps(spec), "--", *command]


# -- one leg -----------------------------------------------------------------------------------
@dataclass
class ChildSetup:
    """What ``start_child`` needs to contain one pipeline, and what to record about it."""

    contain: dict[str, Any]
    pass_fds: tuple[int, ...]
    env: dict[str, str]
    record: Containment

    def close_fds(self) -> None:
        """The parent's copies of the handed-over descriptors (the child keeps its own)."""
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError as exc:
                logger.debug("descriptor %d already closed: %s", fd, exc)


def set_up_child(settings: Any, *, engine: str, run_dir: Path, reads: list[str]) -> ChildSetup:
    """Decide and prepare the containment of one pipeline process (DESIGN §8, tier 1)."""
    user = run_user(settings.child_user)
    network = _network(settings)
    record = Containment(user=_describe_user(user, settings), network=network[1])
    setup = ChildSetup({"network": network[0]}, (), {}, record)
    if user is not None:
        try:
            _share_stores(settings, run_dir, user)
        except OSError as exc:  # no ACLs here, say: run as root rather than not at all
            logger.warning("pipelines stay root: the stores cannot be shared (%s)", exc)
            record.user = f"root (the stores could not be shared with {user.name}: {exc})"
            record.problems.append(str(exc))
            user = None
    if user is not None:
        mapping, fds, how = hand_over(reads, run_dir, user)
        setup.contain.update(uid=user.uid, gid=user.gid)
        setup.pass_fds, record.data = tuple(fds), how
        if mapping:
            setup.env[protocol.ENV_READ_MAP] = json.dumps(mapping)
        setup.env["HOME"] = str(run_dir)  # caches (matplotlib, …) go where it may write
    return setup


def _describe_user(user: RunUser | None, settings: Any) -> str:
    if user is not None:
        return f"{user.name} (uid {user.uid})"
    if os.geteuid() == 0:
        return "root (MLPILOT_CHILD_USER=none)" if settings.child_user == "none" else "root"
    return f"{pwd.getpwuid(os.geteuid()).pw_name} (mlpilot's own user: not root)"


def _network(settings: Any) -> tuple[bool, str]:
    """Own network namespace only when every store the child writes is a local file."""
    if os.geteuid() != 0:
        return False, "not isolated (needs root)"
    remote = [
        name
        for name, uri in (
            ("tracking", settings.tracking_uri),
            ("artifacts", settings.artifact_root or ""),
            # no Optuna: the parent reaches the study's storage for the child (optuna_proxy)
        )
        if "://" in uri and not uri.startswith(("sqlite:///", "file:"))
    ]
    if remote:
        return False, f"not isolated (server stores: {', '.join(remote)})"
    return True, "isolated (own namespace, loopback only)"


def _store_paths(settings: Any) -> tuple[list[Path], list[Path]]:
    """The database files and the folders the child writes (MLflow, artifacts).

    Not the Optuna storage: the child reaches its study only through the parent's proxy.
    """
    databases, folders = [], []
    for uri in (settings.tracking_uri,):
        if uri.startswith("sqlite:///"):
            databases.append(Path(uri.removeprefix("sqlite:///")).expanduser())
    if (settings.artifact_root or "").startswith("file:"):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        folders.append(Path(url2pathname(urlparse(settings.artifact_root).path)))
    return databases, folders


def _share_stores(settings: Any, run_dir: Path, user: RunUser) -> None:
    databases, folders = _store_paths(settings)
    for code in _interpreter_paths():  # Python itself may live under /root (pyenv)
        grant_traverse(code / "x", user)
    share_folder(run_dir, user)
    grant_traverse(run_dir, user)
    for db in databases:
        # sqlite writes -wal/-shm beside the database: its folder must take new files; the
        # sticky bit keeps the child from removing anyone else's (private/ is 0700 anyway)
        db.parent.mkdir(parents=True, exist_ok=True)
        _share_dir_only(db.parent, user)
        # before the parent creates it (an early start overlaps that): sqlite would make it
        # 0644, and gives the -wal and -shm files the database's mode and owner
        if not db.exists():
            db.touch(mode=0o660)
        share_file(db, user)
        grant_traverse(db, user)
    for folder in folders:
        share_folder(folder, user)
        grant_traverse(folder / "x", user)


def _interpreter_paths() -> list[Path]:
    """Where the pipeline's Python and its packages live (read, never written)."""
    import site

    folders = {Path(sys.executable).resolve().parent, Path(sys.prefix), Path(sys.base_prefix)}
    folders.update(Path(p) for p in site.getsitepackages())
    return sorted(folders)


def _share_dir_only(folder: Path, user: RunUser) -> None:
    _share(folder, user.gid)
    folder.chmod(stat.S_IMODE(folder.stat().st_mode) | stat.S_ISVTX)
