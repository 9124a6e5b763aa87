"""Helpers for tests: the CLI as a user runs it, free ports, real servers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MLPILOT = str(BIN / "mlpilot")


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``mlpilot`` command as a user would."""
    return subprocess.run(
        [MLPILOT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")


class NxServer:
    """A real MongoDB-wire-protocol server (nx-27017) on a free local port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}"

    def start(self) -> None:
        exe = shutil.which("nx-27017", path=str(BIN)) or shutil.which("nx-27017")
        assert exe, "nx-27017 is not installed (it is in the dev extra)"
        self.proc = subprocess.Popen(
            [
                exe,
                "--db",
                str(self.workdir / "nx.db"),
                "--host",
                "127.0.0.1",
                "-p",
                str(self.port),
                "--log-file",
                str(self.workdir / "nx.log"),
                "--pid-file",
                str(self.workdir / "nx.pid"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
