"""The pipeline's side of the Optuna storage proxy: a ``BaseStorage`` over a socketpair.

A contained pipeline has no access to the study's storage (the journal file, an RDB): the
parent passes it one end of a socketpair (its number in ``protocol.ENV_OPTUNA_FD``) and
serves the other end (``mlpilot.platform.execution.optuna_proxy``), applying only the calls
a pipeline needs, to the studies it may touch. Every message is a 4-byte big-endian length
and a JSON object — never pickle in either direction: ``{"m": method, "a": [args]}`` one
way, ``{"r": result}`` or ``{"e": kind, "msg": text}`` back. Trials, studies,
distributions, directions, states and datetimes have a JSON form here (``encode_trial``
and friends), shared by both sides.

The wrapper is thin on purpose: every call is one round trip, except finished trials,
which never change and so are kept here and not sent again (``get_all_trials``).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections.abc import Container, Sequence
from datetime import datetime
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import protocol

#: a request larger than this is refused by the parent (an out-of-fold attribute is about
#: 3 MB at most)
MAX_MESSAGE_BYTES = 32 * 2**20
#: the parent's answers may be larger: every trial of a resumed study, out-of-fold output too
MAX_REPLY_BYTES = 2**32 - 1
_HEADER = struct.Struct(">I")


class StorageRefused(MlpilotError):
    """The parent refused a storage call of this pipeline (outside its study, or unsafe)."""


# -- framing ----------------------------------------------------------------------------------
def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    sock.sendall(_HEADER.pack(len(data)) + data)


def receive_message(sock: socket.socket, limit: int = MAX_MESSAGE_BYTES) -> dict[str, Any] | None:
    """The next message, or None when the other side closed the connection."""
    header = _read_exactly(sock, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise StorageRefused(f"a storage message of {size} bytes is over {limit}")
    body = _read_exactly(sock, size)
    if body is None:
        return None
    message = json.loads(body.decode("utf-8"))
    if not isinstance(message, dict):
        raise StorageRefused("a storage message must be a JSON object")
    return message


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -- JSON forms ---------------------------------------------------------------------------------
def _when(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def encode_trial(trial: Any) -> dict[str, Any]:
    from optuna.distributions import distribution_to_json

    return {
        "id": trial._trial_id,
        "number": trial.number,
        "state": trial.state.name,
        "values": trial.values,
        "start": _when(trial.datetime_start),
        "complete": _when(trial.datetime_complete),
        "params": trial.params,
        "distributions": {k: distribution_to_json(d) for k, d in trial.distributions.items()},
        "user_attrs": trial.user_attrs,
        "system_attrs": trial.system_attrs,
        "intermediate": [[step, value] for step, value in trial.intermediate_values.items()],
    }


def decode_trial(data: dict[str, Any]) -> Any:
    from optuna.distributions import json_to_distribution
    from optuna.trial import FrozenTrial, TrialState

    return FrozenTrial(
        number=int(data["number"]),
        state=TrialState[data["state"]],
        value=None,
        values=data["values"],
        datetime_start=_moment(data["start"]),
        datetime_complete=_moment(data["complete"]),
        params=dict(data["params"]),
        distributions={k: json_to_distribution(d) for k, d in data["distributions"].items()},
        user_attrs=dict(data["user_attrs"]),
        system_attrs=dict(data["system_attrs"]),
        intermediate_values={int(step): value for step, value in data["intermediate"]},
        trial_id=int(data["id"]),
    )


def encode_study(study: Any) -> dict[str, Any]:
    return {
        "name": study.study_name,
        "directions": [d.name for d in study.directions],
        "user_attrs": study.user_attrs,
        "system_attrs": study.system_attrs,
        "id": study._study_id,
    }


def decode_study(data: dict[str, Any]) -> Any:
    from optuna.study import StudyDirection
    from optuna.study._frozen import FrozenStudy

    return FrozenStudy(
        study_name=str(data["name"]),
        direction=None,
        directions=[StudyDirection[d] for d in data["directions"]],
        user_attrs=dict(data["user_attrs"]),
        system_attrs=dict(data["system_attrs"]),
        study_id=int(data["id"]),
    )


# -- the storage --------------------------------------------------------------------------------
def _errors() -> dict[str, type[Exception]]:
    from optuna.exceptions import DuplicatedStudyError, UpdateFinishedTrialError

    return {
        "KeyError": KeyError,
        "ValueError": ValueError,
        "RuntimeError": RuntimeError,
        "DuplicatedStudyError": DuplicatedStudyError,
        "UpdateFinishedTrialError": UpdateFinishedTrialError,
    }


def _storage_base() -> tuple[type, ...]:
    from optuna.storages import BaseStorage
    from optuna.storages._heartbeat import BaseHeartbeat

    return BaseStorage, BaseHeartbeat


def _make_class() -> type:
    base, heartbeat = _storage_base()
    return type("ProxyStorage", (_ProxyMethods, base, heartbeat), {})


class _ProxyMethods:
    """Each storage call as one request to the parent (see the module's docstring)."""

    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=fd)
        self._lock = threading.Lock()  # the heartbeat thread calls in beside the study
        self._finished: dict[int, dict[int, Any]] = {}  # study id → trial id → trial
        self._hello = self._call("hello")

    def _call(self, method: str, *args: Any) -> Any:
        try:
            with self._lock:
                send_message(self._sock, {"m": method, "a": list(args)})
                reply = receive_message(self._sock, MAX_REPLY_BYTES)
        except OSError as exc:
            raise RuntimeError(f"the study's storage proxy closed the connection ({exc})") from None
        if reply is None:
            raise RuntimeError("the study's storage proxy closed the connection")
        if "e" in reply:
            kind, text = str(reply["e"]), str(reply.get("msg", ""))
            if kind == "refused":
                raise StorageRefused(text, hint="a pipeline reaches only its own study")
            raise _errors().get(kind, RuntimeError)(text)
        return reply.get("r")

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("the storage proxy is this process's own: it does not travel")

    @property
    def owner(self) -> dict[str, Any]:
        """Who the parent records as the owner of this pipeline's trials."""
        return dict(self._hello["owner"])

    # studies
    def create_new_study(self, directions: Sequence[Any], study_name: str | None = None) -> int:
        return int(self._call("create_new_study", [d.name for d in directions], study_name))

    def delete_study(self, study_id: int) -> None:
        self._call("delete_study", study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self._call("set_study_user_attr", study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self._call("set_study_system_attr", study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return int(self._call("get_study_id_from_name", study_name))

    def get_study_name_from_id(self, study_id: int) -> str:
        return str(self._call("get_study_name_from_id", study_id))

    def get_study_directions(self, study_id: int) -> list[Any]:
        from optuna.study import StudyDirection

        return [StudyDirection[d] for d in self._call("get_study_directions", study_id)]

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return dict(self._call("get_study_user_attrs", study_id))

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return dict(self._call("get_study_system_attrs", study_id))

    def get_all_studies(self) -> list[Any]:
        return [decode_study(s) for s in self._call("get_all_studies")]

    # trials
    def create_new_trial(self, study_id: int, template_trial: Any = None) -> int:
        template = encode_trial(template_trial) if template_trial is not None else None
        return int(self._call("create_new_trial", study_id, template))

    def set_trial_param(
        self, trial_id: int, param_name: str, param_value_internal: float, distribution: Any
    ) -> None:
        from optuna.distributions import distribution_to_json

        self._call(
            "set_trial_param",
            trial_id,
            param_name,
            param_value_internal,
            distribution_to_json(distribution),
        )

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return int(self._call("get_trial_id_from_study_id_trial_number", study_id, trial_number))

    def set_trial_state_values(
        self, trial_id: int, state: Any, values: Sequence[float] | None = None
    ) -> bool:
        return bool(
            self._call(
                "set_trial_state_values",
                trial_id,
                state.name,
                list(values) if values is not None else None,
            )
        )

    def set_trial_intermediate_value(
        self, trial_id: int, step: int, intermediate_value: float
    ) -> None:
        self._call("set_trial_intermediate_value", trial_id, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._call("set_trial_user_attr", trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._call("set_trial_system_attr", trial_id, key, value)

    def get_trial(self, trial_id: int) -> Any:
        return decode_trial(self._call("get_trial", trial_id))

    def get_all_trials(
        self,
        study_id: int,
        deepcopy: bool = True,
        states: Container[Any] | None = None,
    ) -> list[Any]:
        # finished trials never change: the parent sends each one once
        cache = self._finished.setdefault(study_id, {})
        fresh = self._call("get_all_trials", study_id, sorted(cache))
        trials = {tid: trial for tid, trial in cache.items()}
        for data in fresh:
            trial = decode_trial(data)
            trials[trial._trial_id] = trial
            if trial.state.is_finished():
                cache[trial._trial_id] = trial
        ordered = sorted(trials.values(), key=lambda t: t.number)
        if states is not None:
            ordered = [t for t in ordered if t.state in states]
        if deepcopy:
            import copy

            return copy.deepcopy(ordered)
        return ordered

    # heartbeats (RDB storage): forwarded; a journal answers "no interval"
    def record_heartbeat(self, trial_id: int) -> None:
        self._call("record_heartbeat", trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return [int(i) for i in self._call("get_stale_trial_ids", study_id)]

    def get_heartbeat_interval(self) -> int | None:
        return self._hello.get("heartbeat_interval")

    def get_heartbeat_stale_trial_callback(self) -> Any:
        return None


_PROXY: dict[int, Any] = {}


def proxy_fd() -> int | None:
    """The descriptor of the parent's storage proxy, when this process was given one."""
    value = os.environ.get(protocol.ENV_OPTUNA_FD, "")
    return int(value) if value.isdigit() else None


def open_proxy(fd: int) -> Any:
    """The process's one storage proxy on ``fd`` (every study of the process shares it)."""
    if fd not in _PROXY:
        _PROXY[fd] = _make_class()(fd)
    return _PROXY[fd]


__all__ = [
    "MAX_MESSAGE_BYTES",
    "StorageRefused",
    "decode_study",
    "decode_trial",
    "encode_study",
    "encode_trial",
    "open_proxy",
    "proxy_fd",
    "receive_message",
    "send_message",
]
