"""Where each stage really ran: measured in the pipeline process, never a label.

Under the GPU engine (``python -m cudf.pandas -m cuml.accel pipeline.py``) nothing
guarantees that a stage ran on the GPU: ``cuml.accel`` falls back to scikit-learn per call
(and only says so at its INFO level), estimators it does not proxy (HistGradientBoosting,
LightGBM, the encoders and imputers) always run on the CPU, XGBoost quietly trains on the
CPU when its build cannot see the device, and ``cudf.pandas`` falls back to pandas call by
call. Evidence per stage therefore comes from four measurements:

- ``cuml.accel``'s own log lines (``[cuml.accel] `Ridge.fit` ran on GPU``, ``… falling
  back to CPU: reason``), read from the process's stdout as they are printed;
- the models a stage used: every leaf estimator that is not a ``cuml.accel`` proxy ran
  on the CPU;
- XGBoost's booster configuration after fit (``learner.generic_param.device``);
- ``cudf.pandas``' fast/slow call hooks (GPU calls versus pandas fallbacks).

A stage is ``gpu`` when it has GPU evidence and none of the CPU, ``mixed`` when it has
both, and ``cpu`` otherwise: without evidence nothing is claimed for the GPU.
"""

from __future__ import annotations

import ctypes
import io
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mlpilot.platform.ml.protocol import DEVICE_CPU, DEVICE_GPU, DEVICE_MIXED

logger = logging.getLogger(__name__)

ACCEL_PREFIX = "[cuml.accel] "
# the formats of cuml.accel's estimator proxy, unchanged from 25.08 to 26.10
_RAN = re.compile(r"^`(?P<call>[\w.]+)` ran on (?P<device>GPU|CPU)\s*$")
_FALLING_BACK = re.compile(r"^`(?P<call>[\w.]+)` falling back to CPU: (?P<reason>.*?)\s*$")
_PARAMS_FALLBACK = re.compile(
    r"^`(?P<name>\w+)` parameters failed to sync to GPU, falling back to CPU: (?P<reason>.*?)\s*$"
)
PANDAS_GPU = "pandas (cudf.pandas)"
PANDAS_CPU = "pandas"
NOT_PROXIED = "not accelerated by cuml.accel"


@dataclass(frozen=True)
class AccelCall:
    """One estimator call as cuml.accel reported it."""

    call: str  # "Ridge.fit"
    device: str  # gpu | cpu
    reason: str | None = None


class AccelLogParser:
    """Turns ``[cuml.accel]`` lines into calls; a fallback's reason joins its CPU call."""

    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}

    def feed(self, line: str) -> AccelCall | None:
        text = line.strip()
        if not text.startswith(ACCEL_PREFIX.strip()):
            return None
        text = text[len(ACCEL_PREFIX.strip()) :].strip()
        if match := _FALLING_BACK.match(text):
            self._reasons[match["call"]] = match["reason"]
            return None
        if match := _PARAMS_FALLBACK.match(text):
            self._reasons[f"{match['name']}.*"] = match["reason"]
            return None
        if match := _RAN.match(text):
            call, device = match["call"], match["device"].lower()
            reason = None
            if device == DEVICE_CPU:
                owner = call.split(".", 1)[0]
                reason = self._reasons.pop(call, None) or self._reasons.get(f"{owner}.*")
            return AccelCall(call, device, reason or ("" if device == DEVICE_CPU else None))
        return None


def parse_accel_log(text: str) -> list[AccelCall]:
    """Every estimator call in a recorded log (stdout of a GPU leg)."""
    parser = AccelLogParser()
    return [call for line in text.splitlines() if (call := parser.feed(line)) is not None]


@dataclass
class StageEvidence:
    """What one stage ran where."""

    gpu: set[str] = field(default_factory=set)
    cpu: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)

    def add(self, call: str, device: str, reason: str | None = None) -> None:
        (self.gpu if device == DEVICE_GPU else self.cpu).add(call)
        if device != DEVICE_GPU and reason and call not in self.reasons:
            self.reasons[call] = reason

    @property
    def device(self) -> str:
        if self.gpu and self.cpu:
            return DEVICE_MIXED
        return DEVICE_GPU if self.gpu else DEVICE_CPU

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "gpu": sorted(self.gpu),
            "cpu": sorted(self.cpu),
            "reasons": dict(sorted(self.reasons.items())),
        }


