"""The contract between mlpilot (the parent) and a pipeline process (the child).

Both sides import this module and nothing else of each other: the environment variables
the parent sets and the child reads, the files the child writes into its run folder, and
the two records that travel through those files — ``PipelineResult`` (``result.json``,
written once at the end) and ``PipelineEvent`` (one JSON line each in ``events.jsonl``).
Both records are versioned and strict: a field one side writes and the other does not know
fails loudly instead of being dropped by a ``.get()``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

PROTOCOL_VERSION = 1

# -- environment: set by the parent, read by the child ----------------------------------------
ENV_RUN_DIR = "MLPILOT_RUN_DIR"  # the run folder (events, result, outputs)
ENV_DATA = "MLPILOT_DATA"  # the data file (options travel in the environment, not argv)
ENV_ENGINE_USED = "MLPILOT_ENGINE_USED"  # cpu | gpu: what this process runs on
#: "1": log through the run folder (``TRACKING_FILE``, ``STAGED_DIR``): the parent relays to
#: MLflow; the pipeline never opens the tracking store (DESIGN §8)
ENV_RELAY = "MLPILOT_RELAY"
ENV_MLFLOW_RUN_ID = "MLFLOW_RUN_ID"  # a standalone script's MLflow run (never set by mlpilot)
ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
ENV_HOME = "MLPILOT_HOME"
ENV_OPTUNA_STORAGE = "MLPILOT_OPTUNA_STORAGE"
#: the descriptor of the parent's Optuna storage proxy (a socketpair end, ``ml/hpo/proxy.py``):
#: set, the pipeline reaches its study only through it, never the storage itself
ENV_OPTUNA_FD = "MLPILOT_OPTUNA_FD"
ENV_EXPERIMENT = "MLPILOT_EXPERIMENT"
#: JSON {path as planned: path to open}: files handed over as descriptors or copies
ENV_READ_MAP = "MLPILOT_READ_MAP"
# ``mlpilot predict``'s job (``ml/predict_job.py``): which model, and what the user trusts
ENV_MODEL_URI = "MLPILOT_MODEL_URI"
#: JSON {model URI as planned ("" = the experiment's best): folder in the run folder}: models
#: from the store, fetched and verified by the parent before the pipeline starts
ENV_STORE_MODELS = "MLPILOT_STORE_MODELS"
PREDICTIONS_FILE = "predictions.csv"
ENV_PROBA = "MLPILOT_PROBA"  # "1": also write each class's probability (proba_<class>)
PROBA_PREFIX = "proba_"
ENV_NO_TRACK = "MLPILOT_NO_TRACK"  # "1": log nothing to MLflow (compare's warm-up and repeats)
ENV_LAUNCHED_AT = "MLPILOT_LAUNCHED_AT"  # wall-clock time.time() when the parent started us
#: wall-clock time.time() when the user's request began (``mlpilot run`` invoked): a time
#: budget (``timeout_s``) bounds the whole run from this moment to the command's exit
ENV_RUN_STARTED_AT = "MLPILOT_RUN_STARTED_AT"
ENV_PROBE_OUT = "MLPILOT_PROBE_OUT"  # where the GPU probe writes its report (JSON)
# "gpu": model defaults prefer what cuML accelerates (GPU legs, and both legs of a comparison,
# so that the two legs fit the same model); else the engine's own defaults
ENV_PREFER = "MLPILOT_PREFER"
# `mlpilot worker` relaunched under the GPU engine's command: its own arguments, as JSON
ENV_WORKER_ARGV = "MLPILOT_WORKER_ARGV"

# -- files in the run folder --------------------------------------------------------------------
EVENTS_FILE = "events.jsonl"
RESULT_FILE = "result.json"
#: one ``LogRecord`` per line: what the pipeline asks the parent to log to MLflow
TRACKING_FILE = "tracking.jsonl"
STAGED_DIR = "staged"  # artifact files and saved models the records name
STORE_MODELS_DIR = "store-models"  # verified models the parent put there (read-only)
STDOUT_FILE = "stdout.txt"
STDERR_FILE = "stderr.txt"
SCRIPT_FILE = "pipeline.py"
#: written (by ``mlpilot runs cancel`` or the dashboard) to ask the run's owner to stop it
CANCEL_FILE = "cancel-requested"
#: the most the parent reads of what a pipeline wrote (a 2 GB result.json must not exhaust it)
RESULT_MAX_BYTES = 64 * 2**20
EVENTS_MAX_BYTES = 64 * 2**20

# -- event types --------------------------------------------------------------------------------
EVENT_TYPES = (
    "pipeline_start",
    "stage_start",
    "stage_end",
    "progress",
    "note",
    "trial",
    "study",  # message: the name of the Optuna study a search just created or joined
    "pipeline_failed",
    "pipeline_end",
)
SUCCEEDED, FAILED = "succeeded", "failed"

# -- tracking records (``TRACKING_FILE``) -------------------------------------------------------
LOG_TYPES = (
    "params",  # values: {name: value}
    "metrics",  # values: {name: number}, step
    "tags",  # values: {name: text}
    "artifact",  # path (below STAGED_DIR), artifact_path (folder in the run's artifacts)
    "input",  # name, dataset {source, digest, rows, columns [[name, type]], targets}
    "model",  # path: a folder saved with mlflow.sklearn.save_model
    "start_run",  # a nested run: run (its key), name, tags, start_ms
    "end_run",  # run, status, end_ms
    "register",  # name, alias, source_run, metric, lineage
)

# -- devices: where a stage really ran (measured in the child, see ml/devices.py) ---------------
DEVICE_CPU, DEVICE_GPU, DEVICE_MIXED = "cpu", "gpu", "mixed"
DEVICES = (DEVICE_CPU, DEVICE_GPU, DEVICE_MIXED)


class ProtocolError(MlpilotError):
    """A result or event that this version of mlpilot cannot read."""


@dataclass
class PipelineResult:
    """What a pipeline reports at its end (``result.json``)."""

    status: str  # succeeded | failed
    version: int = PROTOCOL_VERSION
    run_id: str | None = None
    engine: str = "cpu"
    seed: int | None = None
    task: str | None = None
    target: str | None = None
    model_family: str | None = None
    main_metric: str | None = None
    model_uri: str | None = None
    model_digests: dict[str, str] | None = None  # {file: SHA-256}, checked before loads
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    stage_memory_mb: dict[str, float] = field(default_factory=dict)
    peak_memory_mb: float | None = None
    #: stage → {device, gpu: [calls on the GPU], cpu: [calls on the CPU], reasons: {call: why}}
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: which accelerators were active in this process: {"cudf.pandas": bool, "cuml.accel": bool, …}
    accelerators: dict[str, Any] | None = None
    #: seconds from the parent's launch to the first line of the pipeline (interpreter,
    #: imports, CUDA context and memory pool under the GPU engine)
    startup_s: float | None = None
    threads: int | None = None
    notes: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None  # {type, message, stage}
    data: dict[str, Any] | None = None  # path, rows, cols, schema
    labels: dict[str, Any] | None = None  # classes, positive
    adapter: dict[str, Any] | None = None
    cleaning: dict[str, Any] | None = None
    features: dict[str, Any] | None = None
    test_predictions: dict[str, Any] | None = None
    importance: list[dict[str, Any]] | None = None
    study: dict[str, Any] | None = None
    warm_start: str | None = None
    registered: dict[str, Any] | None = None
    predictions: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == SUCCEEDED

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> PipelineResult:
        return cls(**_known(cls, _object(text, RESULT_FILE), RESULT_FILE))

    def write(self, folder: Path) -> None:
        """Atomically: the parent never reads half a result."""
        path = folder / RESULT_FILE
        # one name per process: forked copies that fail at once (a fork bomb) must not
        # truncate each other's file before it is renamed in
        tmp = path.with_name(f".{RESULT_FILE}.{os.getpid()}.tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> PipelineResult | None:
        """The parent's reader: the bytes it read itself, without following links (the
        ``RunFolder`` of ``mlpilot.tracking.runfolder``); None when there were none."""
        if data is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{RESULT_FILE} is not UTF-8: {exc.reason}") from None
        return cls.from_json(text)

    @classmethod
    def read(cls, folder: Path | RunFolder) -> PipelineResult | None:
        """The parent's reader: the result in ``folder``, None when the pipeline wrote none.

        Read without following links and under ``RESULT_MAX_BYTES`` (the pipeline may have
        planted anything in its folder); a link, a FIFO or an oversized file is a
        ``ProtocolError``, as is a result that is not JSON.
        """
        try:
            if isinstance(folder, RunFolder):
                data = folder.read_bytes(RESULT_FILE, RESULT_MAX_BYTES)
            else:
                with RunFolder(folder) as handle:
                    data = handle.read_bytes(RESULT_FILE, RESULT_MAX_BYTES)
        except UnsafeFile as exc:
            raise ProtocolError(exc.message) from None
        return cls.from_bytes(data)


@dataclass
class PipelineEvent:
    """One line of ``events.jsonl``: progress the parent shows and records as it happens."""

    type: str
    at: str
    stage: str | None = None
    message: str | None = None
    seconds: float | None = None
    # stage_end: the measured device, and whether the stage raised
    device: str | None = None
    failed: bool | None = None
    # pipeline_start
    engine: str | None = None
    seed: int | None = None
    run_id: str | None = None
    # trial
    number: int | None = None
    state: str | None = None
    value: float | None = None
    best: float | None = None
    n: int | None = None
    total: int | None = None
    metric: str | None = None

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ProtocolError(
                f"unknown pipeline event type {self.type!r}",
                hint=f"known: {', '.join(EVENT_TYPES)}",
            )

    def to_dict(self) -> dict[str, Any]:
        """The set fields only (events stay short lines)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> PipelineEvent:
        return cls(**_known(cls, _object(text, EVENTS_FILE), EVENTS_FILE))

    @classmethod
    def parse_lines(cls, data: bytes) -> tuple[list[PipelineEvent], list[str]]:
        """The events in complete lines of ``events.jsonl`` bytes, and why others were skipped."""
        events, skipped = [], []
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                events.append(cls.from_json(line.decode("utf-8")))
            except (ProtocolError, UnicodeDecodeError, TypeError) as exc:
                skipped.append(str(exc)[:200])
        return events, skipped


