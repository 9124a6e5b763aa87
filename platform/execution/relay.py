"""The parent logs to MLflow on a pipeline's behalf (DESIGN §8: a pipeline writes only its
own run folder).

A pipeline's ``RelayedRunLogger`` appends ``protocol.LogRecord`` lines to
``protocol.TRACKING_FILE`` and stages files below ``protocol.STAGED_DIR``. ``Relay`` reads
them while the leg runs (``pump``, from the executor's wait loop: live metrics and trials)
and once more at its end (``drain``, before RECORDING). Everything is read through
``tracking/runfolder.py`` (no link followed, regular files under a size cap), and every
record is checked before it is applied: types, MLflow's key and length limits, no reserved
tag (the run's state, kind and error, the parent's own tags, ``mlflow.*`` system tags, any
trust tag), artifact paths relative and inside the staging folder, caps on counts and
bytes. A refused record is dropped with a note on the run, never applied.

The model: the parent creates the ``LoggedModel`` itself, fills its ids into the staged
``MLmodel`` (YAML, never unpickled here), uploads the files, links it to the run and
records the digests of what it uploaded (``tracking/trust.record_digests``). A
registration is honoured only when the plan asks for it (a ``register_model`` step with
the same name, alias and run).
"""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.protocol import LogRecord, ProtocolError
from mlpilot.tracking import vocab
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

logger = logging.getLogger(__name__)

MAX_RECORD_FILE = 256 * 2**20  # the whole record file
MAX_LINE = 2**20
MAX_KEY_CHARS = 250  # MLflow's limit for param, metric and tag keys
MAX_PARAM_CHARS = 6000
MAX_TAG_CHARS = 8000
MAX_VALUES = 1000  # keys in one record
MAX_ARTIFACTS = 2000
MAX_NESTED = 20000
MAX_MODELS = 2
MAX_MODEL_FILES = 500
MAX_NOTES = 20
_KEY = re.compile(r"^[\w\-. /:]+$")  # MLflow's own rule for keys
_STATUSES = ("FINISHED", "FAILED", "KILLED")
#: tags only the parent sets: the run's identity, state, outcome and trust anchors
RESERVED_TAGS = frozenset(
    {
        vocab.TAG_KIND,
        vocab.TAG_SESSION,
        vocab.TAG_PROMPT,
        vocab.TAG_PLANNER,
        vocab.TAG_ENGINE,
        vocab.TAG_ENGINE_REQUESTED,
        vocab.TAG_ENGINE_USED,
        vocab.TAG_ENGINE_REASON,
        vocab.TAG_ENGINE_FALLBACK_ERROR,
        vocab.TAG_TEMPLATE,
        vocab.TAG_FINGERPRINT,
        vocab.TAG_VERSION,
        vocab.TAG_SOURCE,
        vocab.TAG_STATE,
        vocab.TAG_TARGET,
        vocab.TAG_TASK,
        vocab.TAG_METRIC,
        vocab.TAG_ERROR,
        vocab.TAG_ERROR_STAGE,
        vocab.TAG_COMPARE_GPU,
        vocab.TAG_PLAN_FILE,
        vocab.TAG_PLAN_SHA256,
        vocab.TAG_MODEL_DIGESTS,
        vocab.TAG_CONTAINMENT_USER,
        vocab.TAG_CONTAINMENT_NETWORK,
        vocab.TAG_SOURCE_RUN,
        vocab.TAG_METRIC_VALUE,
    }
)
_RESERVED_PREFIXES = ("mlflow.", vocab.TAG_DEVICE_PREFIX, vocab.TAG_SPEEDUP_PREFIX, "mlpilot.trust")
#: artifacts only the parent writes (the request, the script, the logs, the timings)
RESERVED_ARTIFACTS = frozenset({"prompt.txt", "plan.json", "pipeline.py", "timings.json"})
RESERVED_ARTIFACT_FOLDERS = ("logs", "llm", "data")
#: a nested run's kind is the one reserved tag a pipeline sets, and only to these
_NESTED_KINDS = (vocab.KIND_TRIAL,)


class Refused(MlpilotError):
    """A record the parent will not apply."""


@dataclass
class Registration:
    """What a plan's ``register_model`` step allows the pipeline to ask for."""

    name: str
    alias: str | None = None
    run_id: str | None = None


@dataclass
class RelayOutcome:
    model_uri: str | None = None
    model_digests: dict[str, str] | None = None
    registered: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    refused: int = 0


