"""What a GPU leg needs from its parent: the device to itself, and its memory measured.

- ``DeviceLock``: one GPU leg per device at a time. Two legs on one device would share
  its memory (each cudf.pandas process reserves 80 % of what is free for its pool) and its
  time, so both would run out of memory or measure each other. The lock is a file under
  ``$MLPILOT_HOME/locks`` named after the device's PCI bus id, held by the parent for as
  long as its child runs; a parent that dies releases it with its file descriptors.
- ``MemorySampler``: the device memory in use, sampled while the leg runs (NVML through
  ``libnvidia-ml``, shipped with the driver), reported as the peak above what was in use
  when the leg started. It covers everything the process holds — the RMM pool, XGBoost's
  own allocations, the CUDA context — which RMM's own statistics would miss.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import ExecutionError

logger = logging.getLogger(__name__)

LOCK_POLL_S = 0.5


def lock_name(bus_id: str) -> str:
    """A file name for the device at ``bus_id`` ("0000:3B:00.0" → "gpu-0000-3b-00-0.lock")."""
    cleaned = re.sub(r"[^0-9a-z]+", "-", bus_id.lower()).strip("-") or "0"
    return f"gpu-{cleaned}.lock"


class DeviceLock:
    """An exclusive lock on one GPU, shared by every mlpilot process on this machine."""

    def __init__(self, folder: Path, bus_id: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / lock_name(bus_id)
        self.bus_id = bus_id
        self._fd: int | None = None

    def acquire(self, timeout_s: float, on_wait: Any = None) -> None:
        """Wait up to ``timeout_s`` for the device; ``on_wait(holder)`` is called once."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline, told = time.monotonic() + timeout_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._holder()
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise ExecutionError(
                        f"the GPU at {self.bus_id} stayed busy with another mlpilot GPU leg "
                        f"({holder}) for {timeout_s:.0f} s",
                        hint="wait for it to finish, or run on another GPU (CUDA_VISIBLE_DEVICES)",
                    ) from None
                if on_wait is not None and not told:
                    on_wait(holder)
                    told = True
                time.sleep(LOCK_POLL_S)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self._fd = fd

    def _holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip() or "unknown process"
        except OSError:
            return "unknown process"

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class Nvml:
    """The two NVML calls the sampler needs; None-returning when NVML is unusable."""

    def __init__(self) -> None:
        self._lib: Any = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                self._lib = lib
        except (OSError, AttributeError) as exc:
            logger.debug("NVML unavailable: %s", exc)

    def handle(self, bus_id: str) -> Any:
        if self._lib is None or not bus_id:
            return None
        handle = ctypes.c_void_p()
        status = self._lib.nvmlDeviceGetHandleByPciBusId_v2(
            ctypes.c_char_p(bus_id.encode()), ctypes.byref(handle)
        )
        return handle if status == 0 else None

    def used_bytes(self, handle: Any) -> int | None:
        memory = _Memory()
        if self._lib is None or self._lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)):
            return None
        return int(memory.used)


class MemorySampler:
    """Peak device memory in use above the baseline at start, in MiB (None: not measured)."""

    def __init__(self, bus_id: str, nvml: Any = None) -> None:
        self._nvml = nvml if nvml is not None else Nvml()
        self._handle = self._nvml.handle(bus_id)
        self.baseline = self._read()
        self.peak: int | None = None

    def _read(self) -> int | None:
        return None if self._handle is None else self._nvml.used_bytes(self._handle)

    def sample(self) -> None:
        used = self._read()
        if used is not None and self.baseline is not None:
            self.peak = max(self.peak or 0, used - self.baseline)

    @property
    def peak_mb(self) -> float | None:
        return None if self.peak is None else round(self.peak / 2**20, 1)
