"""Engines (DESIGN §6): which engine runs a pipeline, and why.

``auto`` picks the GPU only when the CUDA driver reports a device *and* the GPU probe —
the GPU engine's own command, run with the pipelines' environment — passes (see
``probe.py``); importing cudf proves nothing about a device. A GPU chosen by ``auto``
may fall back: if its leg dies before its first stage completes, or fails with a device
error at any stage (``ml/device_errors.py``), the executor reruns the pipeline on the CPU
and records why (``EngineChoice.fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import ExecutionError, MissingExtraError
from mlpilot.platform.execution.commands import GPU_MODULES, engine_command
from mlpilot.platform.execution.probe import ProbeVerdict, gpu_probe
from mlpilot.platform.ml.devices import cuda_driver_report

__all__ = [
    "GPU_MODULES",
    "EngineChoice",
    "GpuStatus",
    "cuda_device_status",
    "engine_command",
    "gpu_libraries_status",
    "resolve_engine",
]


@dataclass(frozen=True)
class EngineChoice:
    requested: str
    used: str  # cpu, gpu, or compare
    reason: str
    #: the engine to rerun on when a leg of ``used`` dies before its first stage (auto only)
    fallback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"requested": self.requested, "used": self.used}
        data["reason"] = self.reason
        if self.fallback:
            data["fallback"] = self.fallback
        return data


@dataclass(frozen=True)
class GpuStatus:
    usable: bool
    reason: str
    devices: int = 0
    name: str = ""
    bus_id: str = ""


@lru_cache(maxsize=1)
def cuda_device_status() -> GpuStatus:
    """Ask the CUDA driver itself whether a device can be used (no Python GPU package needed)."""
    report = cuda_driver_report()
    return GpuStatus(report.ok, report.reason, report.devices, report.name, report.bus_id)


def gpu_libraries_status(
    settings: Settings | None = None, *, refresh: bool = False
) -> tuple[bool, str]:
    """Does the GPU engine work here (the probe's cached verdict, or a new probe with
    ``refresh``)? ``(usable, why)``."""
    verdict = gpu_probe(settings, refresh=refresh)
    cached = (
        " (cached verdict; mlpilot doctor --refresh-gpu probes again)" if verdict.cached else ""
    )
    return verdict.usable, f"{verdict.reason}{cached}"


def resolve_engine(
    requested: str,
    *,
    device: GpuStatus | None = None,
    probe: ProbeVerdict | None = None,
    settings: Settings | None = None,
) -> EngineChoice:
    """Turn the requested engine into the one that will run, with the reason."""
    if requested == "cpu":
        return EngineChoice("cpu", "cpu", "requested")
    if requested == "compare":
        return EngineChoice(
            "compare", "compare", "both legs requested; a GPU leg that cannot run is reported"
        )
    if requested not in ("gpu", "auto"):
        raise ExecutionError(f"unknown engine {requested!r}", hint="use auto, cpu, gpu or compare")
    device = device or cuda_device_status()
    if not device.usable:
        if requested == "gpu":
            raise ExecutionError(
                f"engine gpu requested, but {device.reason}", hint="use --engine cpu or auto"
            )
        return EngineChoice("auto", "cpu", f"auto: {device.reason}")
    verdict = probe or gpu_probe(settings)
    cached = " (cached probe)" if verdict.cached else ""
    if requested == "gpu":
        if not verdict.usable:
            if verdict.missing_extra:
                raise MissingExtraError("cudf-cu12", "gpu", "engine gpu")
            raise ExecutionError(
                f"engine gpu requested, but {verdict.reason}",
                hint="mlpilot doctor shows the probe; use --engine cpu or auto",
            )
        return EngineChoice("gpu", "gpu", f"requested; {verdict.reason}{cached}")
    if not verdict.usable:
        return EngineChoice("auto", "cpu", f"auto: a GPU is present but {verdict.reason}{cached}")
    return EngineChoice("auto", "gpu", f"auto: {verdict.reason}{cached}", fallback="cpu")
