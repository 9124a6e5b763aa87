"""The launcher every pipeline process starts through (standard library only).

    python -I _launch.py SPEC_JSON -- COMMAND...

It applies the containment the parent decided (``containment.ChildSpec``), in the only
order that works, then replaces itself with the pipeline. As root (``spec["tree"]``):

1. this process (the *relay*, the one the parent waits on) enters new mount, PID and
   (where the stores are local files) network namespaces, makes every mount private and
   brings the new loopback up;
2. it forks the namespace's PID 1 (the *init*), which mounts a fresh ``/proc`` and one
   size-capped tmpfs serving ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run`` (the host's
   sockets and shared temporary files are out of sight), then forks the pipeline;
3. the pipeline process takes the run's own uid and gid (supplementary groups as given),
   the parent-death signal (after the user change, which clears it), the resource limits,
   a umask, ``no_new_privs``, a Landlock domain (writes only beneath the folders given,
   signals and abstract sockets scoped to its own tree) and a seccomp filter, and execs.

The init reaps orphans, passes SIGTERM/SIGINT/SIGHUP to every process of the namespace and
exits when the pipeline does: the kernel then kills whatever is left (a ``setsid`` daemon,
a double fork). The relay passes the same signals to the init and ends the way the
pipeline ended (its status, or its signal), so the parent sees what it saw before. Each
process has a parent-death signal: a parent killed outright takes the whole tree along.
Without root there are no namespaces and no user change; ``no_new_privs``, Landlock and
seccomp still apply. A step that cannot be applied ends the launcher with status 97 and
one line on stderr: the parent records it, the pipeline never runs uncontained by surprise.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import logging
import os
import resource
import select
import signal
import socket
import struct
import sys

logger = logging.getLogger(__name__)

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
#: namespace flags a pipeline may not pass to clone() (the seccomp filter checks them)
CLONE_NAMESPACES = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_GET_NO_NEW_PRIVS = 1, 38, 22, 39
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
SIOCSIFFLAGS, SIOCGIFFLAGS = 0x8914, 0x8913
IFF_UP = 0x1
FAILED_TO_CONTAIN = 97
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: the folders the private tmpfs serves, and their modes
PRIVATE_TMP = (("/var/tmp", 0o1777), ("/dev/shm", 0o1777), ("/run", 0o755))

# -- Landlock (ABI 1..6+: what this kernel knows is asked first) --------------------------------
SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
FS_WRITE_FILE, FS_TRUNCATE = 1 << 1, 1 << 14
#: every right that changes the file system; reads and execution stay with the DAC
FS_WRITES = {1: 0x1FF2, 2: 0x3FF2, 3: 0x7FF2}  # ABI → WRITE_FILE, REMOVE_*, MAKE_*, REFER, TRUNCATE
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

# -- seccomp ------------------------------------------------------------------------------------
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: what a pipeline never needs: debugging others, mounts and namespaces, kernel modules and
#: images, BPF and perf, the kernel keyring, other processes' memory, clocks, swap, reboot
REFUSED = {
    "x86_64": {
        "ptrace": 101, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "bpf": 321,
        "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
        "process_vm_readv": 310, "process_vm_writev": 311, "userfaultfd": 323,
        "open_by_handle_at": 304, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
        "quotactl": 179, "syslog": 103, "iopl": 172, "ioperm": 173, "settimeofday": 164,
        "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "vhangup": 153,
        "lookup_dcookie": 212, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    },
    "aarch64": {
        "ptrace": 117, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "unshare": 97, "setns": 268, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "bpf": 280,
        "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218,
        "process_vm_readv": 270, "process_vm_writev": 271, "userfaultfd": 282,
        "open_by_handle_at": 265, "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89,
        "quotactl": 60, "syslog": 116, "settimeofday": 170, "clock_settime": 112,
        "adjtimex": 171, "clock_adjtime": 266, "vhangup": 58, "lookup_dcookie": 18,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    },
}  # fmt: skip
SYS_CLONE = {"x86_64": 56, "aarch64": 220}
SYS_CLONE3 = 435  # its flags sit in memory a filter cannot read: ENOSYS, libc falls back to clone
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


class ContainError(OSError):
    """A step of the containment failed: the launcher ends with FAILED_TO_CONTAIN."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise ContainError(errno, f"{what}: {os.strerror(errno)}")
    return result