class Relay:
    """Applies one run folder's tracking records to one MLflow run."""

    def __init__(
        self,
        run_dir: Path,
        client: Any,
        run_id: str,
        *,
        registrations: tuple[Registration, ...] = (),
        file_limit: int = 2**31,
    ) -> None:
        # a client, or what makes one: opened on the first record (a leg may log nothing)
        self.run_dir, self._client, self.run_id = run_dir, client, run_id
        self._main: Any = None
        self.registrations = list(registrations)
        self.file_limit = file_limit
        self.offset = 0
        self.nested: dict[str, Any] = {}  # key → its MlflowRunLogger (deferred)
        self.ended: set[str] = set()
        self.artifacts = 0
        self.models = 0
        self.out = RelayOutcome()
        self._broken = False

    @property
    def client(self) -> Any:
        if callable(self._client):
            self._client = self._client()
        return self._client

    @property
    def main(self) -> Any:
        """The pipeline's own run (opened on the first record: most polls find none)."""
        if self._main is None:
            from mlpilot.tracking.run_logger import MlflowRunLogger

            self._main = MlflowRunLogger(self.client, self.run_id)
        return self._main

    def rerun(self) -> None:
        """The leg's CPU rerun writes a new records file into the same MLflow run: read it
        from its start, under the caps of a fresh leg (one rerun at most: the caps at most
        double); its nested runs are its own (the failed leg's were ended FAILED)."""
        self.offset = 0
        self.nested, self.ended = {}, set()
        self.artifacts = self.models = 0
        self._broken = False

    # -- reading --------------------------------------------------------------------------
    def pump(self) -> None:
        """Apply the complete lines appended since the last call."""
        if self._broken:
            return
        for line in self._new_lines():
            try:
                self._apply(LogRecord.from_json(line.decode("utf-8")))
            except (Refused, ProtocolError, UnicodeDecodeError, UnsafeFile) as exc:
                self._refuse(exc)
            except Exception as exc:  # MLflow refused it (a param changed, the store is gone)
                logger.debug("a tracking record could not be logged", exc_info=True)
                self._refuse(Refused(f"not logged: {type(exc).__name__}: {str(exc)[:200]}"))

    def drain(self, *, failed: bool = False) -> RelayOutcome:
        """The rest of the records, then every nested run left open ends (FAILED)."""
        self.pump()
        for key, nested in self.nested.items():
            if key not in self.ended:
                nested.end("KILLED" if failed else "FAILED")
                self.ended.add(key)
        if self._main is not None:
            self._main.flush()
        return self.out

    def _new_lines(self) -> list[bytes]:
        try:
            with RunFolder(self.run_dir) as folder:
                fd = folder.open_file(protocol.TRACKING_FILE, MAX_RECORD_FILE)
                if fd is None:
                    return []
                with os.fdopen(fd, "rb") as handle:
                    handle.seek(self.offset)
                    data = handle.read(MAX_RECORD_FILE - self.offset + 1)
        except UnsafeFile as exc:
            self._broken = True  # a link, a folder, a file past its cap: nothing more is read
            self._refuse(exc)
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        lines = complete.splitlines()
        for long in (x for x in lines if len(x) > MAX_LINE):
            self._refuse(Refused(f"a record of {len(long)} bytes (over {MAX_LINE})"))
        return [x for x in lines if len(x) <= MAX_LINE]

    def _refuse(self, exc: BaseException) -> None:
        message = exc.one_line() if isinstance(exc, MlpilotError) else str(exc)
        logger.debug("tracking record refused in %s: %s", self.run_dir, message)
        self.out.refused += 1
        if len(self.out.notes) < MAX_NOTES:
            self.out.notes.append(f"a tracking record was refused: {message[:300]}")

    # -- applying -------------------------------------------------------------------------
    def _apply(self, record: LogRecord) -> None:
        if record.type == "start_run":
            self._start_run(record)
            return
        target = self._target(record.run)
        if record.type == "params":
            target.log_params(_params(record.values))
        elif record.type == "metrics":
            target.log_metrics(_metrics(record.values), step=_int(record.step, "step") or 0)
        elif record.type == "tags":
            target.set_tags(_tags(record.values, nested=False))
        elif record.type == "end_run":
            self._end_run(record)
        elif record.type == "artifact":
            self._artifact(target, record)
        elif record.type == "input":
            target.log_input(name=_text(record.name, "name", 500), **_dataset(record.dataset))
        elif record.run is not None:
            raise Refused(f"a {record.type} record belongs to the pipeline's own run")
        elif record.type == "model":
            self._model(record)
        elif record.type == "register":
            self._register(record)

    def _target(self, key: str | None) -> Any:
        if key is None:
            return self.main
        nested = self.nested.get(key)
        if nested is None or key in self.ended:
            raise Refused(f"run {str(key)[:40]!r} is not an open nested run of this pipeline")
        return nested

    def _start_run(self, record: LogRecord) -> None:
        key = _text(record.run, "run", 100)
        if key in self.nested:
            raise Refused(f"nested run {key!r} was started twice")
        if len(self.nested) >= MAX_NESTED:
            raise Refused(f"more than {MAX_NESTED} nested runs")
        tags = _tags(record.tags, nested=True)
        self.nested[key] = self.main.child(
            _text(record.name, "name", MAX_KEY_CHARS),
            tags,
            start_ms=_int(record.start_ms, "start_ms"),
        )

    def _end_run(self, record: LogRecord) -> None:
        if record.run is None:
            raise Refused("the pipeline's own run is ended by mlpilot")
        if record.status not in _STATUSES:
            raise Refused(f"status {str(record.status)[:20]!r} is not one of {_STATUSES}")
        self.nested[record.run].end(record.status, end_ms=_int(record.end_ms, "end_ms"))
        self.ended.add(record.run)

    def _artifact(self, target: Any, record: LogRecord) -> None:
        if self.artifacts >= MAX_ARTIFACTS:
            raise Refused(f"more than {MAX_ARTIFACTS} artifacts")
        name = _staged(record.path)
        folder = _relative(record.artifact_path) if record.artifact_path else None
        where = f"{folder}/{PurePosixPath(name).name}" if folder else PurePosixPath(name).name
        if where in RESERVED_ARTIFACTS or where.split("/")[0] in RESERVED_ARTIFACT_FOLDERS:
            raise Refused(f"artifact {where!r} is one mlpilot writes itself")
        with tempfile.TemporaryDirectory(prefix="mlpilot-relay-") as tmp:
            local = Path(tmp) / PurePosixPath(name).name
            with RunFolder(self.run_dir) as run_folder:
                if not run_folder.copy_out(name, local, self.file_limit):
                    raise Refused(f"{name} is not in the staging folder")
            target.log_file(local, folder)
        self.artifacts += 1

    # -- the model ------------------------------------------------------------------------
    def _model(self, record: LogRecord) -> None:
        if self.models >= MAX_MODELS:
            raise Refused(f"more than {MAX_MODELS} models")
        self.models += 1
        name = _staged(record.path)
        with tempfile.TemporaryDirectory(prefix="mlpilot-model-") as tmp:
            local = Path(tmp) / "model"
            self._copy_tree(name, local)
            uri = log_staged_model(self.client, self.main, local)
        from mlpilot.tracking.trust import record_digests

        self.main.flush()
        self.out.model_digests = record_digests(self.client, uri, self.run_id)
        self.out.model_uri = uri

    def _copy_tree(self, name: str, dest: Path) -> None:
        """The staged model's regular files (links and the rest skipped), under caps."""
        total = 0
        with RunFolder(self.run_dir) as folder:
            files = list(folder.files(name))
            if not files or len(files) > MAX_MODEL_FILES:
                raise Refused(f"{name}: {len(files)} files (1 to {MAX_MODEL_FILES} expected)")
            for path, size in files:
                total += size
                if total > self.file_limit:
                    raise Refused(f"{name} is larger than {self.file_limit} bytes")
                target = dest / PurePosixPath(path).relative_to(name)
                target.parent.mkdir(parents=True, exist_ok=True)
                folder.copy_out(path, target, self.file_limit)

    def _register(self, record: LogRecord) -> None:
        from mlpilot.tracking import registry

        name = _text(record.name, "name", 250)
        wanted = Registration(name, record.alias, record.source_run)
        if wanted not in self.registrations:
            raise Refused(f"registering {name!r} was not asked for by the plan")
        self.registrations.remove(wanted)  # each step registers once
        if record.source_run is None and self.out.model_uri:
            source, uri = self.run_id, self.out.model_uri
        else:
            source, uri = registry.resolve_source(
                self.client, self.main.experiment_id, record.source_run, record.metric
            )
        lineage = {str(k)[:MAX_KEY_CHARS]: str(v)[:500] for k, v in (record.lineage or {}).items()}
        lineage = {k: v for k, v in lineage.items() if k.startswith("mlpilot.")}
        version = registry.register(
            self.client,
            model_uri=uri,
            name=name,
            alias=record.alias,
            source_run_id=source,
            lineage=lineage,
        )
        self.out.registered = version
        self.out.notes.append(
            f"registered {name} version {version['version']}"
            + (f" as @{record.alias}" if record.alias else "")
        )


