"""Engines (DESIGN §6): which interpreter command runs a pipeline, and why.

``auto`` picks the GPU only when a CUDA device is usable *and* cuDF/cuML import in a
child interpreter; importing cudf alone proves nothing about a device.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache

from mlpilot.platform.errors import ExecutionError, MissingExtraError

GPU_MODULES = ("cudf.pandas", "cuml.accel")


@dataclass(frozen=True)
class EngineChoice:
    requested: str
    used: str  # cpu, gpu, or compare
    reason: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class GpuStatus:
    usable: bool
    reason: str
    devices: int = 0
    name: str = ""


def _cuda_driver() -> ctypes.CDLL | None:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@lru_cache(maxsize=1)
def cuda_device_status() -> GpuStatus:
    """Ask the CUDA driver itself whether a device can be used (no Python GPU package needed)."""
    driver = _cuda_driver()
    if driver is None:
        return GpuStatus(False, "no CUDA driver (libcuda) on this machine")
    if driver.cuInit(0) != 0:
        return GpuStatus(False, "the CUDA driver failed to initialise (cuInit)")
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return GpuStatus(False, "the CUDA driver reports no usable device")
    name = ctypes.create_string_buffer(100)
    device = ctypes.c_int(0)
    if driver.cuDeviceGet(ctypes.byref(device), 0) == 0:
        driver.cuDeviceGetName(name, 100, device)
    return GpuStatus(
        True, "CUDA device available", count.value, name.value.decode(errors="replace")
    )


@lru_cache(maxsize=1)
def gpu_libraries_status(python: str = sys.executable) -> tuple[bool, str]:
    """Do cudf and cuml import in a fresh interpreter? (Run only when a device exists.)"""
    code = "import cudf, cuml; print(cudf.__version__, cuml.__version__)"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"checking cudf/cuml failed: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["import failed"])[-1]
        return (
            False,
            f"cudf/cuml do not import ({last[:160]}); install the gpu extra: pip install 'mlpilot[gpu]'",
        )
    return True, f"cudf/cuml {done.stdout.strip()}"


def resolve_engine(
    requested: str, *, device: GpuStatus | None = None, libraries: tuple[bool, str] | None = None
) -> EngineChoice:
    """Turn the requested engine into the one that will run, with the reason."""
    if requested == "cpu":
        return EngineChoice("cpu", "cpu", "requested")
    if requested == "compare":
        return EngineChoice(
            "compare", "compare", "both legs requested; a GPU leg that cannot run is reported"
        )
    device = device or cuda_device_status()
    if requested == "gpu":
        if not device.usable:
            raise ExecutionError(
                f"engine gpu requested, but {device.reason}", hint="use --engine cpu or auto"
            )
        ok, why = libraries or gpu_libraries_status()
        if not ok:
            raise (
                MissingExtraError("cudf-cu12", "gpu", "engine gpu")
                if "install" in why
                else ExecutionError(why)
            )
        return EngineChoice("gpu", "gpu", f"requested; {device.name or 'GPU'} ({why})")
    if requested != "auto":
        raise ExecutionError(f"unknown engine {requested!r}", hint="use auto, cpu, gpu or compare")
    if not device.usable:
        return EngineChoice("auto", "cpu", f"auto: {device.reason}")
    ok, why = libraries or gpu_libraries_status()
    if not ok:
        return EngineChoice("auto", "cpu", f"auto: a GPU is present but {why}")
    return EngineChoice("auto", "gpu", f"auto: {device.name or 'GPU'} and {why}")


def engine_command(
    engine: str, script: str, args: list[str], python: str = sys.executable
) -> list[str]:
    """The exact command line for one leg: cpu runs the script, gpu runs it under cudf.pandas + cuml.accel."""
    if engine == "cpu":
        return [python, script, *args]
    if engine == "gpu":
        return [python, "-m", "cudf.pandas", "-m", "cuml.accel", script, *args]
    raise ExecutionError(f"no command for engine {engine!r}")
