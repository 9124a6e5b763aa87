"""Tier-1 containment of pipeline processes (DESIGN §8): who they run as, what they reach.

When mlpilot runs as root, each pipeline runs as a uid and gid of its own (``claim_ids``:
a slot of a reserved range, locked while its run lives, never one a live process has). It
writes its run folder and nothing else: the parent logs to MLflow on its behalf
(``execution/relay.py``) and serves it the Optuna study through a proxy over a passed
socketpair (``execution/optuna_proxy.py``), so no store is shared with it. Its run folder
is its own (``own_run_folder``: ``root:<run gid>``, setgid and sticky, so mlpilot's files
in it stay root's) and is sealed after the run (``seal_run_folder``). Folders above the run
folder that are closed to others (``/root`` is 0700) get a traverse-only ACL entry. The
metadata store, outbox, sessions and trust anchors live under ``$MLPILOT_HOME/private``
(0700), which no pipeline reaches. Data files come as open descriptors, or as read-only
copies in the run folder.

The launcher (``_launch.py``) then puts the process tree in its own PID and mount
namespaces (a private /proc and /tmp, /home and /root hidden), its own network namespace
when every store it writes is a local file, under ``no_new_privs``, Landlock (writes only
beneath the run folder, the stores and its temporary folders; signals and abstract sockets
scoped) and a seccomp filter, with a parent-death signal and limits. ``TreeWatch`` is the
parent's side: the disk cap beyond the run folder, and the end of the tree. Without root,
there is no uid and no namespace; Landlock, ``no_new_privs`` and seccomp still apply.
``Containment`` says what was applied, and what not and why; it is recorded on the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import logging
import os
import platform
import pwd
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpilot.platform.config.settings import (
    RUN_ACCOUNT,
    RUN_IDS_COUNT,
    RUN_IDS_FIRST,
    RUN_IDS_FOLDER,
)
from mlpilot.platform.errors import ExecutionError
from mlpilot.platform.execution import _launch
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
#: the private tmpfs (/tmp, /var/tmp, /dev/shm, /run) takes memory: at most this much of it
TMP_MAX_MB = 2048.0
#: folders the private tmpfs serves; writable beneath them (Landlock)
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run")
#: the owner of a finished run's files: just below the range, never handed out
SEALED_ID = RUN_IDS_FIRST - 1
#: folders hidden from pipelines (as root): other people's homes and root's own
HIDDEN = ("/home", "/root")
#: mlpilot's top-level packages (pyproject's package-dir): what a pipeline imports of it
PACKAGES = ("mlpilot.platform", "mlpilot.tracking", "mlpilot.adapters", "mlpilot.dashboards")
#: device files pipelines may write (the GPU's are added where they exist)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


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
    #: whether the whole process tree ends with the run (PID namespace)
    tree: str = "not contained"
    #: what of the file system it sees and may write (mount namespace, tmpfs, Landlock)
    filesystem: str = "the host's"
    #: no_new_privs, the seccomp filter, signal and abstract-socket scoping
    privileges: str = "not restricted"

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "network": self.network,
            "tree": self.tree,
            "filesystem": self.filesystem,
            "privileges": self.privileges,
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


# -- a uid per run -----------------------------------------------------------------------------
@dataclass
class RunIds:
    """The uid and gid one pipeline runs as, held (an exclusive lock) until ``release``."""

    slot: int
    uid: int
    gid: int
    lock_fd: int | None

    @property
    def name(self) -> str:
        return f"{RUN_USER}-{self.slot}"

    def release(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # closing drops the lock
            self.lock_fd = None


def claim_ids(run_dir: Path, folder: str = RUN_IDS_FOLDER) -> RunIds:
    """A uid (and the same gid) no live process has, locked for this run.

    A slot's lock file names the run folder it was last claimed for: a slot whose owner
    died before sealing its folder (``seal_run_folder``) is sealed now, before reuse.
    """
    base = _root_only_folder(Path(folder))
    live = _live_uids()
    start = os.getpid() % RUN_IDS_COUNT  # spread concurrent claimers over the range
    for step in range(RUN_IDS_COUNT):
        slot = (start + step) % RUN_IDS_COUNT
        if RUN_IDS_FIRST + slot in live:
            continue
        fd = os.open(base / str(slot), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        ids = RunIds(slot, RUN_IDS_FIRST + slot, RUN_IDS_FIRST + slot, fd)
        if ids.uid in _live_uids():  # a process took the uid between the scan and the lock
            ids.release()
            continue
        _reclaim(fd, ids)
        os.ftruncate(fd, 0)
        os.pwrite(fd, os.fsencode(str(run_dir)), 0)
        return ids
    raise ExecutionError(
        f"all {RUN_IDS_COUNT} pipeline uids are in use",
        hint=f"wait for runs to end; stale locks live in {folder}",
    )


def _reclaim(fd: int, ids: RunIds) -> None:
    previous = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    if previous and Path(previous).is_dir():
        try:
            seal_run_folder(Path(previous), ids)
        except OSError as exc:
            logger.warning("could not seal %s of a vanished run: %s", previous, exc)


def _root_only_folder(folder: Path) -> Path:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise ExecutionError(
            f"{folder} is not a folder of root's alone: pipeline uids are not handed out",
            hint=f"check it, then: rm -rf {folder}",
        )
    return folder


def _live_uids() -> set[int]:
    """The real, effective and saved uids of every process on this host."""
    uids: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        uids.update(int(v) for v in line.split()[1:4])
                        break
        except OSError:  # ended meanwhile
            continue
    return uids


# -- the run folder ----------------------------------------------------------------------------
def own_run_folder(run_dir: Path, ids: RunIds) -> None:
    """Only this run's uid (and root) may write the folder; root's files in it stay root's.

    The folder is ``root:<run gid>`` with the setgid and sticky bits: the pipeline creates
    files (its group), but cannot remove or replace the ones mlpilot wrote (pipeline.py,
    the plan); files a previous leg's uid left become this uid's. Others cannot enter.
    """
    os.chown(run_dir, 0, ids.gid, follow_symlinks=False)
    run_dir.chmod(0o3770)
    _drop_acls(run_dir)
    for top, dirs, files, top_fd in os.fwalk(run_dir, follow_symlinks=False):
        for name in dirs + files:
            info = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            if info.st_uid != 0:
                os.chown(name, ids.uid, ids.gid, dir_fd=top_fd, follow_symlinks=False)
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            os.chown(name, 0, ids.gid, dir_fd=top_fd, follow_symlinks=False)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISDIR(info.st_mode):
                mode |= stat.S_IRWXG | stat.S_ISGID | stat.S_ISVTX
            else:
                mode = (mode | stat.S_IRGRP) & ~(stat.S_IWGRP | stat.S_IWOTH)
            os.chmod(name, mode, dir_fd=top_fd)
            _drop_acls(Path(top) / name)


def seal_run_folder(run_dir: Path, ids: RunIds) -> None:
    """After the run: everything of its uid goes to ``SEALED_ID`` (a uid no process ever
    runs as), so no later run of the same uid reaches it, while a next leg in the same
    folder (a CPU fallback) still gets the pipeline's own files (``own_run_folder``)."""
    for _top, dirs, files, top_fd in os.fwalk(run_dir, follow_symlinks=False):
        for name in dirs + files:
            info = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            if info.st_uid == ids.uid:
                os.chown(name, SEALED_ID, SEALED_ID, dir_fd=top_fd, follow_symlinks=False)
            elif info.st_gid == ids.gid:
                os.chown(name, -1, 0, dir_fd=top_fd, follow_symlinks=False)
    os.chown(run_dir, 0, 0, follow_symlinks=False)
    run_dir.chmod(0o755)