def log_staged_model(client: Any, run: Any, local: Path) -> str:
    """Log a model folder saved by ``mlflow.sklearn.save_model`` as a LoggedModel of
    ``run``'s experiment; returns ``models:/m-…``. The MLmodel file is read as YAML only."""
    from datetime import datetime, timezone

    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.models import Model

    mlmodel = local / "MLmodel"
    if not mlmodel.is_file():
        raise Refused("the staged model has no MLmodel file")
    try:
        model = Model.load(str(mlmodel))
    except Exception as exc:  # anything unreadable is refused, whatever the reason
        raise Refused(f"the staged MLmodel is unreadable: {type(exc).__name__}") from None
    if "sklearn" not in model.flavors or "python_function" not in model.flavors:
        raise Refused("the staged model is not a scikit-learn model")
    params = dict(client.get_run(run.run_id).data.params)
    logged = client.create_logged_model(
        experiment_id=run.experiment_id, name="model", source_run_id=run.run_id, params=params
    )
    try:
        model.model_id = model.model_uuid = logged.model_id
        model.run_id, model.artifact_path = run.run_id, logged.artifact_location
        model.utc_time_created = str(datetime.now(timezone.utc).replace(tzinfo=None))
        model.save(str(mlmodel))
        client.log_model_artifacts(logged.model_id, str(local))
        client.finalize_logged_model(logged.model_id, LoggedModelStatus.READY)
        client.log_outputs(run.run_id, [LoggedModelOutput(logged.model_id, step=0)])
    except BaseException:
        client.finalize_logged_model(logged.model_id, LoggedModelStatus.FAILED)
        raise
    return f"models:/{logged.model_id}"