def describe_device(record: dict[str, Any] | None) -> str:
    """``gpu``, ``cpu``, or ``mixed (A, B on the CPU)`` for a stage's device record."""
    if not record:
        return "unmeasured"
    device = str(record.get("device") or "unmeasured")
    if device == DEVICE_MIXED and record.get("cpu"):
        return f"mixed ({', '.join(record['cpu'])} on the CPU)"
    return device


# -- models: which leaf estimators a stage used ---------------------------------------------------
def model_leaves(model: Any) -> Iterator[Any]:
    """The estimators inside ``model`` that do the work (no Pipeline/ColumnTransformer shells).

    Walks constructor parameters and fitted attributes (``estimator_``, ``transformers_``),
    so wrappers that clone at fit (a label encoder around XGBoost) yield the fitted clone.
    """
    seen: set[int] = set()

    def walk(obj: Any) -> Iterator[Any]:
        if id(obj) in seen or isinstance(obj, (str, bytes)) or obj is None:
            return
        seen.add(id(obj))
        children = list(_children(obj))
        if not children and hasattr(obj, "fit"):
            yield obj
        for child in children:
            yield from walk(child)

    yield from walk(model)


def _children(obj: Any) -> list[Any]:
    """A meta-estimator's parts (fitted clones when it has them); nothing for a leaf.

    Only constructor parameters make a container: a forest's fitted ``estimators_`` are
    its own trees, not parts that run elsewhere.
    """

    def estimators_in(value: Any) -> Iterator[Any]:
        if isinstance(value, (list, tuple)):
            for item in value:
                yield from estimators_in(item)
        elif hasattr(value, "fit") and not isinstance(value, type):
            yield value

    params = obj.get_params(deep=False) if hasattr(obj, "get_params") else {}
    parts = [child for value in params.values() for child in estimators_in(value)]
    if not parts:
        return []
    fitted = [
        child
        for name, value in vars(obj).items()
        if name.endswith("_") and not name.startswith("_")
        for child in estimators_in(value)
    ]
    return fitted or parts


def booster_device(estimator: Any) -> str | None:
    """``gpu``/``cpu`` as a fitted model of a family with its own GPU build (XGBoost's
    booster, CatBoost's parameters) reports where it trained; None when not fitted or not
    such a model (``Family.fitted_device``)."""
    family = _native_family(estimator)
    return family.fitted_device(estimator) if family is not None else None


def _native_family(estimator: Any) -> Any:
    """The family with its own GPU build whose estimator ``estimator`` is, if any."""
    from mlpilot.platform.ml import families

    return families.registry().owner_of(estimator)


def _is_proxy(estimator: Any) -> bool:
    try:
        from cuml.accel import is_proxy
    except Exception as exc:  # no cuml.accel in this process: nothing is proxied
        logger.debug("cuml.accel not importable: %s", exc)
        return False
    return bool(is_proxy(estimator))


# -- cudf.pandas: GPU calls versus pandas fallbacks -------------------------------------------------
class PandasCounter:
    """Counts cudf.pandas' fast (GPU) and slow (pandas) calls through its profiling hooks.

    ``_fast_function_call``/``_slow_function_call`` are the placeholders cudf.pandas calls
    on each path (present from 25.08 on); without them nothing is counted, and a stage
    gets no pandas evidence rather than a guess.
    """

    def __init__(self) -> None:
        self.fast = 0
        self.slow = 0
        self.installed = False

    def install(self) -> bool:
        try:
            from cudf.pandas import fast_slow_proxy as proxy
        except Exception as exc:  # not under cudf.pandas
            logger.debug("cudf.pandas not importable: %s", exc)
            return False
        if not hasattr(proxy, "_fast_function_call") or not hasattr(proxy, "_slow_function_call"):
            return False
        fast, slow = proxy._fast_function_call, proxy._slow_function_call

        def on_fast() -> Any:
            self.fast += 1
            return fast()

        def on_slow() -> Any:
            self.slow += 1
            return slow()

        proxy._fast_function_call, proxy._slow_function_call = on_fast, on_slow
        self.installed = True
        return True

    def snapshot(self) -> tuple[int, int]:
        return self.fast, self.slow


