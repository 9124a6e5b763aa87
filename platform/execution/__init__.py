"""Running generated pipelines: engines, containment, progress and results."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mlpilot.platform.config import Settings
from mlpilot.platform.execution._launch import FAILED_TO_CONTAIN
from mlpilot.platform.execution.commands import leg_env
from mlpilot.platform.execution.containment import (
    Containment,
    address_space_mb,
    set_up_child,
)
from mlpilot.platform.execution.engines import (
    EngineChoice,
    GpuStatus,
    cuda_device_status,
    engine_command,
    gpu_libraries_status,
    resolve_engine,
)
from mlpilot.platform.execution.gpu import DeviceLock, MemorySampler
from mlpilot.platform.execution.optuna_proxy import StorageProxy, StudyPolicy, start_proxy
from mlpilot.platform.execution.probe import ProbeVerdict, gpu_probe
from mlpilot.platform.execution.relay import Registration, Relay
from mlpilot.platform.execution.sandbox import (
    Cancel,
    ChildResult,
    ContainedChild,
    Limits,
    captured_tail,
    scrubbed_env,
    start_set_up,
)
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.device_errors import is_device_error
from mlpilot.platform.ml.protocol import PipelineEvent, PipelineResult, ProtocolError
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

logger = logging.getLogger(__name__)

__all__ = [
    "ChildResult",
    "EngineChoice",
    "Executor",
    "GpuStatus",
    "LegResult",
    "Limits",
    "ProbeVerdict",
    "StartedLeg",
    "completed_stages",
    "cuda_device_status",
    "engine_command",
    "gpu_libraries_status",
    "gpu_probe",
    "leg_env",
    "resolve_engine",
    "scrubbed_env",
]

EventHandler = Callable[[PipelineEvent], None]
RELAY_EVERY = 5  # wait-loop polls (about 0.2 s each) between reads of the tracking records


@dataclass
class LegResult:
    engine: str
    child: ChildResult
    result: PipelineResult | None
    run_dir: Path
    unreadable: str | None = None  # why result.json could not be read
    containment: Containment | None = None  # what the child ran under
    #: peak device memory above the leg's start, MiB (GPU legs where NVML answers)
    gpu_peak_memory_mb: float | None = None
    #: set when this is the CPU rerun of an auto GPU leg (``fallback_reason`` says when)
    fallback: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.child.ok and self.result is not None and self.result.ok

    def failure(self) -> dict[str, Any]:
        """``{type, message, stage}`` describing why this leg failed."""
        if self.result is not None and self.result.error:
            return dict(self.result.error)
        if self.unreadable:
            return {"type": "ProtocolError", "message": self.unreadable, "stage": "recording"}
        child = self.child
        if child.timed_out:
            limit = self.containment.limits.get("timeout", "time") if self.containment else "time"
            return {
                "type": "Timeout",
                "message": f"the pipeline ran past its {limit} limit (MLPILOT_RUN_TIMEOUT) "
                "and was killed",
                "stage": "running",
            }
        if child.cancelled:
            return {"type": "Cancelled", "message": "the run was cancelled", "stage": "running"}
        if child.disk_exceeded:
            limit = self.containment.limits.get("run folder", "its") if self.containment else "its"
            return {
                "type": "DiskLimit",
                "message": f"the run folder passed its {limit} limit (MLPILOT_MAX_RUN_DISK_MB) "
                "and the pipeline was stopped",
                "stage": "running",
            }
        tail = captured_tail(child.stderr, 1, 300)
        if child.returncode == FAILED_TO_CONTAIN:
            return {"type": "ContainmentError", "message": tail, "stage": "running"}
        how = (
            f"was killed by {child.signal_name}"
            if child.signal_name
            else f"exited with status {child.returncode}"
        )
        detail = f": {tail}" if tail else ""
        return {
            "type": "ChildProcessError",
            "message": f"the pipeline process {how} without a result{detail}",
            "stage": "running",
        }


#: the most one poll reads of events.jsonl (the rest waits for the next poll)
EVENTS_CHUNK_BYTES = 1 << 20


class EventTail:
    """Reads new lines of a run's events.jsonl as the child appends them.

    The file is opened once, without following links and only when it is a regular file,
    and read from that descriptor: a pipeline that swaps the name for a link or a FIFO
    afterwards changes nothing the parent reads. At most ``EVENTS_MAX_BYTES`` are read.
    """

    def __init__(self, folder: RunFolder, handler: EventHandler | None) -> None:
        self.folder = folder
        self.handler = handler
        self.offset = 0
        self._fd: int | None = None
        self._refused = False

    def __call__(self) -> None:
        if self.handler is None or self._refused or not self._open():
            return
        while (data := self._read()) is not None:
            events, skipped = PipelineEvent.parse_lines(data)
            for why in skipped:
                logger.warning("skipped an unreadable pipeline event: %s", why)
            for event in events:
                self.handler(event)

    def _read(self) -> bytes | None:
        """The next complete lines (at most a chunk); None when there are none yet."""
        assert self._fd is not None
        want = min(EVENTS_CHUNK_BYTES, protocol.EVENTS_MAX_BYTES - self.offset)
        if want <= 0:
            self._refuse(f"{protocol.EVENTS_FILE} passed {protocol.EVENTS_MAX_BYTES} bytes")
            return None
        data = os.pread(self._fd, want, self.offset)
        complete = data[: data.rfind(b"\n") + 1]
        if not complete:
            if len(data) == want:  # no line ends within a whole chunk: not an event
                self._refuse(f"{protocol.EVENTS_FILE} holds a line over {want} bytes")
            return None
        self.offset += len(complete)
        return complete

    def _open(self) -> bool:
        if self._fd is not None:
            return True
        try:
            self._fd = self.folder.open_file(protocol.EVENTS_FILE)
        except UnsafeFile as exc:
            self._refuse(exc.message)
        return self._fd is not None

    def _refuse(self, why: str) -> None:
        logger.warning("pipeline events are no longer read: %s", why)
        self._refused = True
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Executor:
    """Runs one pipeline leg in a contained child process."""

    def __init__(
        self, settings: Settings, limits: Limits | None = None, python: str = sys.executable
    ) -> None:
        self.settings = settings
        self.limits = limits or Limits(
            timeout_s=settings.run_timeout_s,
            file_size_mb=settings.max_file_mb,
            run_disk_mb=settings.max_run_disk_mb,
        )
        self.python = python

    def child_env(self, *, run_id: str | None, engine: str) -> dict[str, str]:
        # the pipeline logs through its run folder and never learns its MLflow run (§8)
        env = leg_env(self.settings, engine, {})
        env.pop(protocol.ENV_MLFLOW_RUN_ID, None)
        return env

    def run_leg(
        self,
        *,
        script: Path,
        run_dir: Path,
        engine: str | EngineChoice,
        data_path: str | None,
        mlflow_run_id: str | None,
        on_event: EventHandler | None = None,
        cancel: Cancel | None = None,
        track: bool = True,
        prefer: str | None = None,
    ) -> LegResult:
        leg = self.start_leg(
            script=script,
            run_dir=run_dir,
            engine=engine,
            data_path=data_path,
            mlflow_run_id=mlflow_run_id,
            track=track,
            prefer=prefer,
        )
        return leg.finish(on_event=on_event, cancel=cancel)

    def start_leg(
        self,
        *,
        script: Path,
        run_dir: Path,
        engine: str | EngineChoice,
        data_path: str | None,
        mlflow_run_id: str | None,
        track: bool = True,
        prefer: str | None = None,
        extra_reads: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        registrations: tuple[Registration, ...] = (),
        study_policy: StudyPolicy | None = None,
    ) -> StartedLeg:
        """Start one leg and return at once.

        The pipeline logs through its run folder; the leg relays that to ``mlflow_run_id``
        (``relay.py``). Without it the pipeline starts before its MLflow run exists: it reads
        data while the parent creates the run, and ``hand_over_run`` names the run to relay
        to (records written meanwhile wait in the folder). ``registrations`` are what the
        plan's ``register_model`` steps allow the pipeline to ask for. ``engine`` may be the
        ``EngineChoice``: an ``auto`` GPU choice then reruns on the CPU when its leg dies
        before its first stage or with a device error at any stage. ``track=False``
        logs nothing (compare's warm-up and repeated runs); ``prefer="gpu"`` gives a CPU
        leg the GPU engine's model defaults (a comparison's legs fit the same model).
        """
        choice = engine if isinstance(engine, EngineChoice) else None
        name = choice.used if choice else str(engine)
        run_dir.mkdir(parents=True, exist_ok=True)
        with RunFolder(run_dir) as folder:  # a link planted for the folder itself is refused
            for stale in (protocol.EVENTS_FILE, protocol.RESULT_FILE, protocol.TRACKING_FILE):
                folder.remove(stale)  # a link goes, never what it points to
        command = engine_command(name, str(script), [], python=self.python)
        env = self._env(name, run_dir, data_path, mlflow_run_id, track, prefer)
        env.update(extra_env or {})
        reads = [p for p in (data_path, *extra_reads) if p]
        setup = set_up_child(self.settings, engine=name, run_dir=run_dir, reads=reads)
        env.update(setup.env)
        # the study's storage only through the parent (DESIGN §8): a socketpair end
        proxy = start_proxy(
            self.settings, script, mlflow_run_id if track else None, policy=study_policy
        )
        env.update(proxy.env)
        setup.pass_fds += (proxy.child_fd,)
        limits = self._limits_for(name, contained=setup.contained)
        setup.record.limits = limits.describe()
        try:
            lock, sampler = self._claim_device(name)
        except BaseException:
            if setup.watch is not None:
                setup.watch.end()  # the run's uid is not needed after all
            setup.close_fds()
            proxy.close()
            raise
        try:
            child = start_set_up(setup, command, cwd=run_dir, env=env, limits=limits)
        except BaseException:
            if lock is not None:
                lock.release()
            proxy.close()
            raise
        try:
            _refresh_package_map(self.settings.home)
        except BaseException:
            child.kill()
            proxy.close()
            if lock is not None:
                lock.release()
            raise

        def restart(run_id: str | None) -> StartedLeg:
            # the GPU leg's defaults: the rerun fits the model whose params it may have logged
            return self.start_leg(
                script=script,
                run_dir=run_dir,
                engine=str(choice.fallback if choice else "cpu"),
                data_path=data_path,
                mlflow_run_id=run_id,
                track=track,
                prefer=prefer or name,
                extra_reads=extra_reads,
                extra_env=extra_env,
                registrations=registrations,
                study_policy=study_policy,
            )

        leg = StartedLeg(
            name, run_dir, child, setup.record, lock=lock, sampler=sampler, proxy=proxy
        )
        leg.run_id = mlflow_run_id if track else None
        leg.relay_to = self._relay_factory(run_dir, registrations) if track else None
        if choice is not None and choice.fallback:
            leg.restart = restart
        return leg

    def _relay_factory(
        self, run_dir: Path, registrations: tuple[Registration, ...]
    ) -> Callable[[str], Relay]:
        settings = self.settings

        def make(run_id: str) -> Relay:
            from mlpilot.tracking.mlflow_store import make_client

            return Relay(
                run_dir,
                lambda: make_client(settings),
                run_id,
                registrations=registrations,
                file_limit=int(settings.max_file_mb * 2**20),
            )

        return make

    def _limits_for(self, engine: str, *, contained: bool) -> Limits:
        """The leg's limits: processes for the dedicated account, address space on the CPU."""
        s = self.settings
        return replace(
            self.limits,
            processes=s.max_processes if contained else None,
            address_space_mb=address_space_mb(s.memory_budget_mb) if engine == "cpu" else None,
        )

    def _env(
        self,
        engine: str,
        run_dir: Path,
        data_path: str | None,
        mlflow_run_id: str | None,
        track: bool,
        prefer: str | None,
    ) -> dict[str, str]:
        env = self.child_env(run_id=None, engine=engine)
        env[protocol.ENV_RUN_DIR] = str(run_dir)
        if not track:
            env[protocol.ENV_NO_TRACK] = "1"
        else:
            env[protocol.ENV_RELAY] = "1"
        if data_path:
            env[protocol.ENV_DATA] = data_path
        if prefer:
            env[protocol.ENV_PREFER] = prefer
        return env

    def _claim_device(self, engine: str) -> tuple[DeviceLock | None, MemorySampler | None]:
        """A GPU leg gets its device to itself, and its memory sampled."""
        if engine != "gpu":
            return None, None
        device = cuda_device_status()
        lock = DeviceLock(self.settings.home / "locks", device.bus_id or "0")
        lock.acquire(
            self.limits.timeout_s,
            on_wait=lambda holder: logger.warning(
                "waiting for the GPU %s: another mlpilot GPU leg runs on it (%s)",
                device.bus_id,
                holder,
            ),
        )
        return lock, MemorySampler(device.bus_id)