# -- checks -------------------------------------------------------------------------------
def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise Refused(f"{what} must be a text of 1 to {limit} characters")
    return value


def _int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{what} must be a whole number")
    return value


def _values(values: Any) -> dict[str, Any]:
    if not isinstance(values, dict) or not values or len(values) > MAX_VALUES:
        raise Refused(f"values must be an object of 1 to {MAX_VALUES} keys")
    for key in values:
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS or not _KEY.match(key):
            raise Refused(f"key {str(key)[:60]!r} is not an MLflow key")
    return values


def _params(values: Any) -> dict[str, str]:
    out = {}
    for key, value in _values(values).items():
        if not isinstance(value, str):
            raise Refused(f"param {key!r} is not a text")
        out[key] = value[:MAX_PARAM_CHARS]
    return out


def _metrics(values: Any) -> dict[str, float]:
    out = {}
    for key, value in _values(values).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Refused(f"metric {key!r} is not a number")
        if not math.isfinite(value):
            raise Refused(f"metric {key!r} is not finite")
        out[key] = float(value)
    return out


def _tags(values: Any, *, nested: bool) -> dict[str, str]:
    out = {}
    if nested and not values:
        return out
    for key, value in _values(values).items():
        if not isinstance(value, str):
            raise Refused(f"tag {key!r} is not a text")
        if nested and key == vocab.TAG_KIND and value in _NESTED_KINDS:
            out[key] = value
            continue
        lowered = key.lower()
        if (
            key in RESERVED_TAGS
            or lowered.startswith(_RESERVED_PREFIXES)
            or "sha256" in lowered
            or "digest" in lowered
        ):
            raise Refused(f"tag {key!r} is reserved to mlpilot")
        out[key] = value[:MAX_TAG_CHARS]
    return out


def _relative(path: Any) -> str:
    """A relative path of plain names (no ``..``, no absolute path, no empty part)."""
    if not isinstance(path, str) or not path or len(path) > 500:
        raise Refused("a path must be a text of 1 to 500 characters")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(p in ("..", ".", "") for p in path.split("/")) or "\\" in path:
        raise Refused(f"path {path[:80]!r} is not relative and plain")
    return str(pure)


def _staged(path: Any) -> str:
    return f"{protocol.STAGED_DIR}/{_relative(path)}"


def _dataset(dataset: Any) -> dict[str, Any]:
    if not isinstance(dataset, dict) or set(dataset) - {
        "source",
        "digest",
        "rows",
        "columns",
        "targets",
    }:
        raise Refused("dataset must hold source, digest, rows, columns, targets")
    columns = dataset.get("columns")
    if not isinstance(columns, list) or len(columns) > 100_000:
        raise Refused("dataset columns must be a list")
    pairs = []
    for pair in columns:
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        ):
            raise Refused("each dataset column must be [name, type]")
        pairs.append((pair[0][:500], pair[1][:50]))
    targets = dataset.get("targets")
    return {
        "source": _text(dataset.get("source"), "source", 2000),
        "digest": _text(dataset.get("digest"), "digest", 200),
        "rows": _int(dataset.get("rows"), "rows") or 0,
        "columns": pairs,
        "targets": None if targets is None else _text(targets, "targets", 500),
    }


def plan_registrations(plan: dict[str, Any] | None) -> tuple[Registration, ...]:
    """The registrations a plan's ``register_model`` steps ask for."""
    found = []
    for step in (plan or {}).get("steps") or []:
        if step.get("tool") == "register_model":
            args = step.get("args") or {}
            found.append(Registration(str(args.get("name")), args.get("alias"), args.get("run_id")))
    return tuple(found)