def accelerator_status() -> dict[str, Any]:
    """Are cudf.pandas and cuml.accel active in this process (not merely installed)?"""
    status: dict[str, Any] = {"cudf.pandas": False, "cuml.accel": False}
    try:
        import cudf.pandas
        import pandas

        status["cudf.pandas"] = bool(getattr(cudf.pandas, "LOADED", False)) and bool(
            cudf.pandas.is_proxy_object(pandas.DataFrame({"a": [1]}))
        )
        status["cudf"] = str(getattr(sys.modules.get("cudf"), "__version__", ""))
    except Exception as exc:  # not importable or not active: reported as inactive
        logger.debug("cudf.pandas inactive: %s", exc)
    try:
        import cuml
        import cuml.accel

        status["cuml.accel"] = bool(cuml.accel.enabled())
        status["cuml"] = str(cuml.__version__)
    except Exception as exc:  # absent before cuml 25.06, or not importable
        logger.debug("cuml.accel inactive: %s", exc)
    return status


def process_engine() -> str:
    """``gpu`` when cuml.accel is active in this process, else ``cpu`` (nothing imported)."""
    accel = sys.modules.get("cuml.accel")
    try:
        return DEVICE_GPU if accel is not None and accel.enabled() else DEVICE_CPU
    except Exception as exc:  # a cuml.accel without enabled(): not one mlpilot runs on
        logger.debug("cuml.accel.enabled() unavailable: %s", exc)
        return DEVICE_CPU


def set_accel_log_level(level: str = "info") -> bool:
    """Turn cuml.accel's per-call logging on in this process (the chained ``-m`` command
    cannot pass ``-v``, and ``CUML_ACCEL_LOG_LEVEL`` is read only from 26.02 on)."""
    try:
        from cuml.accel.core import logger as accel_logger

        accel_logger.set_level(level)
        return True
    except Exception as exc:  # no cuml.accel: nothing to log
        logger.debug("cuml.accel logging not set: %s", exc)
        return False


class _LineTap(io.TextIOBase):
    """A stdout that passes everything through and hands each complete line to ``sink``."""

    def __init__(self, stream: Any, sink: Any) -> None:
        self._stream, self._sink, self._partial = stream, sink, ""

    def write(self, text: str) -> int:
        self._stream.write(text)
        self._partial += text
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self._sink(line)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return int(self._stream.fileno())

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._stream, "encoding", "utf-8"))


# -- the collector: one per pipeline process ---------------------------------------------------------
_ACTIVE: StageDevices | None = None


def observe_model(model: Any) -> None:
    """Record the estimators ``model`` holds against the stages now open (no-op off the GPU)."""
    if _ACTIVE is not None:
        _ACTIVE.observe(model)


