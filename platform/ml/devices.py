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

Presence is not enough to report a speedup (every model stage holds a scikit-learn
imputer that cuML never proxies), so each stage also records *time*: the GPU and CPU
seconds of every proxied call from ``cuml.accel.profile(quiet=True)``
(``ProfileResults.method_calls``, public from 25.08), the seconds of every call of a leaf
that is not a proxy (an imputer, LightGBM) and of XGBoost's and CatBoost's fit and predict
(the device read from the fitted model), and the seconds of cudf.pandas' fast and slow
calls (its ``_fast_slow_function_call``, as cudf.pandas' own profiler reads it). Only the
outermost timed call on a thread counts (a leaf's own pandas calls are the leaf's time).
The stage's ``gpu_share`` is its GPU seconds over its wall seconds, at most 1: a proxied
call that itself makes cudf.pandas calls is counted twice, so a share near 1 means
"nearly all", not an exact figure.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import io
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
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
FELL_BACK = "cuml.accel ran it on the CPU"
#: calls read from one trial's record of another process (a worker's attribute is its own)
MAX_ABSORBED = 50


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
    """What one stage ran where, and for how long (seconds per call, where timed)."""

    gpu: set[str] = field(default_factory=set)
    cpu: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)
    gpu_s: dict[str, float] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)

    def add(
        self, call: str, device: str, reason: str | None = None, seconds: float | None = None
    ) -> None:
        on_gpu = device == DEVICE_GPU
        (self.gpu if on_gpu else self.cpu).add(call)
        if not on_gpu and reason and call not in self.reasons:
            self.reasons[call] = reason
        if seconds is not None:
            times = self.gpu_s if on_gpu else self.cpu_s
            times[call] = times.get(call, 0.0) + max(float(seconds), 0.0)

    @property
    def device(self) -> str:
        if self.gpu and self.cpu:
            return DEVICE_MIXED
        return DEVICE_GPU if self.gpu else DEVICE_CPU

    def to_dict(self, seconds: float | None = None, timed: bool = False) -> dict[str, Any]:
        """The stage's record; ``gpu_share`` only where its calls were timed (``timed``)
        and its wall ``seconds`` are known."""
        gpu_s = sum(self.gpu_s.values())
        share = min(gpu_s / seconds, 1.0) if timed and seconds else None
        return {
            "device": self.device,
            "gpu": sorted(self.gpu),
            "cpu": sorted(self.cpu),
            "reasons": dict(sorted(self.reasons.items())),
            "gpu_s": round(gpu_s, 4) if timed else None,
            "gpu_share": None if share is None else round(share, 4),
            "gpu_calls_s": _rounded(self.gpu_s),
            "cpu_calls_s": _rounded(self.cpu_s),
        }


def _rounded(times: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in sorted(times.items(), key=lambda kv: -kv[1])}


def cpu_leaves(record: dict[str, Any] | None, top: int = 3) -> str:
    """``SimpleImputer on the CPU 0.2 s, …``: a stage's slowest CPU calls with their time."""
    times = (record or {}).get("cpu_calls_s") or {}
    parts = [f"{call} on the CPU {_secs(s)}" for call, s in list(times.items())[:top]]
    return ", ".join(parts)