class CancelFile:
    """A cancel signal that is a file in the run folder: any process may write it (another
    terminal, the dashboard); the wait loop looks for it between its other checks, through
    the folder's handle (an entry of that name counts, a link is never followed)."""

    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder

    def is_set(self) -> bool:
        return self.folder.exists(protocol.CANCEL_FILE)


class StartedLeg:
    """A leg whose child process runs: hand it its MLflow run, then wait for its result."""

    def __init__(
        self,
        engine: str,
        run_dir: Path,
        child: ContainedChild,
        containment: Containment | None = None,
        *,
        lock: DeviceLock | None = None,
        sampler: MemorySampler | None = None,
        proxy: StorageProxy | None = None,
    ) -> None:
        self.engine, self.run_dir, self.child = engine, run_dir, child
        self.containment = containment
        self._lock, self._sampler = lock, sampler
        #: the leg's storage proxy: what the child reached of the study (``proxy.own``)
        self.proxy = proxy
        self.run_id: str | None = None
        #: starts the fallback leg (set for an auto GPU choice)
        self.restart: Callable[[str | None], StartedLeg] | None = None
        #: makes the relay of this leg's tracking records to its MLflow run (tracked legs)
        self.relay_to: Callable[[str], Relay] | None = None
        self.relay: Relay | None = None

    def hand_over_run(self, run_id: str) -> None:
        """The MLflow run this leg's records go to (a pipeline started before it existed;
        the pipeline itself never learns it)."""
        self.run_id = run_id
        if self.proxy is not None:
            self.proxy.allow_run(run_id)

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
        if self.proxy is not None:
            self.proxy.close()  # the child is gone: trials it left RUNNING are failed

    def stop(self) -> None:
        """Stop the child and everything it started; its folder stays."""
        self.child.kill()
        self._release()

    def abandon(self) -> None:
        """The run could not be created: stop the child and remove its folder (no run
        refers to it)."""
        import shutil

        self.child.kill()
        self._release()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def finish(
        self, *, on_event: EventHandler | None = None, cancel: Cancel | None = None
    ) -> LegResult:
        try:
            folder = RunFolder(self.run_dir)
        except UnsafeFile:
            self.stop()
            raise
        tail = EventTail(folder, on_event)
        sampler = self._sampler
        if self.relay is None and self.relay_to is not None and self.run_id:
            self.relay = self.relay_to(self.run_id)
        relay, polls = self.relay, [0]

        def poll() -> None:
            tail()
            polls[0] += 1
            if relay is not None and polls[0] % RELAY_EVERY == 0:
                relay.pump()  # live metrics and trials
            if sampler is not None:
                sampler.sample()

        try:
            child = self.child.wait(poll=poll, cancel=cancel or CancelFile(folder))
            if relay is not None:  # everything the pipeline wrote, before RECORDING
                relay.drain(failed=child.cancelled)
            leg = self._result(child, folder)
        finally:
            tail.close()
            folder.close()
            self._release()
        why = fallback_reason(leg) if self.restart is not None else None
        if why is not None:
            return self._fall_back(leg, why, on_event, cancel)
        return leg

    def _result(self, child: ChildResult, folder: RunFolder) -> LegResult:
        peak = self._sampler.peak_mb if self._sampler is not None else None
        try:
            result = PipelineResult.read(folder)
        except ProtocolError as exc:
            logger.warning("unreadable pipeline result in %s: %s", self.run_dir, exc)
            return LegResult(
                self.engine,
                child,
                None,
                self.run_dir,
                unreadable=exc.one_line(),
                containment=self.containment,
                gpu_peak_memory_mb=peak,
            )
        if result is not None and self.relay is not None:
            # what the parent logged, never what the pipeline claims (its digests, its URI)
            out = self.relay.out
            result.model_uri, result.model_digests = out.model_uri, out.model_digests
            result.registered = out.registered
            result.notes.extend(out.notes)
        return LegResult(
            self.engine,
            child,
            result,
            self.run_dir,
            containment=self.containment,
            gpu_peak_memory_mb=peak,
        )

    def _fall_back(
        self, failed: LegResult, why: str, on_event: EventHandler | None, cancel: Cancel | None
    ) -> LegResult:
        """Keep the failed GPU leg's files aside and run the whole pipeline again on the CPU."""
        from mlpilot.platform.errors import describe_error

        failure = failed.failure()
        error = describe_error(failure)
        names = (protocol.STDOUT_FILE, protocol.STDERR_FILE, protocol.EVENTS_FILE)
        with RunFolder(self.run_dir) as folder:  # renames entries, links included, never follows
            for name in (*names, protocol.TRACKING_FILE):
                folder.rename(name, f"{self.engine}-{name}")
        logger.warning("the %s leg %s (%s): rerun", self.engine, why, error)
        restart = self.restart
        if restart is None:
            return failed
        rerun = restart(self.run_id)
        if self.relay is not None:  # the same run: what was logged stays, the new file is read
            self.relay.rerun()
            rerun.relay = self.relay
        leg = rerun.finish(on_event=on_event, cancel=cancel)
        leg.fallback = {
            "from": self.engine,
            "to": leg.engine,
            "stage": str(failure.get("stage") or "running"),
            "error": error[:300],
            "why": why,
            "reason": f"auto: the {self.engine} leg {why}; rerun on the {leg.engine}",
        }
        return leg