def _drop_acls(path: Path) -> None:
    """An ACL an older mlpilot set (its pipelines' shared group) would outlive the chown."""
    for name in (_ACL_ACCESS, _ACL_DEFAULT):
        with contextlib.suppress(OSError):
            os.removexattr(path, name, follow_symlinks=False)


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
    elif mode & stat.S_IWUSR:
        path.chmod(mode | stat.S_IRGRP | stat.S_IWGRP)
    else:  # made read-only by its owner (the run's pipeline.py): readable, never writable
        path.chmod(mode | stat.S_IRGRP)


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
    watch: TreeWatch | None = None

    @property
    def contained(self) -> bool:
        """Whether the child runs as its own uid (then its processes can be counted)."""
        return self.contain.get("uid") is not None

    def close_fds(self) -> None:
        """The parent's copies of the handed-over descriptors (the child keeps its own)."""
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError as exc:
                logger.debug("descriptor %d already closed: %s", fd, exc)


class TreeWatch:
    """The parent's side of one contained tree: what it wrote beyond its run folder (its
    private tmpfs, for the disk cap) and, once it has ended, the sealing of its folder and
    the uid's release. Nothing else is writable for it (Landlock, no shared store)."""

    def __init__(self, run_dir: Path, ids: RunIds | None, *, private_tmp: bool) -> None:
        self.run_dir, self.ids = run_dir, ids
        self.private_tmp = private_tmp

    def extra_mb(self, pid: int) -> float:
        """The private tmpfs's use, MiB."""
        private = f"/proc/{pid}/root/tmp"
        with contextlib.suppress(OSError):  # gone: it writes nothing more
            # until its init has mounted the tmpfs, that path is still the host's /tmp
            if self.private_tmp and os.stat(private).st_dev != os.stat("/tmp").st_dev:
                info = os.statvfs(private)
                return (info.f_blocks - info.f_bfree) * info.f_frsize / 2**20
        return 0.0

    def end(self) -> None:
        """After every process of the tree is gone (idempotent)."""
        ids, self.ids = self.ids, None
        if ids is None:
            return
        try:
            seal_run_folder(self.run_dir, ids)
        except OSError as exc:  # the slot's next claimer seals it (claim_ids)
            logger.warning("could not seal %s: %s", self.run_dir, exc)
        ids.release()


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
    ids = _own_ids(user, run_dir, setup, reads) if user is not None else None
    _restrict(settings, setup, run_dir, ids, reads)
    return setup


