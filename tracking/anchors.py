"""Trust anchors: the digests mlpilot checks models and scripts against (DESIGN §8).

A digest is only worth what its storage is: MLflow's store and the run folders can be
written by pipelines (and, as root, every home's pipelines share one account), so the
digests a load or a re-run is checked against live here, in the home's owner-only
``private/anchors`` folder (0700), one small JSON file per entry, written under a fresh
name and renamed in, read without following links. A model's entry is keyed by the
tracking URI and the logged model's id (a home trusts only what it recorded itself, for
the store it recorded it from); a script's by the absolute path of its run folder.

Reading needs the owner's access: a pipeline process (the ``mlpilot-run`` account) cannot
read the folder, and says so rather than pretending nothing was recorded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import TrackingError
from mlpilot.tracking.runfolder import RunFolder, UnsafeFile

if TYPE_CHECKING:
    from mlpilot.platform.config import Settings

logger = logging.getLogger(__name__)

ANCHORS_DIR = "anchors"
_MODELS = "models"
_SCRIPTS = "scripts"
#: an entry holds a few hundred digests at most
_ENTRY_LIMIT = 1 << 20


class AnchorsUnreadable(TrackingError):
    """This process may not read the home's private store (a pipeline's account)."""


class AnchorStore:
    """The anchors of one home (``Settings.private_dir / "anchors"``)."""

    def __init__(self, private_dir: Path, settings: Settings | None = None) -> None:
        self.private_dir = private_dir
        self.folder = private_dir / ANCHORS_DIR
        self._settings = settings

    @classmethod
    def of(cls, settings: Settings) -> AnchorStore:
        return cls(settings.private_dir, settings)

    @classmethod
    def current(cls) -> AnchorStore:
        from mlpilot.platform.config import get_settings

        return cls.of(get_settings())

    # -- access ---------------------------------------------------------------------------
    def readable(self) -> bool:
        """Whether this process may read the store (an absent store reads as empty)."""
        if not self.private_dir.exists():
            return True  # nothing recorded yet (or nothing this account can even see)
        return os.access(self.private_dir, os.R_OK | os.X_OK)

    def _read(self, kind: str, key: dict[str, str]) -> dict[str, Any] | None:
        if not self.readable():
            raise AnchorsUnreadable(
                f"the digests are in {self.folder}, which this account cannot read",
                hint="pipelines never read mlpilot's private store: "
                "check models and scripts through mlpilot itself",
            )
        if not (self.folder / kind).is_dir():
            return None
        try:
            with RunFolder(self.folder / kind) as folder:
                raw = folder.read_bytes(_entry_name(key), _ENTRY_LIMIT)
        except (UnsafeFile, OSError) as exc:
            raise TrackingError(
                f"cannot read a trust anchor in {self.folder / kind}: {exc}",
                hint="mlpilot doctor checks the home; the entry may be recorded again",
            ) from None
        if raw is None:
            return None
        entry = json.loads(raw)
        # the name is a hash of the key: an entry that is not its key's is not trusted
        return entry if {k: entry.get(k) for k in key} == key else None

    def _write(self, kind: str, key: dict[str, str], fields: dict[str, Any]) -> None:
        self._ensure(kind)
        entry = {**key, **fields, "recorded_at": time.time()}
        with RunFolder(self.folder / kind) as folder:
            folder.write_new(_entry_name(key), json.dumps(entry, sort_keys=True), mode=0o600)

    def _ensure(self, kind: str) -> None:
        if self._settings is not None:
            from mlpilot.tracking.metadata import private_dir

            private_dir(self._settings)  # made owner-only (and old homes moved in) once
        else:
            self.private_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.folder, self.folder / kind):
            folder.mkdir(exist_ok=True, mode=0o700)
            folder.chmod(0o700)

    # -- models ---------------------------------------------------------------------------
    def model_digests(self, tracking_uri: str, model_key: str) -> dict[str, str] | None:
        """The digests this home recorded for ``model_key`` of ``tracking_uri``, if any."""
        entry = self._read(_MODELS, _model_key(tracking_uri, model_key))
        return dict(entry["digests"]) if entry else None

    def record_model(
        self, tracking_uri: str, model_key: str, digests: dict[str, str], run_id: str | None
    ) -> None:
        self._write(
            _MODELS, _model_key(tracking_uri, model_key), {"digests": digests, "run_id": run_id}
        )

    # -- scripts --------------------------------------------------------------------------
    def script_digest(self, run_dir: Path) -> str | None:
        """The SHA-256 recorded for the ``pipeline.py`` of ``run_dir``, if any."""
        entry = self._read(_SCRIPTS, {"run_dir": str(run_dir)})
        return str(entry["sha256"]) if entry else None

    def record_script(self, run_dir: Path, sha256: str, run_id: str | None = None) -> None:
        self._write(_SCRIPTS, {"run_dir": str(run_dir)}, {"sha256": sha256, "run_id": run_id})


def _model_key(tracking_uri: str, model_key: str) -> dict[str, str]:
    return {"tracking_uri": tracking_uri, "model": model_key}


def _entry_name(key: dict[str, str]) -> str:
    text = json.dumps(key, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40] + ".json"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- generated scripts --------------------------------------------------------------------
SCRIPT_LIMIT = 16 << 20  # far above any generated pipeline.py


def record_script(script: Path, source: str, run_id: str | None = None) -> None:
    """Anchor the ``pipeline.py`` the parent just wrote into its run folder (in the home
    the folder belongs to: ``HOME/runs/<folder>/pipeline.py``, as ``check_script`` reads)."""
    run_dir = script.parent.resolve()
    digest = sha256_bytes(source.encode("utf-8"))
    try:
        AnchorStore(run_dir.parent.parent / "private").record_script(run_dir, digest, run_id)
    except OSError as exc:
        raise TrackingError(f"cannot record the digest of {script}: {exc}") from None


def check_script(script: Path) -> str | None:
    """A hand-run ``pipeline.py``: None when it is the script its home recorded; a warning
    line when that cannot be told (a copy elsewhere, a store this account cannot read, a
    run from before scripts were recorded); ``TrackingError`` when it was changed."""
    run_dir = script.parent
    home = run_dir.parent.parent
    if run_dir.parent.name != "runs" or not (home / "private").is_dir():
        return f"{script} is not in an mlpilot home's run folder: its digest was not checked"
    store = AnchorStore(home / "private")
    if not store.readable():
        return f"cannot check {script}: this account cannot read {store.folder}"
    real = run_dir.resolve()
    changed = TrackingError(
        f"{script} is not the script mlpilot generated for this run: it was changed after "
        "it was written, and is not run",
        hint="do not run it; start a new run (mlpilot run), or copy the script out of the "
        "home and read it before running it",
    )
    if real.parent != (home / "runs").resolve():
        raise changed  # the run's folder is a link planted to lead somewhere else
    expected = store.script_digest(real)
    if expected is None:
        return f"{script} has no recorded digest (written before mlpilot recorded them)"
    try:
        with RunFolder(real) as folder:
            data = folder.read_bytes(script.name, SCRIPT_LIMIT)
    except UnsafeFile:
        raise changed from None  # a link, a folder, an oversized file
    if data is None or sha256_bytes(data) != expected:
        raise changed
    return None