class StageDevices:
    """The device evidence of one pipeline process, stage by stage.

    On the CPU engine every stage is ``cpu`` by construction (and ``check_engine`` makes sure
    no accelerator is active); on the GPU engine the evidence is measured as described above.
    """

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.measuring = engine == DEVICE_GPU
        self.evidence: dict[str, StageEvidence] = {}
        self._open: list[tuple[str, tuple[int, int]]] = []
        self._pending: dict[str, list[Any]] = {}
        self._parser = AccelLogParser()
        self._pandas = PandasCounter()
        self._stdout: Any = None

    def start(self) -> None:
        """Begin measuring: cuml.accel logging on, stdout tapped, pandas calls counted."""
        global _ACTIVE
        _ACTIVE = self
        if not self.measuring:
            return
        set_accel_log_level("info")
        self._pandas.install()
        self._stdout = sys.stdout
        sys.stdout = _LineTap(sys.stdout, self.on_line)

    def stop(self) -> None:
        global _ACTIVE
        if self._stdout is not None:
            sys.stdout.flush()
            sys.stdout = self._stdout
            self._stdout = None
        if _ACTIVE is self:
            _ACTIVE = None

    def on_line(self, line: str) -> None:
        call = self._parser.feed(line)
        if call is not None:
            for name, _ in self._open:
                self.evidence[name].add(call.call, call.device, call.reason)

    def stage_started(self, name: str) -> None:
        self.evidence.setdefault(name, StageEvidence())
        self._open.append((name, self._pandas.snapshot()))

    def stage_ended(self, name: str) -> dict[str, Any]:
        """The stage's device record (accumulated over every time the stage ran)."""
        index = max(i for i, (open_name, _) in enumerate(self._open) if open_name == name)
        _, (fast0, slow0) = self._open.pop(index)
        evidence = self.evidence[name]
        for model in self._pending.pop(name, []):
            self._record_booster(evidence, model)
        fast, slow = self._pandas.snapshot()
        if fast > fast0:
            evidence.add(PANDAS_GPU, DEVICE_GPU)
        if slow > slow0:
            evidence.add(PANDAS_CPU, DEVICE_CPU, f"{slow - slow0} pandas call(s) fell back")
        return evidence.to_dict()

    def observe(self, model: Any) -> None:
        if not self.measuring or not self._open:
            return
        for leaf in model_leaves(model):
            for name, _ in self._open:
                self._record_leaf(name, leaf)

    def _record_leaf(self, stage: str, leaf: Any) -> None:
        evidence = self.evidence[stage]
        if _native_family(leaf) is not None:
            if not self._record_booster(evidence, leaf):
                self._pending.setdefault(stage, []).append(leaf)
        elif not type(leaf).__module__.startswith("mlpilot") and not _is_proxy(leaf):
            # mlpilot's own transformers are pandas code: the pandas counter covers them
            evidence.add(type(leaf).__name__, DEVICE_CPU, NOT_PROXIED)

    @staticmethod
    def _record_booster(evidence: StageEvidence, model: Any) -> bool:
        device = booster_device(model)
        if device is None:
            return False
        label = _native_family(model).label
        reason = None if device == DEVICE_GPU else f"{label}'s booster ran on the CPU"
        evidence.add(f"{type(model).__name__}.fit", device, reason)
        return True

    def records(self) -> dict[str, dict[str, Any]]:
        return {name: evidence.to_dict() for name, evidence in self.evidence.items()}


# -- the CUDA driver, asked directly (no Python GPU package needed) --------------------------------
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


@dataclass(frozen=True)
class DriverReport:
    """What libcuda says: usable device count, first device's name, capability, bus id."""

    ok: bool
    reason: str
    devices: int = 0
    name: str = ""
    driver_version: int = 0  # CUDA version the driver supports, e.g. 12080 for 12.8
    capability: tuple[int, int] = (0, 0)
    bus_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "devices": self.devices,
            "name": self.name,
            "driver_version": self.driver_version,
            "capability": list(self.capability),
            "bus_id": self.bus_id,
        }


def _libcuda() -> Any:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def cuda_driver_report() -> DriverReport:
    """Initialise the CUDA driver and describe device 0 (as CUDA_VISIBLE_DEVICES shows it)."""
    driver = _libcuda()
    if driver is None:
        return DriverReport(False, "no CUDA driver (libcuda) on this machine")
    if driver.cuInit(0) != 0:
        return DriverReport(False, "the CUDA driver failed to initialise (cuInit)")
    version, count = ctypes.c_int(0), ctypes.c_int(0)
    driver.cuDriverGetVersion(ctypes.byref(version))
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return DriverReport(
            False, "the CUDA driver reports no usable device", driver_version=version.value
        )
    device = ctypes.c_int(0)
    name, bus = ctypes.create_string_buffer(100), ctypes.create_string_buffer(32)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    if driver.cuDeviceGet(ctypes.byref(device), 0) == 0:
        driver.cuDeviceGetName(name, 100, device)
        driver.cuDeviceGetAttribute(
            ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device
        )
        driver.cuDeviceGetAttribute(
            ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device
        )
        driver.cuDeviceGetPCIBusId(bus, 32, device)
    return DriverReport(
        True,
        "CUDA device available",
        count.value,
        name.value.decode(errors="replace"),
        version.value,
        (major.value, minor.value),
        bus.value.decode(errors="replace"),
    )