def _own_ids(user: RunUser, run_dir: Path, setup: ChildSetup, reads: list[str]) -> RunIds:
    """The run's own uid and gid, its folder theirs, its data handed over to them."""
    ids = claim_ids(run_dir)
    try:
        own_run_folder(run_dir, ids)
        leg_user = RunUser(ids.name, ids.uid, ids.gid)
        mapping, fds, how = hand_over(reads, run_dir, leg_user)
    except OSError as exc:  # a folder that cannot change owner (root squashed, say)
        ids.release()
        raise ExecutionError(
            f"the run folder {run_dir} could not be given to the pipeline's own uid: {exc}",
            hint="put MLPILOT_HOME on a local file system, or set MLPILOT_CHILD_USER=none",
        ) from exc
    except BaseException:
        ids.release()
        raise
    # no supplementary group: the run shares no store with anyone (the parent logs for it)
    setup.contain.update(uid=ids.uid, gid=ids.gid, groups=[])
    setup.pass_fds, setup.record.data = tuple(fds), how
    if mapping:
        setup.env[protocol.ENV_READ_MAP] = json.dumps(mapping)
    # caches (matplotlib, …) go where it may write; libraries that ask get a name
    setup.env.update(HOME=str(run_dir), USER=ids.name, LOGNAME=ids.name)
    setup.record.user = f"{ids.name} (uid {ids.uid}, no groups; its own for this run)"
    return ids


def _restrict(
    settings: Any, setup: ChildSetup, run_dir: Path, ids: RunIds | None, reads: list[str]
) -> None:
    """The tree (PID and mount namespaces, as root), Landlock, no_new_privs and seccomp."""
    root = os.geteuid() == 0
    contain, record = setup.contain, setup.record
    if root:
        # a little past the cap: filling it is the cap's breach (DiskLimit), not ENOSPC
        tmp_mb = min(TMP_MAX_MB, settings.max_run_disk_mb + 4)
        keep = [str(run_dir), *reads, *map(str, _interpreter_paths())]
        keep += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        contain.update(tree=True, tmp_mb=tmp_mb, cwd=str(run_dir), keep=keep, hide=list(HIDDEN))
        record.tree = "own PID namespace: every process of the run ends with it"
        temporary = list(PRIVATE_TMP)
        filesystem = [
            f"own mounts: /tmp, /var/tmp, /dev/shm and /run are one private tmpfs of "
            f"{tmp_mb:g} MiB (counted in the disk cap); {' and '.join(HIDDEN)} hidden but "
            "for what the run needs (its folder, its data, the interpreter)"
        ]
    else:
        record.tree = "its process group only (not applied: a PID namespace needs root)"
        cache = Path.home() / ".cache"  # a rule needs the folder to exist
        with contextlib.suppress(OSError):
            cache.mkdir(mode=0o700, exist_ok=True)
        temporary = [tempfile.gettempdir(), "/var/tmp", "/dev/shm", str(cache)]
        filesystem = ["the host's mounts (not applied: a mount namespace needs root)"]
    abi = _launch.landlock_abi()
    if abi:
        writable = [str(run_dir), *temporary]
        contain.update(landlock=True, writable=writable, devices=_devices())
        filesystem.append(
            f"writes only beneath the run folder and {', '.join(temporary)} (Landlock ABI {abi})"
        )
    else:
        filesystem.append("writes not restricted (not applied: this kernel has no Landlock)")
    record.filesystem = "; ".join(filesystem)
    record.privileges = _privileges(contain, abi)
    setup.watch = TreeWatch(run_dir, ids, private_tmp=root)