def completed_stages(run_dir: Path) -> list[str]:
    """The stages a leg finished without an error, from its events (read without following
    links, at most ``EVENTS_MAX_BYTES``: events that cannot be read count as none)."""
    try:
        with RunFolder(run_dir) as folder:
            data = folder.read_bytes(protocol.EVENTS_FILE, protocol.EVENTS_MAX_BYTES)
    except UnsafeFile as exc:
        logger.warning("the events of %s are not read: %s", run_dir, exc.message)
        return []
    events, _ = PipelineEvent.parse_lines(data or b"")
    return [e.stage for e in events if e.type == "stage_end" and not e.failed and e.stage]


#: the end of a crashed child's stderr searched for a device error (an abort's reason is
#: a few lines above its last)
CRASH_TAIL_BYTES = 4096


def fallback_reason(leg: LegResult) -> str | None:
    """Why a failed ``auto`` GPU leg reruns on the CPU, or ``None``.

    It reruns when it died before completing any stage (the accelerators did not start),
    or when it failed with a device error at any stage: cudf.pandas answers a device error
    in ``load`` or ``clean`` by running pandas, so the first hard one tends to come from the
    model. A cancelled leg, or one stopped at its time or disk limit, is not rerun.
    """
    child = leg.child
    if leg.ok or child.cancelled or child.timed_out or child.disk_exceeded:
        return None
    failure = leg.failure()
    text = str(failure.get("message") or "")
    if leg.result is None:  # a crash: what the parent captured, never a run-folder file
        text = f"{text} {child.stderr[-CRASH_TAIL_BYTES:].decode('utf-8', errors='replace')}"
    if is_device_error(str(failure.get("type") or ""), text):
        return f"hit a device error in {failure.get('stage') or 'running'}"
    if not completed_stages(leg.run_dir):
        return "died before its first stage"
    return None


def _refresh_package_map(home: Path) -> None:
    """Cache the module → distribution map for the pipelines' model logging, once per
    environment, on a thread while the child runs (see ``mlpilot.tracking.packages``)."""
    from mlpilot.tracking.packages import distributions_function, load, refresh

    if load(home) is not None:
        return
    distributions = distributions_function()  # imported here, not on the thread

    def build() -> None:
        try:
            refresh(home, distributions)
        except Exception as exc:  # a cache, never a reason to fail a run
            logger.debug("package map not cached: %s", exc)

    threading.Thread(target=build, name="package-map", daemon=True).start()
