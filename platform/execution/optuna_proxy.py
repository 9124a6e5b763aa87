"""The parent's side of the Optuna storage proxy: one thread per leg, a policy per call.

A contained pipeline never opens the study's storage (DESIGN §8): it gets one end of a
socketpair (``pass_fds``; its number in ``protocol.ENV_OPTUNA_FD``) and speaks the JSON
protocol of ``mlpilot.platform.ml.hpo.proxy``. Here a thread applies each call to the real
storage (journal file or RDB), opened on the first call, when the policy allows it:

- studies: only the names the plan gives this leg (``StudyPolicy``: the name
  ``spec.default_study_name`` gives it, or one it created itself); never ``delete_study``;
  other studies are invisible.
- trials: every write to the trials this leg created (or took from the queue); of other
  trials of its studies only what recovery does — mark a RUNNING trial FAIL, with its reason.
- attributes: sizes capped; the study recipe (``vocab.ATTR_SPEC``) is checked by
  ``spec.check_recipe`` against the runtime functions of the plan's own steps; the trial
  owner is always the parent (the pipeline dies with it).

Anything else goes back as a refusal (the pipeline raises it, one line) and is logged here.
When the leg ends, trials it left RUNNING are marked FAIL.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.hpo import proxy as P
from mlpilot.platform.ml.hpo.spec import check_recipe
from mlpilot.platform.ml.hpo.storage import is_rdb, open_storage, owner_record, redact
from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)

#: a study or trial attribute larger than this (as JSON) is refused
MAX_ATTR_BYTES = 64 * 1024
#: a trial's out-of-fold output for the ensemble (``oof_store``) may be this large
MAX_OOF_BYTES = 8 * 2**20
MAX_KEY_CHARS = 256
MAX_REASON_CHARS = 2000
#: the suffix ``default_study_name`` gives a study of a run without an MLflow run
_UNTRACKED_SUFFIX = r"\d{8}-\d{6}-[0-9a-f]{4}"
_ACL_ACCESS, _ACL_DEFAULT = "system.posix_acl_access", "system.posix_acl_default"


class Refused(Exception):
    """A call the policy does not allow (sent back as a refusal)."""


@dataclass
class StudyPolicy:
    """Which studies a leg may create or load, and which step functions its recipe may name."""

    #: ``<target>-<model>-`` prefixes, one per optimize step (target None: any)
    targets: list[str | None] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    functions: frozenset[str] = frozenset()
    run_id: str | None = None
    #: studies it may load by exact name (a worker's one study); it creates none of them
    names: frozenset[str] = frozenset()

    @classmethod
    def for_script(cls, script: Path, run_id: str | None = None) -> StudyPolicy:
        """The policy of the pipeline ``script`` (its PLAN and RUNTIME literals)."""
        plan, runtime = _script_literals(script)
        steps = [s for s in (plan or {}).get("steps", []) if isinstance(s, dict)]
        models = [
            str((s.get("args") or {}).get("model") or "auto")
            for s in steps
            if s.get("tool") == "optimize_model"
        ]
        targets = [
            (s.get("args") or {}).get("target") for s in steps if s.get("tool") == "load_data"
        ]
        functions = frozenset(
            str(info["function"])
            for info in (runtime or {}).values()
            if isinstance(info, dict) and isinstance(info.get("function"), str)
        )
        return cls(targets=targets or [None], models=models, functions=functions, run_id=run_id)

    def _pattern(self, suffix: str) -> re.Pattern[str]:
        targets = "|".join(re.escape(str(t)) if t else ".+" for t in self.targets) or ".+"
        models = "|".join(re.escape(m) for m in self.models) or "(?!)"
        return re.compile(rf"(?:{targets})-(?:{models})-{suffix}")

    def may_load(self, name: str) -> bool:
        """A study this leg's own request names (found again by its MLflow run id)."""
        if name in self.names:
            return True
        if not self.run_id:
            return False
        return self._pattern(re.escape(self.run_id[:8])).fullmatch(name) is not None

    def may_create(self, name: str) -> bool:
        """Also a fresh study of an untracked leg (its name holds a timestamp)."""
        if name in self.names:
            return False
        return self.may_load(name) or self._pattern(_UNTRACKED_SUFFIX).fullmatch(name) is not None


