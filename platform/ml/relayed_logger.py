"""``RelayedRunLogger``: a pipeline's MLflow calls as records in its own run folder.

Under mlpilot a pipeline writes nothing shared (DESIGN §8): it may not open the MLflow
store. Each call becomes one ``protocol.LogRecord`` line appended to
``protocol.TRACKING_FILE``; files (texts, figures, the saved model) are staged below
``protocol.STAGED_DIR``. The parent (``agent/relay.py``) reads them while the pipeline runs
and at its end, checks each record and logs it to the run on the pipeline's behalf. Nested
runs (trials) are keys the pipeline picks; the parent maps them to MLflow run ids, so the
pipeline never learns or needs one. Same interface as ``MlflowRunLogger`` and
``NullRunLogger``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.protocol import LogRecord

logger = logging.getLogger(__name__)

_FILE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


class _Journal:
    """The record file and the staging folder of one run folder, shared by nested runs."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.staged = run_dir / protocol.STAGED_DIR
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)

    def append(self, record: LogRecord) -> None:
        # one write per line on an O_APPEND descriptor: the parent never reads half a record
        line = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.run_dir / protocol.TRACKING_FILE, _FILE_FLAGS, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def _next(self) -> str:
        # the pid keeps names apart when a leg reruns in the same folder (auto's CPU rerun)
        with self._lock:
            return f"{os.getpid()}-{next(self._numbers):04d}"

    def new_slot(self) -> tuple[str, Path]:
        """A fresh folder below the staging folder: (its name there, its path)."""
        name = self._next()
        path = self.staged / name
        path.mkdir(parents=True, exist_ok=False)
        return name, path

    def key(self) -> str:
        return f"run-{self._next()}"


def _split(artifact_file: str) -> tuple[str, str | None]:
    """``plots/roc.png`` → (``roc.png``, ``plots``)."""
    path = PurePosixPath(artifact_file)
    folder = str(path.parent)
    return path.name, (None if folder in ("", ".") else folder)


class RelayedRunLogger:
    """Logs to the run folder; the parent logs to MLflow (``agent/relay.py``)."""

    run_id: str | None = None  # the pipeline never knows its MLflow run
    experiment_id: str | None = None
    tracking_uri: str | None = None
    relayed = True

    def __init__(self, run_dir: Path, *, key: str | None = None, journal: _Journal | None = None):
        self._journal = journal or _Journal(Path(run_dir))
        self.key = key
        self.model_digests: dict[str, str] | None = None  # the parent computes them

    def _append(self, kind: str, **fields: Any) -> None:
        self._journal.append(LogRecord(type=kind, run=self.key, **fields))

    # -- values ---------------------------------------------------------------------------
    def log_params(self, params: dict[str, Any]) -> None:
        values = {
            str(k): v if isinstance(v, str) else json.dumps(v, default=str, ensure_ascii=False)
            for k, v in params.items()
        }
        if values:
            self._append("params", values=values)

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        values = {
            str(k): float(v)
            for k, v in metrics.items()
            if v is not None and float(v) == float(v)  # NaN is not logged
        }
        if values:
            self._append("metrics", values=values, step=int(step))

    def set_tags(self, tags: dict[str, Any]) -> None:
        values = {str(k): str(v) for k, v in tags.items() if v is not None}
        if values:
            self._append("tags", values=values)

    def flush(self) -> None: ...  # every call is written as it is made

    # -- artifacts ------------------------------------------------------------------------
    def _stage(self, write: Any, artifact_file: str) -> None:
        name, folder = _split(artifact_file)
        slot, path = self._journal.new_slot()
        write(path / name)
        self._append("artifact", path=f"{slot}/{name}", artifact_path=folder)

    def log_text(self, text: str, artifact_file: str) -> None:
        self._stage(lambda p: p.write_text(text, encoding="utf-8"), artifact_file)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.log_text(json.dumps(data, indent=2, default=str, ensure_ascii=False), artifact_file)

    def log_file(self, local_path: str | Path, artifact_dir: str | None = None) -> None:
        source = Path(local_path)
        target = f"{artifact_dir}/{source.name}" if artifact_dir else source.name
        self._stage(lambda p: shutil.copyfile(source, p), target)

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        self._stage(lambda p: figure.savefig(p), artifact_file)

    def log_input(
        self,
        *,
        name: str,
        source: str,
        digest: str,
        rows: int,
        columns: list[tuple[str, str]],
        targets: str | None = None,
    ) -> None:
        dataset = {
            "source": source,
            "digest": digest,
            "rows": int(rows),
            "columns": [[str(c), str(t)] for c, t in columns],
            "targets": targets,
        }
        self._append("input", name=name, dataset=dataset)

    def log_model(
        self, model: Any, *, signature: Any = None, input_example: Any = None
    ) -> str | None:
        """Save the whole Pipeline into the staging folder; the parent logs it.

        Returns None: the ``models:/m-…`` URI exists once the parent has logged it.
        """
        import mlflow.sklearn

        from mlpilot.platform.config import get_settings
        from mlpilot.tracking.packages import seed_mlflow
        from mlpilot.tracking.run_logger import model_requirements

        seed_mlflow(get_settings().home)  # saves MLflow a scan of every installed package
        logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
        slot, path = self._journal.new_slot()
        mlflow.sklearn.save_model(
            model,
            path=str(path / "model"),
            signature=signature,
            input_example=input_example,
            # cloudpickle is deliberate: the Pipeline holds mlpilot's own transformers
            serialization_format="cloudpickle",
            pip_requirements=model_requirements(model),
        )
        self._append("model", path=f"{slot}/model")
        return None

    def register(
        self,
        name: str,
        *,
        alias: str | None,
        source_run: str | None,
        metric: str | None,
        lineage: dict[str, str],
    ) -> None:
        """Ask the parent to register this run's model (or ``source_run``'s) as ``name``."""
        self._append(
            "register",
            name=name,
            alias=alias,
            source_run=source_run,
            metric=metric,
            lineage=lineage,
        )

    # -- runs -----------------------------------------------------------------------------
    def child(
        self, name: str, tags: dict[str, str] | None = None, *, start_ms: int | None = None
    ) -> RelayedRunLogger:
        """A nested run under this one, known by a key of this pipeline's choosing."""
        key = self._journal.key()
        self._journal.append(
            LogRecord(
                type="start_run",
                run=key,
                name=name,
                tags={str(k): str(v) for k, v in (tags or {}).items()},
                start_ms=start_ms,
            )
        )
        return RelayedRunLogger(self._journal.run_dir, key=key, journal=self._journal)

    def end(self, status: str = "FINISHED", *, end_ms: int | None = None) -> None:
        if self.key is not None:  # the pipeline's own run is ended by the parent
            self._append("end_run", status=status, end_ms=end_ms)