# -- namespaces and mounts ---------------------------------------------------------------------
def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def _loopback_up() -> None:
    # the new namespace's loopback starts down; libraries that talk to themselves need it
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b"\0" * 14))


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    result = libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode()
    )
    _check(result, f"mount {target}")


def _private_mounts(spec: dict) -> None:
    """In the init (the namespace's PID 1): its own /proc, one capped tmpfs for the rest.

    ``hide`` are folders covered by an empty tmpfs (other users' homes). ``keep`` are the
    paths the pipeline needs that lie under a covered folder (a run folder under /tmp, the
    interpreter under /root): each is bound back at its own path, nothing else of the host's.
    """
    tmp_mb, cwd = float(spec.get("tmp_mb", 64)), spec.get("cwd")
    hide = [str(h) for h in spec.get("hide", []) if os.path.isdir(h) and not os.path.islink(h)]
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    resolv = _resolver_config()
    covered = ("/tmp", *(target for target, _ in PRIVATE_TMP), *hide)
    held = [
        (path, os.open(path, os.O_PATH | os.O_CLOEXEC))
        for path in _under(list(spec.get("keep", [])), covered)
    ]
    size_kb = max(1024, int(tmp_mb * 1024))
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_kb}k,mode=1777")
    for target, mode in PRIVATE_TMP:
        if not os.path.isdir(target) or os.path.islink(target):
            continue
        staging = f"/tmp/.{target.strip('/').replace('/', '-')}"
        os.mkdir(staging)
        os.chmod(staging, mode)
        _mount(staging, target, None, MS_BIND)
    for folder in hide:
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=1024k,mode=0755")
    for path, fd in held:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    if resolv is not None:  # /etc/resolv.conf may point into /run (systemd-resolved)
        path, text = resolv
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(text)
    if cwd:  # the inherited one still points into the folders now covered: walk in anew
        os.chdir(cwd)


def _under(paths: list[str], roots: tuple[str, ...]) -> list[str]:
    """The existing ``paths`` beneath ``roots``, outermost first, none inside another."""
    found: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths}, key=len):
        beneath = any(path == r or path.startswith(r + "/") for r in roots)
        if beneath and os.path.exists(path) and not any(path.startswith(f + "/") for f in found):
            found.append(path)
    return found


def _resolver_config() -> tuple[str, bytes] | None:
    target = os.path.realpath("/etc/resolv.conf")
    if not target.startswith("/run/"):
        return None
    try:
        with open(target, "rb") as fh:
            return target, fh.read()
    except OSError:
        return None


# -- the pipeline process ----------------------------------------------------------------------
def _drop_user(uid: int, gid: int, groups: list[int]) -> None:
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() != uid or os.getegid() != gid or sorted(os.getgroups()) != sorted(groups):
        raise ContainError("the user did not change")


def _limit(which: int, soft: int) -> None:
    _, hard = resource.getrlimit(which)
    value = soft if hard == resource.RLIM_INFINITY else min(soft, hard)
    resource.setrlimit(which, (value, value))


def _die_with_parent() -> None:
    parent = os.getppid()
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the parent died before the signal was armed
        raise ContainError("the parent ended before the pipeline started")