def _secs(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 0.1 else f"{seconds * 1000:.0f} ms"


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
        elif hasattr(getattr(value, "estimator", None), "fit"):
            yield value.estimator  # a fitted holder without fit (CalibratedClassifierCV's)

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


# -- timing: only the outermost timed call on a thread counts ---------------------------------------
_DEPTH = threading.local()


def _outermost(record: Callable[[float], None], call: Callable[[], Any]) -> Any:
    """``call()``, its seconds handed to ``record`` unless a timed call is already running
    on this thread (then the outer call owns the time)."""
    if getattr(_DEPTH, "n", 0):
        return call()
    _DEPTH.n = 1
    start = time.perf_counter()
    try:
        return call()
    finally:
        _DEPTH.n = 0
        record(time.perf_counter() - start)


# -- cudf.pandas: GPU calls versus pandas fallbacks -------------------------------------------------
class PandasCounter:
    """Counts and times cudf.pandas' fast (GPU) and slow (pandas) calls.

    ``_fast_function_call``/``_slow_function_call`` are the placeholders cudf.pandas calls
    on each path (present from 25.08 on): they count. ``_fast_slow_function_call`` (every
    proxied call goes through it and returns ``(result, fast)``) is wrapped in every
    cudf.pandas module that holds it, for the time. Without the placeholders nothing is
    counted, and a stage gets no pandas evidence rather than a guess.
    """

    def __init__(self) -> None:
        self.fast = 0
        self.slow = 0
        self.fast_s = 0.0
        self.slow_s = 0.0
        self.installed = False
        self.timed = False

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
        self.timed = self._time(getattr(proxy, "_fast_slow_function_call", None))
        return True

    def _time(self, original: Any) -> bool:
        if not callable(original):
            return False

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if getattr(_DEPTH, "n", 0):
                return original(*args, **kwargs)
            _DEPTH.n = 1
            start = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                _DEPTH.n = 0
            seconds = time.perf_counter() - start
            if result[1]:
                self.fast_s += seconds
            else:
                self.slow_s += seconds
            return result

        for name, module in list(sys.modules.items()):
            held = getattr(module, "_fast_slow_function_call", None)
            if name.startswith("cudf.pandas") and held is original:
                module._fast_slow_function_call = timed
        return True

    def snapshot(self) -> tuple[int, int, float, float]:
        return self.fast, self.slow, self.fast_s, self.slow_s


# -- leaves that are not cuml.accel proxies: their calls, timed ----------------------------------
#: the estimator methods a stage spends its time in
TIMED_METHODS = (
    "fit",
    "partial_fit",
    "fit_transform",
    "transform",
    "predict",
    "predict_proba",
    "predict_log_proba",
    "decision_function",
)
_PATCHED: set[type] = set()


def time_leaf_class(cls: type) -> None:
    """Time ``cls``'s own estimator methods in this process (once per class).

    The class is patched, not the instance: a fitted model pickles as before. A method
    that is not a plain function (scikit-learn's ``available_if`` descriptors, which
    decide whether ``predict_proba`` exists) keeps its descriptor untouched.
    """
    if cls in _PATCHED:
        return
    _PATCHED.add(cls)
    for method in TIMED_METHODS:
        raw = inspect.getattr_static(cls, method, None)
        if inspect.isfunction(raw):
            setattr(cls, method, _timed_method(raw, method))


def _timed_method(func: Callable[..., Any], method: str) -> Callable[..., Any]:
    @functools.wraps(func)
    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        collector = _ACTIVE
        if collector is None:
            return func(self, *args, **kwargs)
        return _outermost(
            lambda seconds: collector.leaf_called(self, method, seconds),
            lambda: func(self, *args, **kwargs),
        )

    return timed


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


def fitted_evidence(model: Any) -> dict[str, Any] | None:
    """Where a fitted ``model`` trained, read from the model itself, for a trial scored in a
    process without stages (``mlpilot worker``, a Dask worker) on the GPU engine; None in a
    pipeline (its stages measure) or off the GPU.

    A cuml.accel proxy holds its GPU model in ``_gpu`` once it trained there and None when
    it fell back (``cuml/accel/estimator_proxy.py``, 25.08 to 26.08); a native family's
    booster says where it trained. No call is timed: the record carries devices, not a
    share.
    """
    if _ACTIVE is not None or process_engine() != DEVICE_GPU:
        return None
    evidence = StageEvidence()
    for leaf in model_leaves(model):
        name = f"{type(leaf).__name__}.fit"
        family = _native_family(leaf)
        if family is not None:
            device = booster_device(leaf)
            if device is not None:
                why = None if device == DEVICE_GPU else f"{family.label}'s booster ran on the CPU"
                evidence.add(name, device, why)
        elif _is_proxy(leaf):
            on_gpu = getattr(leaf, "_gpu", None) is not None
            evidence.add(name, DEVICE_GPU if on_gpu else DEVICE_CPU, FELL_BACK)
        elif not type(leaf).__module__.startswith("mlpilot"):
            evidence.add(type(leaf).__name__, DEVICE_CPU, NOT_PROXIED)
    return evidence.to_dict()


def absorb_evidence(record: Any) -> None:
    """A trial's ``fitted_evidence`` from another process, into the stages now open (the
    parent's ``tune``): its calls join the stage's devices, never its timed share."""
    if _ACTIVE is not None and isinstance(record, dict):
        _ACTIVE.absorb(record)


class StageDevices:
    """The device evidence of one pipeline process, stage by stage.

    On the CPU engine every stage is ``cpu`` by construction (and ``check_engine`` makes sure
    no accelerator is active); on the GPU engine the evidence is measured as described above.
    """

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.measuring = engine == DEVICE_GPU
        self.evidence: dict[str, StageEvidence] = {}
        self._open: list[tuple[str, tuple[Any, ...]]] = []
        self._pending: dict[str, list[Any]] = {}
        self._parser = AccelLogParser()
        self._pandas = PandasCounter()
        self._stdout: Any = None
        self._profile: AccelProfile | None = None

    @property
    def timed(self) -> bool:
        """Whether stages get a GPU share: cuml.accel's profile is on in this process."""
        return self._profile is not None

    def start(self) -> None:
        """Begin measuring: cuml.accel logging and profile on, stdout tapped, pandas calls
        counted and timed."""
        global _ACTIVE
        _ACTIVE = self
        if not self.measuring:
            return
        set_accel_log_level("info")
        self._profile = AccelProfile.start()
        self._pandas.install()
        self._stdout = sys.stdout
        sys.stdout = _LineTap(sys.stdout, self.on_line)

    def stop(self) -> None:
        global _ACTIVE
        if self._stdout is not None:
            sys.stdout.flush()
            sys.stdout = self._stdout
            self._stdout = None
        if self._profile is not None:
            self._profile.stop()
        if _ACTIVE is self:
            _ACTIVE = None

    def on_line(self, line: str) -> None:
        call = self._parser.feed(line)
        if call is not None:
            for name, _ in self._open:
                self.evidence[name].add(call.call, call.device, call.reason)

    def stage_started(self, name: str) -> None:
        self.evidence.setdefault(name, StageEvidence())
        profiled = self._profile.snapshot() if self._profile is not None else {}
        self._open.append((name, (*self._pandas.snapshot(), profiled)))

    def stage_ended(self, name: str, seconds: float | None = None) -> dict[str, Any]:
        """The stage's device record (accumulated over every time the stage ran);
        ``seconds``: its wall time so far, for the GPU share."""
        index = max(i for i, (open_name, _) in enumerate(self._open) if open_name == name)
        _, (fast0, slow0, fast_s0, slow_s0, profiled) = self._open.pop(index)
        evidence = self.evidence[name]
        for model in self._pending.pop(name, []):
            self._record_booster(evidence, model)
        fast, slow, fast_s, slow_s = self._pandas.snapshot()
        timed = self._pandas.timed
        if fast > fast0:
            evidence.add(PANDAS_GPU, DEVICE_GPU, seconds=fast_s - fast_s0 if timed else None)
        if slow > slow0:
            why = f"{slow - slow0} pandas call(s) fell back"
            evidence.add(PANDAS_CPU, DEVICE_CPU, why, slow_s - slow_s0 if timed else None)
        if self._profile is not None:
            for call in self._profile.since(profiled):
                evidence.add(*call)
        return evidence.to_dict(seconds, self.timed)

    def observe(self, model: Any) -> None:
        if not self.measuring:
            return
        for leaf in model_leaves(model):
            if not _is_proxy(leaf) and not type(leaf).__module__.startswith("mlpilot"):
                time_leaf_class(type(leaf))
            for name, _ in self._open:
                self._record_leaf(name, leaf)

    def absorb(self, record: dict[str, Any]) -> None:
        """Another process's record (``absorb_evidence``): its calls, not its seconds."""
        if not self.measuring:
            return
        reasons = record.get("reasons") if isinstance(record.get("reasons"), dict) else {}
        for device in (DEVICE_GPU, DEVICE_CPU):
            calls = record.get(device)
            for call in calls[:MAX_ABSORBED] if isinstance(calls, list) else []:
                why = reasons.get(call) if device == DEVICE_CPU else None
                for name, _ in self._open:
                    self.evidence[name].add(str(call)[:200], device, why and str(why)[:300])

    def leaf_called(self, leaf: Any, method: str, seconds: float) -> None:
        """A timed call of a leaf that is no proxy (``time_leaf_class``), in every open stage."""
        family = _native_family(leaf)
        if family is not None:
            device = booster_device(leaf) or DEVICE_CPU
            call = f"{type(leaf).__name__}.{method}"
            why = None if device == DEVICE_GPU else f"{family.label}'s booster ran on the CPU"
        else:
            device, call, why = DEVICE_CPU, type(leaf).__name__, NOT_PROXIED
        for name, _ in self._open:
            self.evidence[name].add(call, device, why, seconds)

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


# -- cuml.accel's profile: GPU and CPU seconds per proxied call ------------------------------------
#: a call's counters in ``ProfileResults.method_calls``: gpu calls, gpu s, cpu calls, cpu s, reasons
Counters = tuple[int, float, int, float, frozenset]


class AccelProfile:
    """``cuml.accel.profile(quiet=True)`` held open for the whole pipeline; each stage reads
    what changed while it was open (``since``)."""

    def __init__(self, context: Any, results: Any) -> None:
        self._context, self.results = context, results

    @classmethod
    def start(cls) -> AccelProfile | None:
        try:
            import cuml.accel

            context = cuml.accel.profile(quiet=True)
            return cls(context, context.__enter__())
        except Exception as exc:  # no cuml.accel, or one before 25.08: stages get no share
            logger.debug("cuml.accel.profile unavailable: %s", exc)
            return None

    def stop(self) -> None:
        context, self._context = self._context, None
        if context is not None:
            context.__exit__(None, None, None)

    def snapshot(self) -> dict[str, Counters]:
        return profile_counters(self.results)

    def since(self, before: dict[str, Counters]) -> list[tuple[str, str, str | None, float]]:
        return profile_calls(before, self.snapshot())


def profile_counters(results: Any) -> dict[str, Counters]:
    """The counters of a ``ProfileResults`` (``method_calls``: name → ``MethodStats``)."""
    return {
        name: (
            int(stats.gpu_calls),
            float(stats.gpu_time),
            int(stats.cpu_calls),
            float(stats.cpu_time),
            frozenset(stats.fallback_reasons),
        )
        for name, stats in dict(getattr(results, "method_calls", {}) or {}).items()
    }


def profile_calls(
    before: dict[str, Counters], after: dict[str, Counters]
) -> list[tuple[str, str, str | None, float]]:
    """``(call, device, reason, seconds)`` for what ran between two snapshots."""
    calls: list[tuple[str, str, str | None, float]] = []
    for name, (gpu_n, gpu_t, cpu_n, cpu_t, reasons) in after.items():
        gpu_n0, gpu_t0, cpu_n0, cpu_t0, reasons0 = before.get(name, (0, 0.0, 0, 0.0, frozenset()))
        if gpu_n > gpu_n0:
            calls.append((name, DEVICE_GPU, None, gpu_t - gpu_t0))
        if cpu_n > cpu_n0:
            why = "; ".join(sorted(reasons - reasons0 or reasons)) or "ran on the CPU"
            calls.append((name, DEVICE_CPU, why, cpu_t - cpu_t0))
    return calls


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