@dataclass
class LogRecord:
    """One line of ``tracking.jsonl``: a call the pipeline's ``RelayedRunLogger`` made.

    ``run`` is the key the pipeline chose for a nested run (None: the pipeline's own run);
    the parent maps keys to MLflow run ids and checks every record before it logs it.
    """

    type: str
    run: str | None = None
    values: dict[str, Any] | None = None
    step: int | None = None
    path: str | None = None
    artifact_path: str | None = None
    name: str | None = None
    tags: dict[str, Any] | None = None
    status: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    dataset: dict[str, Any] | None = None
    alias: str | None = None
    source_run: str | None = None
    metric: str | None = None
    lineage: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.type not in LOG_TYPES:
            raise ProtocolError(
                f"unknown tracking record type {self.type!r}", hint=f"known: {', '.join(LOG_TYPES)}"
            )

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(data, default=str, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> LogRecord:
        return cls(**_known(cls, _object(text, TRACKING_FILE), TRACKING_FILE))


def _object(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"{where} is not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"{where} holds {type(data).__name__}, not an object")
    return data


def _known(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    version = data.get("version", PROTOCOL_VERSION)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"{where} was written by protocol version {version}; this mlpilot reads "
            f"version {PROTOCOL_VERSION}",
            hint="run the pipeline with the same mlpilot version that reads it",
        )
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ProtocolError(
            f"{where} has fields this mlpilot does not know: {', '.join(unknown)}",
            hint="add them to mlpilot.platform.ml.protocol, which both sides read",
        )
    return data
