"""Engine comparison: the same script and seed on the CPU and on the GPU, fairly timed.

What makes a ratio honest here:

- **Warm-up, then the best of N.** When the GPU leg can run, each leg runs once untracked
  (page cache, CUDA kernel caches, lazy imports) and then N times (``MLPILOT_COMPARE_REPEAT``
  / ``mlpilot run --repeat``), the legs alternating which goes first; each stage's time is
  the best of the N runs. The first measured round is the tracked one: the CPU leg logs into
  the parent run, the GPU leg into a nested run.
- **Whole-process wall time** (interpreter, imports, CUDA context, memory pool) is reported
  beside the stage table, and so is the start-up before the first stage.
- **The same clean-up** after every stage in both legs (``context.release_stage_memory``).
- **The same model.** A speedup is refused when the legs' test metrics differ by more than
  ``MLPILOT_COMPARE_TOLERANCE``: the legs would not have fitted the same thing.
- **Only where the GPU really ran.** A stage's speedup exists only when the GPU leg
  measured it on the GPU (``ml/devices.py``); other stages say why they have none. The
  end-to-end rows (``total``, ``wall``) compare the two engines and need at least one stage
  that really ran on the GPU.

A GPU leg that cannot run is recorded as unavailable with the reason, its timings are
never estimated, and then the CPU leg runs once (there is nothing to compare it with).
"""

from __future__ import annotations

import logging
import os
import platform as stdlib_platform
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpilot.platform.execution import (
    Executor,
    LegResult,
    cuda_device_status,
    gpu_probe,
)
from mlpilot.platform.ml.devices import cpu_leaves, cuda_driver_report, describe_device
from mlpilot.platform.ml.protocol import DEVICE_GPU
from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)

#: rows that compare the whole engines rather than one stage
ENGINE_ROWS = ("total", "wall")