def _privileges(contain: dict[str, Any], abi: int) -> str:
    said = ["no_new_privs"]
    if _launch.seccomp_supported():
        contain["seccomp"] = True
        refused = len(_launch.REFUSED[platform.machine()])
        said.append(f"seccomp filter ({refused} system calls and namespace clones refused)")
    else:
        said.append("no seccomp filter (not applied: not available on this kernel or CPU)")
    if abi >= 6:
        said.append("signals and abstract Unix sockets scoped to its own tree (Landlock)")
    else:
        said.append("signals and abstract sockets not scoped (not applied: Landlock ABI < 6)")
    return "; ".join(said)


def _devices() -> list[str]:
    """The device files a pipeline writes: the usual ones, and the GPU's where present."""
    found = [*DEVICES, *glob.glob("/dev/nvidia*"), *glob.glob("/dev/nvidia-caps/*")]
    return [path for path in found if os.path.exists(path) and not os.path.isdir(path)]


def _describe_user(user: RunUser | None, settings: Any) -> str:
    if user is not None:
        return f"{user.name} (uid {user.uid})"
    if os.geteuid() == 0:
        return "root (MLPILOT_CHILD_USER=none)" if settings.child_user == "none" else "root"
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid without a passwd entry (containers)
        name = f"uid {os.geteuid()}"
    return f"{name} (mlpilot's own user: not root)"


def _network(settings: Any) -> tuple[bool, str]:
    """Own network namespace only when every store the child writes is a local file."""
    if os.geteuid() != 0:
        return False, "not isolated (needs root)"
    # the parent logs to MLflow for the pipeline (execution/relay.py): only Optuna counts
    remote = [
        name for name, uri in () if "://" in uri and not uri.startswith(("sqlite:///", "file:"))
    ]
    if remote:
        return False, f"not isolated (server stores: {', '.join(remote)})"
    return True, "isolated (own namespace, loopback only)"


def _share_stores(settings: Any, run_dir: Path, user: RunUser) -> None:
    """What the account needs to reach at all: the interpreter and its run folder."""
    for code in _interpreter_paths():  # Python itself may live under /root (pyenv)
        grant_traverse(code / "x", user)
    run_dir.mkdir(parents=True, exist_ok=True)  # the run's own uid gets it (own_run_folder)
    grant_traverse(run_dir, user)


def _interpreter_paths() -> list[Path]:
    """Where the pipeline's Python and its packages live (read, never written).

    mlpilot's own folders are named apart: an editable install (a checkout) keeps them
    outside site-packages, and a checkout under /tmp or /home would otherwise be covered by
    the private mounts. Only those folders, not the checkout: its run homes stay unseen.
    """
    import importlib.util
    import site

    folders = {Path(sys.executable).resolve().parent, Path(sys.prefix), Path(sys.base_prefix)}
    folders.update(Path(p) for p in site.getsitepackages())
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for place in (spec.submodule_search_locations or []) if spec else []:
            if os.path.isabs(place) and os.path.isdir(place):  # not an import hook's name
                folders.add(Path(place))
    return sorted(folders)


def _share_dir_only(folder: Path, user: RunUser) -> None:
    _share(folder, user.gid)
    folder.chmod(stat.S_IMODE(folder.stat().st_mode) | stat.S_ISVTX)