def _script_literals(script: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """PLAN and RUNTIME of a generated pipeline, read as literals (nothing runs)."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as exc:
        logger.debug("no plan in %s: %s", script, exc)
        return None, None
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("PLAN", "RUNTIME"):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    plan, runtime = found.get("PLAN"), found.get("RUNTIME")
    return (
        plan if isinstance(plan, dict) else None,
        runtime if isinstance(runtime, dict) else None,
    )


def _size(value: Any) -> int:
    try:
        return len(json.dumps(value))
    except (TypeError, ValueError):
        raise Refused("the value is not JSON") from None


class StorageProxy:
    """Serves one leg's storage calls on a thread (see the module's docstring)."""

    def __init__(
        self, storage_url: str, policy: StudyPolicy, *, opener: Callable[[str], Any] = open_storage
    ) -> None:
        from mlpilot.platform.ml.hpo.session import quiet_optuna

        quiet_optuna()  # Optuna's "A new study created" lines would cut into the run's progress
        self.storage_url, self.policy = storage_url, policy
        self._opener = opener
        self._storage: Any = None
        parent, child = socket.socketpair()
        self._sock = parent
        #: the child's end, as a bare descriptor: ``ChildSetup.close_fds`` closes our copy
        self.child_fd = child.detach()
        self.studies: dict[int, str] = {}
        self.trial_study: dict[int, int] = {}
        self.own: set[int] = set()
        self.refusals: list[str] = []
        self.owner = owner_record()
        self._thread = threading.Thread(target=self._serve, name="optuna-proxy", daemon=True)
        self._closed = False
        #: why the storage is not served (every call is refused with it)
        self.unavailable: str | None = None

    @property
    def env(self) -> dict[str, str]:
        # the storage as recorded: the child never gets an RDB password
        return {
            protocol.ENV_OPTUNA_FD: str(self.child_fd),
            protocol.ENV_OPTUNA_STORAGE: redact(self.storage_url),
        }

    def start(self) -> StorageProxy:
        self._thread.start()
        return self

    def allow_run(self, run_id: str) -> None:
        """The leg's MLflow run exists now: its study name is known."""
        self.policy.run_id = run_id

    def close(self) -> None:
        """Stop serving, and mark FAIL the trials the leg left RUNNING."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError as exc:
            logger.debug("the proxy's socket was closed already: %s", exc)
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._sock.close()
        self._fail_left_running()

    # -- serving ----------------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            try:
                message = P.receive_message(self._sock)
            except (OSError, ValueError, P.StorageRefused) as exc:
                logger.warning("the pipeline's storage connection ended: %s", exc)
                with contextlib.suppress(OSError):  # the pipeline sees the end, not a hang
                    self._sock.shutdown(socket.SHUT_RDWR)
                return
            if message is None:
                return
            started = time.perf_counter()
            answer = self._answer(message)
            logger.debug(
                "storage call %s: %.1f ms", message.get("m"), 1e3 * (time.perf_counter() - started)
            )
            try:
                P.send_message(self._sock, answer)
            except OSError as exc:
                logger.debug("the pipeline went away before its answer: %s", exc)
                return

    def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        from optuna.exceptions import DuplicatedStudyError, UpdateFinishedTrialError

        method, args = message.get("m"), message.get("a")
        handler = getattr(self, f"_m_{method}", None) if isinstance(method, str) else None
        if self.unavailable is not None:
            return {"e": "refused", "msg": self.unavailable}
        try:
            if handler is None or not isinstance(args, list):
                raise Refused(f"the storage call {str(method)[:80]!r} is not one a pipeline makes")
            return {"r": handler(*args)}
        except Refused as exc:
            text = f"the study storage refused {method}: {exc}"
            logger.warning("%s", text)
            self.refusals.append(text)
            return {"e": "refused", "msg": text}
        except TypeError as exc:  # wrong arguments from the pipeline
            return {"e": "refused", "msg": f"{method}: {exc}"}
        except (DuplicatedStudyError, UpdateFinishedTrialError, KeyError) as exc:
            # what Optuna itself catches (load_if_exists, a trial finished meanwhile)
            return {"e": type(exc).__name__, "msg": str(exc.args[0] if exc.args else exc)}
        except (ValueError, RuntimeError) as exc:
            kind = "ValueError" if isinstance(exc, ValueError) else "RuntimeError"
            return {"e": kind, "msg": str(exc)}
        except Exception as exc:  # the storage's own trouble: the pipeline sees one line
            logger.warning("storage call %s failed: %s", method, exc)
            return {"e": "RuntimeError", "msg": f"{type(exc).__name__}: {exc}"}

    @property
    def storage(self) -> Any:
        if self._storage is None:
            self._storage = self._opener(self.storage_url)
        return self._storage

    # -- checks -----------------------------------------------------------------------------
    def _study(self, study_id: Any) -> int:
        if not isinstance(study_id, int) or study_id not in self.studies:
            raise Refused(f"study id {study_id!r} is not this pipeline's study")
        return study_id

    def _trial(self, trial_id: Any) -> int:
        if not isinstance(trial_id, int) or trial_id not in self.trial_study:
            raise Refused(f"trial id {trial_id!r} is not a trial of this pipeline's study")
        return trial_id

    def _mine(self, trial_id: Any) -> int:
        if self._trial(trial_id) not in self.own:
            raise Refused(f"trial id {trial_id} belongs to another process")
        return trial_id

    @staticmethod
    def _attr(key: Any, value: Any, limit: int = MAX_ATTR_BYTES) -> None:
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
            raise Refused("an attribute name must be a short string")
        size = _size(value)
        if size > limit:
            raise Refused(f"attribute {key[:60]!r} is {size} bytes, over {limit}")

    def _see(self, study_id: int, trials: list[Any]) -> None:
        for trial in trials:
            self.trial_study[trial._trial_id] = study_id

    # -- studies ----------------------------------------------------------------------------
    def _m_hello(self) -> dict[str, Any]:
        from optuna.storages._heartbeat import is_heartbeat_enabled

        storage = self.storage
        interval = storage.get_heartbeat_interval() if is_heartbeat_enabled(storage) else None
        return {"owner": self.owner, "heartbeat_interval": interval}

    def _m_create_new_study(self, directions: list[str], study_name: Any = None) -> int:
        from optuna.study import StudyDirection

        if not isinstance(study_name, str) or not self.policy.may_create(study_name):
            raise Refused(f"study {str(study_name)[:80]!r} is not the study of this run")
        study_id = self.storage.create_new_study(
            [StudyDirection[str(d)] for d in directions], study_name
        )
        self.studies[study_id] = study_name
        return study_id

    def _m_delete_study(self, study_id: Any) -> None:
        raise Refused("a pipeline deletes no study")

    def _m_get_study_id_from_name(self, study_name: Any) -> int:
        mine = study_name in self.studies.values()
        if not isinstance(study_name, str) or not (mine or self.policy.may_load(study_name)):
            raise Refused(f"study {str(study_name)[:80]!r} is not the study of this run")
        study_id = self.storage.get_study_id_from_name(study_name)
        self.studies[study_id] = study_name
        return study_id

    def _m_get_study_name_from_id(self, study_id: Any) -> str:
        return self.studies[self._study(study_id)]

    def _m_get_study_directions(self, study_id: Any) -> list[str]:
        return [d.name for d in self.storage.get_study_directions(self._study(study_id))]

    def _m_get_study_user_attrs(self, study_id: Any) -> dict[str, Any]:
        return self.storage.get_study_user_attrs(self._study(study_id))

    def _m_get_study_system_attrs(self, study_id: Any) -> dict[str, Any]:
        return self.storage.get_study_system_attrs(self._study(study_id))

    def _m_get_all_studies(self) -> list[dict[str, Any]]:
        return [
            P.encode_study(s) for s in self.storage.get_all_studies() if s._study_id in self.studies
        ]

    def _m_set_study_user_attr(self, study_id: Any, key: Any, value: Any) -> None:
        self._study(study_id)
        self._attr(key, value)
        if key == vocab.ATTR_SPEC:
            try:
                check_recipe(value, self.policy.functions)
            except Exception as exc:
                raise Refused(str(getattr(exc, "message", exc))) from None
        self.storage.set_study_user_attr(study_id, key, value)

    def _m_set_study_system_attr(self, study_id: Any, key: Any, value: Any) -> None:
        self._study(study_id)
        self._attr(key, value)
        self.storage.set_study_system_attr(study_id, key, value)

    # -- trials -----------------------------------------------------------------------------
    def _m_create_new_trial(self, study_id: Any, template: Any = None) -> int:
        self._study(study_id)
        frozen = None
        if template is not None:
            if not isinstance(template, dict):
                raise Refused("a trial template is a JSON object")
            for key, value in {
                **template.get("user_attrs", {}),
                **template.get("system_attrs", {}),
            }.items():
                self._attr(key, value)
            frozen = P.decode_trial(template)
        trial_id = self.storage.create_new_trial(study_id, template_trial=frozen)
        self.trial_study[trial_id] = study_id
        self.own.add(trial_id)
        return trial_id

    def _m_get_trial_id_from_study_id_trial_number(self, study_id: Any, number: Any) -> int:
        self._study(study_id)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, int(number))
        self.trial_study[trial_id] = study_id
        return trial_id

    def _m_set_trial_param(self, trial_id: Any, name: Any, value: Any, distribution: Any) -> None:
        from optuna.distributions import json_to_distribution

        self._mine(trial_id)
        if (
            not isinstance(name, str)
            or len(name) > MAX_KEY_CHARS
            or not isinstance(distribution, str)
        ):
            raise Refused("a parameter needs a short name and a distribution")
        self.storage.set_trial_param(
            trial_id, name, float(value), json_to_distribution(distribution)
        )

    def _m_set_trial_state_values(self, trial_id: Any, state: Any, values: Any = None) -> bool:
        from optuna.trial import TrialState

        new = TrialState[str(state)]
        self._trial(trial_id)
        if values is not None:
            values = [float(v) for v in values]
        if trial_id not in self.own:
            current = self.storage.get_trial(trial_id).state
            taking = new == TrialState.RUNNING and current == TrialState.WAITING
            reaping = new == TrialState.FAIL and current == TrialState.RUNNING and values is None
            if not (taking or reaping):
                raise Refused(f"trial id {trial_id} belongs to another process")
            done = self.storage.set_trial_state_values(trial_id, new, values)
            if taking and done:
                self.own.add(trial_id)
            return done
        return self.storage.set_trial_state_values(trial_id, new, values)

    def _m_set_trial_intermediate_value(self, trial_id: Any, step: Any, value: Any) -> None:
        self.storage.set_trial_intermediate_value(self._mine(trial_id), int(step), float(value))

    def _m_set_trial_user_attr(self, trial_id: Any, key: Any, value: Any) -> None:
        from optuna.trial import TrialState

        self._trial(trial_id)
        if trial_id not in self.own:
            # recovery: the reason a dead process's trial is marked FAIL, said first
            running = self.storage.get_trial(trial_id).state == TrialState.RUNNING
            if key != vocab.ATTR_FAIL_REASON or not running or not isinstance(value, str):
                raise Refused(f"trial id {trial_id} belongs to another process")
            value = value[:MAX_REASON_CHARS]
        if key == vocab.ATTR_WORKER:
            value = self.owner  # the parent owns its pipeline's trials, whatever it claims
        self._attr(key, value, MAX_OOF_BYTES if key == vocab.ATTR_OOF else MAX_ATTR_BYTES)
        self.storage.set_trial_user_attr(trial_id, key, value)

    def _m_set_trial_system_attr(self, trial_id: Any, key: Any, value: Any) -> None:
        self._mine(trial_id)
        self._attr(key, value)
        self.storage.set_trial_system_attr(trial_id, key, value)

    def _m_get_trial(self, trial_id: Any) -> dict[str, Any]:
        return P.encode_trial(self.storage.get_trial(self._trial(trial_id)))

    def _m_get_all_trials(self, study_id: Any, known: Any = ()) -> list[dict[str, Any]]:
        self._study(study_id)
        trials = self.storage.get_all_trials(study_id, deepcopy=False)
        self._see(study_id, trials)
        skip = set(known) if isinstance(known, list) else set()
        # the pipeline keeps finished trials it was sent: only the others travel
        return [
            P.encode_trial(t)
            for t in trials
            if t._trial_id not in skip or not t.state.is_finished()
        ]

    # -- heartbeats (RDB) -------------------------------------------------------------------
    def _m_record_heartbeat(self, trial_id: Any) -> None:
        self.storage.record_heartbeat(self._mine(trial_id))

    def _m_get_stale_trial_ids(self, study_id: Any) -> list[int]:
        ids = list(self.storage._get_stale_trial_ids(self._study(study_id)))
        for trial_id in ids:
            self.trial_study[trial_id] = study_id
        return ids

    # -- the end ----------------------------------------------------------------------------
    def _fail_left_running(self) -> None:
        """A pipeline that died mid-trial leaves it RUNNING: its leg is over, so it failed."""
        if not self.own or self._storage is None:
            return
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        for trial_id in sorted(self.own):
            try:
                if self.storage.get_trial(trial_id).state != TrialState.RUNNING:
                    continue
                self.storage.set_trial_user_attr(
                    trial_id, vocab.ATTR_FAIL_REASON, "the pipeline ended while the trial ran"
                )
                self.storage.set_trial_state_values(trial_id, TrialState.FAIL)
            except (UpdateFinishedTrialError, RuntimeError, KeyError) as exc:
                logger.debug("trial %d finished meanwhile: %s", trial_id, exc)


def keep_journal_private(storage_url: str) -> None:
    """The journal's folder and files writable by mlpilot alone, before a pipeline starts.

    ``$MLPILOT_HOME`` is shared with the pipelines' group (the sqlite MLflow store), and a
    folder created in it inherits that share; before the proxy, mlpilot shared the journal's
    folder on purpose and pipelines created files there. Both are undone here: files of
    another owner are taken back, group and other write access and ACLs removed. A link
    there is refused: the parent would open whatever it points to.
    """
    if is_rdb(storage_url) or os.geteuid() != 0:
        return
    folder = Path(storage_url).expanduser().parent
    folder.mkdir(parents=True, exist_ok=True)
    for path in (folder, *folder.iterdir()):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or not (
            stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)
        ):
            raise MlpilotError(
                f"{path} is not a plain file or folder: the Optuna storage is not used",
                hint="remove it (a pipeline may have planted it) or set MLPILOT_OPTUNA_STORAGE",
            )
        if info.st_uid != os.geteuid():
            logger.warning("%s belonged to uid %d: taken back by mlpilot", path, info.st_uid)
            os.chown(path, os.geteuid(), os.getegid(), follow_symlinks=False)
        for name in (_ACL_ACCESS, _ACL_DEFAULT):
            with contextlib.suppress(OSError):  # no ACL of that kind (or none on this fs)
                os.removexattr(path, name, follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode) & ~(
            stat.S_IWGRP | stat.S_IWOTH | stat.S_ISGID | stat.S_ISUID
        )
        os.chmod(path, mode)  # links were refused above


def start_proxy(
    settings: Any, script: Path, run_id: str | None = None, *, policy: StudyPolicy | None = None
) -> StorageProxy:
    """The storage proxy of one leg, serving: ``policy``, else the one read from ``script``."""
    policy = policy or StudyPolicy.for_script(script, run_id)
    proxy = StorageProxy(settings.optuna_storage, policy)
    try:
        keep_journal_private(settings.optuna_storage)
    except (MlpilotError, OSError) as exc:  # the leg runs; only its storage calls fail
        proxy.unavailable = exc.one_line() if isinstance(exc, MlpilotError) else str(exc)
        logger.warning("the Optuna storage is not served: %s", proxy.unavailable)
    return proxy.start()


__all__ = ["MAX_ATTR_BYTES", "StorageProxy", "StudyPolicy", "keep_journal_private", "start_proxy"]
