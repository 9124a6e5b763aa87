"""The launcher every pipeline process starts through (standard library only).

    python -I _launch.py SPEC_JSON -- COMMAND...

It applies the containment the parent decided (``containment.ChildSpec``), in the only
order that works, then replaces itself with the pipeline: its own network namespace
(entered while still root, loopback brought up), the unprivileged user (groups cleared),
the parent-death signal (set after the user change, which clears it), the resource
limits and a umask. It runs in the child between ``Popen`` and the pipeline, so the
parent's threads never meet a ``preexec_fn``. A step that cannot be applied ends the
launcher with status 97 and one line on stderr: the parent records it, the pipeline
never runs uncontained by surprise.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SIOCSIFFLAGS, SIOCGIFFLAGS = 0x8914, 0x8913
IFF_UP = 0x1
FAILED_TO_CONTAIN = 97


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _own_network() -> None:
    if _libc().unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    # the new namespace's loopback starts down; libraries that talk to themselves need it
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b"\0" * 14))


def _drop_user(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() != uid or os.getegid() != gid:
        raise OSError("the user did not change")


def _limit(which: int, soft: int) -> None:
    _, hard = resource.getrlimit(which)
    value = soft if hard == resource.RLIM_INFINITY else min(soft, hard)
    resource.setrlimit(which, (value, value))


def apply(spec: dict) -> None:
    if spec.get("network"):
        _own_network()
    if spec.get("uid") is not None:
        _drop_user(int(spec["uid"]), int(spec["gid"]))
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    limits = spec.get("limits", {})
    for name, value in limits.items():
        _limit(getattr(resource, name), int(value))
    os.umask(int(spec.get("umask", 0o007)))


def main(argv: list[str]) -> None:
    spec, command = json.loads(argv[1]), argv[3:]
    try:
        apply(spec)
    except OSError as exc:
        print(f"mlpilot could not contain the pipeline: {exc}", file=sys.stderr)
        os._exit(FAILED_TO_CONTAIN)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