def hardware_description() -> dict[str, Any]:
    """The machine a comparison ran on, as far as it can be read without a GPU package."""
    gpu = cuda_driver_report()
    memory_gb = None
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError) as exc:
        logger.debug("physical memory unknown: %s", exc)
    return {
        "cpu": _cpu_model() or stdlib_platform.processor() or stdlib_platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_gb": memory_gb,
        "system": stdlib_platform.platform(),
        "gpu": gpu.name if gpu.ok else None,
        "gpu_count": gpu.devices,
        "gpu_capability": ".".join(map(str, gpu.capability)) if gpu.ok else None,
        "cuda_driver": gpu.driver_version or None,
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError as exc:
        logger.debug("no /proc/cpuinfo: %s", exc)
    return None


def gpu_leg_status(settings: Any = None) -> tuple[bool, str]:
    """Can the GPU leg run: a device the driver reports, and a GPU probe that passes."""
    device = cuda_device_status()
    if not device.usable:
        return False, device.reason
    verdict = gpu_probe(settings)
    return verdict.usable, verdict.reason


# -- the statistics (pure: tested on the CPU with recorded results) ----------------------------------
def best_timings(timings: list[dict[str, float]]) -> dict[str, float]:
    """Each stage's best (smallest) time over the runs that have it."""
    best: dict[str, float] = {}
    for run in timings:
        for stage, seconds in run.items():
            if seconds is not None and (stage not in best or seconds < best[stage]):
                best[stage] = float(seconds)
    return best


def metrics_agree(
    cpu: dict[str, float], gpu: dict[str, float], tolerance: float
) -> tuple[bool, str]:
    """Do the legs' test metrics agree within ``tolerance``? (relative; absolute for
    scores within [-1, 1], where a relative rule would be meaningless near zero)"""
    shared = sorted(k for k in cpu if k.startswith("test_") and k in gpu)
    if not shared:
        return False, "the legs share no test metric to check that they fitted the same model"
    worst, detail = 0.0, ""
    for name in shared:
        a, b = float(cpu[name]), float(gpu[name])
        scale = max(abs(a), abs(b), 1.0)
        gap = abs(a - b) / scale
        if gap > worst:
            worst, detail = gap, f"{name}: CPU {a:.6g}, GPU {b:.6g}"
    if worst > tolerance:
        return False, f"the legs' test metrics differ by {worst:.1%} > {tolerance:.1%} ({detail})"
    return True, f"test metrics agree within {tolerance:.1%}"


#: a stage row's kind: a GPU speedup, a ratio of a stage that spent most of its time on
#: the CPU, or the engines end to end
KIND_GPU, KIND_MOSTLY_CPU, KIND_ENGINES = "gpu", "mostly_cpu", "engines"


def speedup_rows(
    cpu: LegSummary,
    gpu: LegSummary | None,
    gpu_reason: str,
    agree: tuple[bool, str],
    share_min: float = 0.5,
) -> dict[str, dict[str, Any]]:
    """Per stage: CPU and GPU seconds, the devices, the GPU leg's GPU share, and the ratio.

    A stage's ratio is reported when both legs ran it and their metrics agree: a GPU
    speedup when at least ``share_min`` of its GPU-leg time was on the GPU, else as
    "mostly CPU" (``speedup`` stays None). ``total`` and ``wall`` compare the engines and
    are reported whenever both legs succeeded (with the metrics' disagreement noted).
    """
    rows: dict[str, dict[str, Any]] = {}
    for stage, cpu_s in cpu.timings.items():
        gpu_s = gpu.timings.get(stage) if gpu is not None else None
        record = (gpu.devices.get(stage) if gpu is not None else None) or {}
        engines = stage in ENGINE_ROWS
        row: dict[str, Any] = {
            "cpu_s": cpu_s,
            "gpu_s": gpu_s,
            "ratio": round(cpu_s / gpu_s, 4) if gpu_s else None,
            "speedup": None,
            "kind": None,
            "gpu_share": _engine_share(gpu) if engines else record.get("gpu_share"),
            "cpu_device": "cpu" if engines else describe_device(cpu.devices.get(stage)),
            "gpu_device": _gpu_device(gpu, stage),
            "cpu_leaves": None if engines else cpu_leaves(record) or None,
            "refused": None,
            "note": None,
        }
        row["refused"] = _refusal(stage, row, gpu, gpu_reason, agree)
        if row["refused"] is None:
            _classify(stage, row, record, agree, share_min)
        rows[stage] = row
    return rows


def _classify(
    stage: str,
    row: dict[str, Any],
    record: dict[str, Any],
    agree: tuple[bool, str],
    share_min: float,
) -> None:
    share = row["gpu_share"]
    if stage in ENGINE_ROWS:
        row["kind"], row["speedup"] = KIND_ENGINES, row["ratio"]
        row["note"] = None if agree[0] else agree[1]
    elif share is None:  # untimed (no cuml.accel profile): the device decides, as before 26
        if record.get("device") == DEVICE_GPU:
            row["kind"], row["speedup"] = KIND_GPU, row["ratio"]
        else:
            row["refused"] = f"ran {describe_device(record)} in the GPU leg, not on the GPU"
    elif share >= share_min:
        row["kind"], row["speedup"] = KIND_GPU, row["ratio"]
    else:
        row["kind"] = KIND_MOSTLY_CPU
        row["note"] = f"mostly CPU: {share:.0%} of its time on the GPU (under {share_min:.0%})"


def _engine_share(gpu: LegSummary | None) -> float | None:
    """The GPU leg's GPU seconds over its stages' seconds (None: untimed)."""
    if gpu is None:
        return None
    records = [(s, r) for s, r in gpu.devices.items() if r and r.get("gpu_s") is not None]
    seconds = sum(gpu.tracked_timings.get(s, 0.0) for s, _ in records)
    if not records or not seconds:
        return None
    return round(min(sum(r["gpu_s"] for _, r in records) / seconds, 1.0), 4)


def describe_row(stage: str, row: dict[str, Any]) -> str:
    """``train 6.1×, 96 % of its time on the GPU; SimpleImputer on the CPU 0.2 s``."""
    if row.get("refused"):
        return f"{stage}: no ratio ({row['refused']})"
    text = f"{stage} {row['ratio']:.1f}×" if row.get("ratio") else f"{stage}: —"
    if row.get("kind") == KIND_MOSTLY_CPU:
        text += " (mostly CPU, not a GPU speedup)"
    if row.get("gpu_share") is not None:
        text += f", {row['gpu_share']:.0%} of its time on the GPU"
    if row.get("cpu_leaves"):
        text += f"; {row['cpu_leaves']}"
    if row.get("note") and row.get("kind") == KIND_ENGINES:
        text += f" ({row['note']})"
    return text


def _gpu_device(gpu: LegSummary | None, stage: str) -> str | None:
    if gpu is None:
        return None
    if stage in ENGINE_ROWS:
        devices = [r.get("device") for r in gpu.devices.values() if r]
        on_gpu = sum(d == DEVICE_GPU for d in devices)
        return (
            "gpu"
            if devices and on_gpu == len(devices)
            else f"mixed ({on_gpu} of {len(devices)} stages on the GPU)"
        )
    return describe_device(gpu.devices.get(stage))


def _refusal(
    stage: str,
    row: dict[str, Any],
    gpu: LegSummary | None,
    gpu_reason: str,
    agree: tuple[bool, str],
) -> str | None:
    """Why a stage has no ratio at all (None: it has one)."""
    if gpu is None:
        return f"GPU leg unavailable: {gpu_reason}"
    if not row["gpu_s"]:
        return "the GPU leg did not time this stage"
    if not agree[0] and stage not in ENGINE_ROWS:
        return agree[1]
    return None


@dataclass
class LegSummary:
    """A leg's measured runs reduced to what the table shows."""

    engine: str
    tracked: LegResult
    runs: list[LegResult] = field(default_factory=list)

    @property
    def timings(self) -> dict[str, float]:
        best = best_timings([r.result.timings for r in self.runs if r.result is not None])
        best["wall"] = round(min(r.child.duration_s for r in self.runs), 4)
        return best

    @property
    def devices(self) -> dict[str, dict[str, Any]]:
        return dict(self.tracked.result.devices) if self.tracked.result else {}

    @property
    def tracked_timings(self) -> dict[str, float]:
        """The tracked run's own stage times (its devices' shares are of these)."""
        return dict(self.tracked.result.timings) if self.tracked.result else {}

    @property
    def metrics(self) -> dict[str, float]:
        return dict(self.tracked.result.metrics) if self.tracked.result else {}

    @property
    def startup_s(self) -> float | None:
        values = [r.result.startup_s for r in self.runs if r.result and r.result.startup_s]
        return min(values) if values else None

    @property
    def gpu_peak_memory_mb(self) -> float | None:
        values = [r.gpu_peak_memory_mb for r in self.runs if r.gpu_peak_memory_mb is not None]
        return max(values) if values else None


# -- running the legs --------------------------------------------------------------------------------
@dataclass
class Measured:
    cpu: LegSummary | None
    gpu: LegSummary | None
    gpu_reason: str
    cpu_leg: LegResult  # the tracked CPU leg: the run's own result


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
    """Both legs, fairly timed (see the module's docstring); returns the tracked CPU leg."""
    available, reason = gpu_leg_status(executor.settings)
    if available:
        measured = _measure(executor, script, run_dir, data_path, logger, on_event)
    else:
        cpu = executor.run_leg(
            script=script,
            run_dir=run_dir,
            engine="cpu",
            data_path=data_path,
            mlflow_run_id=logger.run_id,
            on_event=on_event,
        )
        summary = LegSummary("cpu", cpu, [cpu]) if cpu.ok else None
        measured = Measured(summary, None, reason, cpu)
    _record(executor, measured, run_dir, data_path, logger, store, outcome, profile)
    return measured.cpu_leg


def _note(on_event: Any, message: str) -> None:
    if on_event is None:
        return
    from datetime import datetime, timezone

    from mlpilot.platform.ml.protocol import PipelineEvent

    at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    on_event(PipelineEvent(type="note", at=at, message=message))


def _measure(
    executor: Executor,
    script: Path,
    run_dir: Path,
    data_path: str | None,
    logger: Any,
    on_event: Any,
) -> Measured:
    repeat = executor.settings.compare_repeat
    extra = run_dir / "compare"

    def leg(engine: str, folder: Path, run_id: str | None = None, events: Any = None) -> LegResult:
        return executor.run_leg(
            script=script,
            run_dir=folder,
            engine=engine,
            data_path=data_path,
            mlflow_run_id=run_id,
            on_event=events,
            track=run_id is not None,
            prefer="gpu",  # both legs fit the model the GPU engine would
        )

    _note(on_event, f"compare: one warm-up run per engine, then the best of {repeat}")
    leg("cpu", extra / "warmup-cpu")
    warm = leg("gpu", extra / "warmup-gpu")
    gpu_failed = (
        None if warm.ok else f"the GPU leg failed in its warm-up: {warm.failure()['message']}"
    )
    cpu_runs: list[LegResult] = []
    gpu_runs: list[LegResult] = []
    for i in range(repeat):
        for engine in ("cpu", "gpu") if i % 2 == 0 else ("gpu", "cpu"):
            if engine == "gpu" and gpu_failed:
                continue
            if engine == "cpu":
                done = (
                    leg("cpu", run_dir, logger.run_id, on_event)
                    if i == 0
                    else leg("cpu", extra / f"run{i}-cpu")
                )
                cpu_runs.append(done)
                if not done.ok:
                    return Measured(None, None, "not run: the CPU leg failed", done)
                continue
            done = _gpu_run(leg, logger, run_dir, extra, i, on_event)
            if done.ok:
                gpu_runs.append(done)
            else:
                gpu_failed = f"the GPU leg failed: {done.failure()['message']}"
        _note(on_event, f"compare: round {i + 1} of {repeat} done")
    cpu = LegSummary("cpu", cpu_runs[0], cpu_runs)
    gpu = LegSummary("gpu", gpu_runs[0], gpu_runs) if gpu_runs and not gpu_failed else None
    return Measured(cpu, gpu, gpu_failed or "ran", cpu_runs[0])


def _gpu_run(leg: Any, logger: Any, run_dir: Path, extra: Path, i: int, on_event: Any) -> LegResult:
    """A GPU run; the first measured one logs into a nested MLflow run with its devices."""
    if i > 0:
        return leg("gpu", extra / f"run{i}-gpu")
    child = logger.child(
        "engine-gpu", tags={vocab.TAG_KIND: vocab.KIND_ENGINE_LEG, vocab.TAG_ENGINE: "gpu"}
    )
    done = leg("gpu", run_dir / "gpu", child.run_id, on_event)
    if done.result is not None and done.result.devices:
        from mlpilot.platform.agent.recording import device_tags

        child.set_tags(device_tags(done.result.devices))
    child.end((vocab.RunState.SUCCEEDED if done.ok else vocab.RunState.FAILED).mlflow_status)
    return done


def _record(
    executor: Executor,
    measured: Measured,
    run_dir: Path,
    data_path: str | None,
    logger: Any,
    store: Any,
    outcome: Any,
    profile: Any,
) -> None:
    """Speedups (only the honest ones), the reasons for the rest, the benchmark document."""
    settings = executor.settings
    cpu, gpu = measured.cpu, measured.gpu
    agree = (
        metrics_agree(cpu.metrics, gpu.metrics, settings.compare_tolerance)
        if cpu is not None and gpu is not None
        else (False, "")
    )
    rows = (
        speedup_rows(cpu, gpu, measured.gpu_reason, agree, settings.gpu_share_min)
        if cpu is not None
        else {}
    )
    speedups = {f"speedup_{s}": r["speedup"] for s, r in rows.items() if r["speedup"] is not None}
    if speedups:
        logger.log_metrics(speedups)
        outcome.metrics.update(speedups)
    if gpu is not None:
        logger.log_metrics({f"gpu_time_{k}_s": v for k, v in gpu.timings.items()})
    ran = gpu is not None
    tags = {vocab.TAG_COMPARE_GPU: "ran" if ran else f"unavailable: {measured.gpu_reason}"[:500]}
    tags.update(
        {
            vocab.speedup_tag(s): (f"refused: {r['refused']}" if r["refused"] else r["note"])[:500]
            for s, r in rows.items()
            if r["refused"] or r["kind"] == KIND_MOSTLY_CPU
        }
    )
    logger.set_tags(tags)
    benchmark = _benchmark(settings, measured, rows, agree, data_path, logger, outcome, profile)
    store.save_benchmark(uuid.uuid4().hex, benchmark)
    logger.log_dict(benchmark, "benchmark.json")
    refused = sum(1 for r in rows.values() if r["refused"])
    mostly_cpu = sum(1 for r in rows.values() if r["kind"] == KIND_MOSTLY_CPU)
    outcome.notes.append(
        ("GPU leg: ran" if ran else f"GPU leg: unavailable ({measured.gpu_reason})")
        + f"; {len(speedups)} speedup(s) reported, {mostly_cpu} mostly on the CPU, "
        + f"{refused} refused (reasons in benchmark.json)"
    )
    for stage, row in rows.items():
        if row["ratio"] is not None and row["refused"] is None and stage not in ENGINE_ROWS:
            outcome.notes.append(f"speedup: {describe_row(stage, row)}")


def _benchmark(
    settings: Any,
    measured: Measured,
    rows: dict[str, dict[str, Any]],
    agree: tuple[bool, str],
    data_path: str | None,
    logger: Any,
    outcome: Any,
    profile: Any,
) -> dict[str, Any]:
    """The ``benchmarks`` document (DESIGN §5)."""
    cpu, gpu = measured.cpu, measured.gpu
    return {
        "run_id": logger.run_id,
        "experiment": outcome.experiment,
        "dataset": {
            "path": data_path,
            "rows": getattr(profile, "rows", None),
            "cols": len(getattr(profile, "columns", []) or []),
        },
        "stages": rows,
        "method": {
            "repeat": len(cpu.runs) if cpu is not None else 0,
            "warmup": gpu is not None or measured.gpu_reason.startswith("the GPU leg failed"),
            "statistic": "best stage time over the measured runs; wall = whole process",
            "tolerance": settings.compare_tolerance,
        },
        "startup_s": {
            "cpu": cpu.startup_s if cpu is not None else None,
            "gpu": gpu.startup_s if gpu is not None else None,
        },
        "metrics": {
            "cpu": {k: v for k, v in (cpu.metrics if cpu else {}).items() if k.startswith("test_")},
            "gpu": {k: v for k, v in (gpu.metrics if gpu else {}).items() if k.startswith("test_")},
            "agree": agree[0] if gpu is not None else None,
            "detail": agree[1] or None,
        },
        "gpu": {
            "available": gpu is not None,
            "reason": measured.gpu_reason,
            "peak_memory_mb": gpu.gpu_peak_memory_mb if gpu is not None else None,
        },
        "hardware": hardware_description(),
    }
