"""Engine comparison: the same script and seed on the CPU and on the GPU, per-stage speedups.

The CPU leg logs into the parent run; the GPU leg logs into a nested run. A GPU leg that
cannot run is recorded as unavailable with the reason — its timings are never estimated.
"""

from __future__ import annotations

import platform as stdlib_platform
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpilot.platform.execution import Executor, LegResult, cuda_device_status, gpu_libraries_status
from mlpilot.tracking import vocab


def hardware_description() -> dict[str, Any]:
    import os

    gpu = cuda_device_status()
    return {
        "cpu": stdlib_platform.processor() or stdlib_platform.machine(),
        "cpu_count": os.cpu_count(),
        "system": stdlib_platform.platform(),
        "gpu": gpu.name if gpu.usable else None,
        "gpu_count": gpu.devices,
    }


def gpu_leg_status() -> tuple[bool, str]:
    device = cuda_device_status()
    if not device.usable:
        return False, device.reason
    return gpu_libraries_status()


def speedups(cpu: dict[str, float], gpu: dict[str, float]) -> dict[str, float]:
    return {
        stage: round(cpu[stage] / gpu[stage], 4) for stage in cpu if stage in gpu and gpu[stage] > 0
    }


def run_comparison(
    executor: Executor,
    *,
    script: Path,
    run_dir: Path,
    data_path: str | None,
    logger: Any,
    store: Any,
    on_event: Any,
    outcome: Any,
    profile: Any,
) -> LegResult:
    cpu = executor.run_leg(
        script=script,
        run_dir=run_dir,
        engine="cpu",
        data_path=data_path,
        mlflow_run_id=logger.run_id,
        on_event=on_event,
    )
    cpu_timings = cpu.result.timings if cpu.result else {}
    available, reason = gpu_leg_status()
    gpu_doc: dict[str, Any] = {"available": available, "reason": reason}
    stages: dict[str, dict[str, Any]] = {
        stage: {"cpu_s": seconds, "gpu_s": None, "speedup": None}
        for stage, seconds in cpu_timings.items()
    }
    if available and cpu.ok:
        leg = GpuLeg(executor, script, run_dir, data_path, on_event)
        leg.run(logger, cpu_timings, stages, gpu_doc, outcome)
    elif not cpu.ok:
        gpu_doc.update(available=False, reason="not run: the CPU leg failed")
    logger.set_tags(
        {
            vocab.TAG_COMPARE_GPU: "ran"
            if gpu_doc["available"]
            else f"unavailable: {gpu_doc['reason']}"[:500]
        }
    )
    benchmark = {
        "run_id": logger.run_id,
        "experiment": outcome.experiment,
        "dataset": {
            "path": data_path,
            "rows": getattr(profile, "rows", None),
            "cols": len(getattr(profile, "columns", []) or []),
        },
        "stages": stages,
        "gpu": gpu_doc,
        "hardware": hardware_description(),
    }
    store.save_benchmark(uuid.uuid4().hex, benchmark)
    logger.log_dict(benchmark, "benchmark.json")
    outcome.notes.append(
        "GPU leg: " + ("ran" if gpu_doc["available"] else f"unavailable ({gpu_doc['reason']})")
    )
    return cpu


@dataclass
class GpuLeg:
    """The GPU leg of a comparison, logging into a nested run of the parent."""

    executor: Executor
    script: Path
    run_dir: Path
    data_path: str | None
    on_event: Any

    def run(
        self,
        logger: Any,
        cpu_timings: dict[str, float],
        stages: dict[str, dict[str, Any]],
        gpu_doc: dict[str, Any],
        outcome: Any,
    ) -> None:
        """Run it; its timings and speedups go into ``stages``, a failure into ``gpu_doc``."""
        child = logger.child(
            "engine-gpu", tags={vocab.TAG_KIND: vocab.KIND_ENGINE_LEG, vocab.TAG_ENGINE: "gpu"}
        )
        gpu = self.executor.run_leg(
            script=self.script,
            run_dir=self.run_dir / "gpu",
            engine="gpu",
            data_path=self.data_path,
            mlflow_run_id=child.run_id,
            on_event=self.on_event,
        )
        child.end((vocab.RunState.SUCCEEDED if gpu.ok else vocab.RunState.FAILED).mlflow_status)
        gpu_timings = gpu.result.timings if gpu.result else {}
        if not gpu.ok:
            gpu_doc.update(
                available=False, reason=f"the GPU leg failed: {gpu.failure()['message']}"
            )
            return
        ratios = speedups(cpu_timings, gpu_timings)
        for stage, ratio in ratios.items():
            stages[stage].update(gpu_s=gpu_timings[stage], speedup=ratio)
        logger.log_metrics({f"speedup_{k}": v for k, v in ratios.items()})
        outcome.metrics.update({f"speedup_{k}": v for k, v in ratios.items()})
        logger.log_metrics({f"gpu_time_{k}_s": v for k, v in gpu_timings.items()})