def _landlock(writable: list[str], devices: list[str]) -> None:
    """Writes only beneath ``writable`` (and to ``devices``); signals, abstract sockets scoped."""
    create, add, restrict = SYS_LANDLOCK[_arch()]
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    long = ctypes.c_long
    abi = landlock_abi()
    if abi < 1:
        raise ContainError("Landlock is not available in this kernel")
    handled = FS_WRITES[min(abi, 3)]
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, 0, scoped)[: 24 if abi >= 6 else 16 if abi >= 4 else 8]
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(libc.syscall(long(create), buf, long(len(attr)), long(0)), "landlock ruleset")
    try:
        rules = [(p, handled) for p in writable] + [(d, handled & _FILE_RIGHTS) for d in devices]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
                rule_type = long(LANDLOCK_RULE_PATH_BENEATH)
                _check(libc.syscall(long(add), long(ruleset), rule_type, rule, long(0)), path)
            finally:
                os.close(fd)
        _check(libc.syscall(long(restrict), long(ruleset), long(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


_FILE_RIGHTS = FS_WRITE_FILE | FS_TRUNCATE


def _arch() -> str:
    arch = os.uname().machine
    if arch not in AUDIT_ARCH:
        raise ContainError(f"no seccomp and Landlock tables for {arch}")
    return arch


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none, or an architecture without tables)."""
    if os.uname().machine not in SYS_LANDLOCK:
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    long = ctypes.c_long
    create = SYS_LANDLOCK[os.uname().machine][0]
    abi = libc.syscall(long(create), None, long(0), long(LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, int(abi))


def seccomp_supported() -> bool:
    """Filters work here: a known architecture and a kernel built with seccomp."""
    if os.uname().machine not in AUDIT_ARCH:
        return False
    try:
        with open("/proc/self/status", "rb") as fh:
            return any(line.startswith(b"Seccomp:") for line in fh)
    except OSError:
        return False


def seccomp_program(arch: str) -> list[tuple[int, int, int, int]]:
    """The BPF program: EPERM for ``REFUSED`` and namespace clones, ENOSYS for clone3."""
    refused = sorted(REFUSED[arch].values())
    deny, nosys = RET_ERRNO | EPERM, RET_ERRNO | ENOSYS
    prog = [(LD_W_ABS, 0, 0, 4), (JEQ_K, 1, 0, AUDIT_ARCH[arch]), (RET_K, 0, 0, deny)]
    prog.append((LD_W_ABS, 0, 0, 0))
    if arch == "x86_64":  # the x32 ABI: the same calls under other numbers
        prog += [(JGE_K, 0, 1, X32_SYSCALL_BIT), (RET_K, 0, 0, deny)]
    prog += [(JEQ_K, 0, 1, SYS_CLONE3), (RET_K, 0, 0, nosys)]
    # clone(flags, …): flags' low word is the first argument's (little-endian) first half
    prog += [(JEQ_K, 0, 3, SYS_CLONE[arch]), (LD_W_ABS, 0, 0, 16), (JSET_K, 0, 1, CLONE_NAMESPACES)]
    prog += [(RET_K, 0, 0, deny), (LD_W_ABS, 0, 0, 0)]
    for i, number in enumerate(refused):
        prog.append((JEQ_K, len(refused) - i, 0, number))
    prog += [(RET_K, 0, 0, RET_ALLOW), (RET_K, 0, 0, deny)]
    return prog


def _seccomp() -> None:
    prog = seccomp_program(_arch())
    filters = (ctypes.c_uint64 * len(prog))()
    for i, (code, jt, jf, k) in enumerate(prog):
        filters[i] = struct.unpack("=Q", struct.pack("=HBBI", code, jt, jf, k))[0]

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(prog), ctypes.cast(filters, ctypes.c_void_p))
    _check(_libc().prctl(PR_SET_SECCOMP, 2, ctypes.byref(fprog), 0, 0), "seccomp filter")


def apply(spec: dict) -> None:
    """The pipeline process's own containment, in order; the last step before ``exec``."""
    if spec.get("uid") is not None:
        _drop_user(int(spec["uid"]), int(spec["gid"]), [int(g) for g in spec.get("groups", [])])
    _die_with_parent()
    for name, value in spec.get("limits", {}).items():
        _limit(getattr(resource, name), int(value))
    os.umask(int(spec.get("umask", 0o007)))
    if spec.get("no_new_privs", True):
        _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    if spec.get("landlock"):
        _landlock(list(spec.get("writable", [])), list(spec.get("devices", [])))
    if spec.get("seccomp"):
        _seccomp()


def _exec(spec: dict, command: list[str]) -> None:
    env = dict(os.environ)
    if spec.get("tree"):
        env["TMPDIR"] = "/tmp"  # the private tmpfs: a TMPDIR elsewhere is not writable
    os.execvpe(command[0], command, env)


# -- the tree ----------------------------------------------------------------------------------
def _init(spec: dict, command: list[str], status_w: int, alive_r: int) -> None:
    """PID 1 of the run's namespace: mounts, then the pipeline; reaps; ends with it."""
    os.setsid()  # out of the relay's group: the relay alone passes signals on
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if _relay_gone(alive_r):  # it ended before the signal was armed: nothing waits for us
        os._exit(FAILED_TO_CONTAIN)
    _private_mounts(spec)
    pipeline = os.fork()
    if pipeline == 0:
        os.close(status_w)
        for signum in FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        _contained(lambda: (apply(spec), _exec(spec, command)))
    for signum in FORWARDED:  # to every process of the namespace (PID 1 itself excepted)
        signal.signal(signum, lambda s, _f: _kill_all(s))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            status = FAILED_TO_CONTAIN << 8
            break
        if pid == pipeline:
            break
    os.write(status_w, struct.pack("i", status))
    os._exit(0)  # the kernel now kills what is left of the namespace


def _kill_all(signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signum)


def _relay_gone(alive_r: int) -> bool:
    """The relay holds the write end: all writers gone means the relay has ended."""
    poller = select.poll()
    poller.register(alive_r, select.POLLIN)
    return any(event & (select.POLLHUP | select.POLLERR) for _, event in poller.poll(0))


def _relay(spec: dict, command: list[str]) -> None:
    """The process the parent waits on: the namespaces, the init, its outcome."""
    flags = CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWNET if spec.get("network") else 0)
    _unshare(flags)
    if spec.get("network"):
        _loopback_up()
    _mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host
    status_r, status_w = os.pipe()
    alive_r, alive_w = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    init = os.fork()
    if init == 0:
        os.close(status_r)
        os.close(alive_w)
        # still blocked: a signal that comes while it sets up waits for its handlers (an
        # init drops, unhandled, what comes from outside its namespace)
        _contained(lambda: _init(spec, command, status_w, alive_r))
    os.close(status_w)
    os.close(alive_r)
    for signum in FORWARDED:
        signal.signal(signum, lambda s, _f: _signal_init(init, s))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    _, init_status = os.waitpid(init, 0)
    reported = os.read(status_r, 4)
    status = struct.unpack("i", reported)[0] if len(reported) == 4 else init_status
    _end_as(status)


def _signal_init(init: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(init, signum)


def _end_as(status: int) -> None:
    """End this process the way the pipeline ended: the parent sees no difference."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler
        signal.signal(-code, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
    os.kill(os.getpid(), -code)
    os._exit(128 - code)


def _contained(step: object) -> None:
    """Run a containment step; any failure ends this process with one line and 97."""
    try:
        step()  # type: ignore[operator]
    except OSError as exc:
        print(f"mlpilot could not contain the pipeline: {exc}", file=sys.stderr, flush=True)
        os._exit(FAILED_TO_CONTAIN)
    except BaseException as exc:  # the pipeline never runs after a surprise either
        logger.debug("containment step failed", exc_info=True)
        print(f"mlpilot could not contain the pipeline: {exc!r}", file=sys.stderr, flush=True)
        os._exit(FAILED_TO_CONTAIN)
    os._exit(FAILED_TO_CONTAIN)  # exec returned


def main(argv: list[str]) -> None:
    spec, command = json.loads(argv[1]), argv[3:]
    if spec.get("tree"):
        _contained(lambda: (_die_with_parent_relay(), _relay(spec, command)))
    if spec.get("network"):
        _contained(
            lambda: (_unshare(CLONE_NEWNET), _loopback_up(), apply(spec), _exec(spec, command))
        )
    _contained(lambda: (apply(spec), _exec(spec, command)))


def _die_with_parent_relay() -> None:
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


if __name__ == "__main__":
    main(sys.argv)
