"""Out-of-fold output that travels through the study's storage, for the ensemble.

The parent of a time-budgeted search keeps its own best trials' out-of-fold output in
memory (``CVObjective.oof``). Trials run elsewhere — by ``mlpilot worker``, or on a Dask
cluster — leave their process with nothing but what the study's storage holds, so their
objective (``share_oof``) writes a trial's output into its user attributes instead:

- ``mlpilot.oof``: the output as float32, zlib-compressed and base64-encoded, with its
  shape (sqlite and PostgreSQL storages keep attributes as JSON text). Output larger than
  ``MAX_SHARED_VALUES`` values is not stored: the trial simply cannot join the ensemble.
- ``mlpilot.oof_folds``: a fingerprint of the folds it was scored on (row count, classes,
  target values, each fold's validation rows). The parent blends only output whose
  fingerprint is its own: predictions of other rows or another split cannot be mixed in.

Only a trial among the study's best at that moment is stored (``worth_sharing``), so the
storage does not fill with every trial's output. After the search the parent reads them
back (``shared_candidates``) and passes them through its own candidate rules.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import zlib
from collections.abc import Container, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mlpilot.platform.ml.ensemble import ENSEMBLE_CANDIDATES
from mlpilot.platform.ml.hpo.spaces import FAMILY_PARAM
from mlpilot.tracking import vocab

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

#: a trial's output with more values than this is not stored (about 2.7 MB of text)
MAX_SHARED_VALUES = 500_000
#: a trial's output is stored when fewer complete trials than this scored better
SHARE_BEST = 2 * ENSEMBLE_CANDIDATES
FINGERPRINT_CHARS = 16


def encode(output: np.ndarray) -> dict[str, Any] | None:
    """``output`` as a JSON-safe attribute value; None when it has too many values."""
    if output.size > MAX_SHARED_VALUES:
        logger.debug(
            "out-of-fold output of %d values is over %d: not stored", output.size, MAX_SHARED_VALUES
        )
        return None
    raw = np.ascontiguousarray(output, dtype="<f4").tobytes()
    return {
        "shape": list(output.shape),
        "dtype": "<f4",
        "data": base64.b64encode(zlib.compress(raw, 6)).decode("ascii"),
    }


def decode(value: dict[str, Any]) -> np.ndarray:
    """The float64 array ``encode`` stored (the ensemble sums in float64)."""
    raw = zlib.decompress(base64.b64decode(value["data"]))
    array = np.frombuffer(raw, dtype=value.get("dtype", "<f4"))
    return array.reshape(tuple(int(n) for n in value["shape"])).astype(np.float64)


def fingerprint(y: Any, splits: Sequence[tuple[Any, Any]], classes: Any = None) -> str:
    """A short digest of the folds: output scored on other rows or splits differs."""
    import pandas as pd

    target = pd.Series(np.asarray(y)).reset_index(drop=True)
    digest = hashlib.sha256()
    # the classes as text: the probabilities' columns follow them, whatever numpy prints
    labels = [str(c) for c in classes] if classes is not None else None
    digest.update(f"rows={len(target)};classes={labels}".encode())
    # a hash of the values, not of an object array's pointers
    digest.update(pd.util.hash_pandas_object(target, index=False).to_numpy().tobytes())
    for _, valid in splits:
        digest.update(b"|")
        digest.update(np.asarray(valid, dtype="<i8").tobytes())
    return digest.hexdigest()[:FINGERPRINT_CHARS]


def worth_sharing(
    study: optuna.Study, value: float, family: str, maximize: bool, per_family: int
) -> bool:
    """Whether a trial scoring ``value`` is among the study's best complete trials now:
    the best ``SHARE_BEST``, or the best ``per_family`` of its own family (the parent keeps
    a few of every family, so a weaker family's best may still join the blend)."""
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    better = [
        t
        for t in complete
        if t.value is not None and (t.value > value if maximize else t.value < value)
    ]
    if len(better) < SHARE_BEST:
        return True
    # a study of one model has no family parameter: every trial is of ``family``
    return sum(t.params.get(FAMILY_PARAM, family) == family for t in better) < per_family


def share(
    trial: optuna.Trial,
    output: np.ndarray,
    value: float,
    family: str,
    *,
    folds: str,
    maximize: bool,
    per_family: int,
) -> bool:
    """Store ``output`` in ``trial``'s attributes when it is worth it; whether it was."""
    if not worth_sharing(trial.study, value, family, maximize, per_family):
        return False
    encoded = encode(output)
    if encoded is None:
        return False
    try:
        trial.set_user_attr(vocab.ATTR_OOF_FOLDS, folds)
        trial.set_user_attr(vocab.ATTR_OOF, encoded)
    except Exception as exc:  # a storage that refuses the size: the trial itself still counts
        logger.debug("could not store trial %d's out-of-fold output: %s", trial.number, exc)
        return False
    return True


def shared_candidates(
    study: optuna.Study, folds: str, skip: Container[int], model: str, shape: tuple[int, ...]
) -> Iterator[tuple[int, float, np.ndarray, str]]:
    """(number, value, output, family) of the study's complete trials that stored output
    scored on the folds ``folds``, except those numbered in ``skip``; decoded one by one,
    so the caller can drop each before the next is read."""
    import optuna

    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        stored = trial.user_attrs.get(vocab.ATTR_OOF)
        if stored is None or trial.number in skip or trial.value is None:
            continue
        theirs = trial.user_attrs.get(vocab.ATTR_OOF_FOLDS)
        if theirs != folds:
            logger.debug(
                "trial %d's out-of-fold output was scored on other folds (%s, here %s): skipped",
                trial.number,
                theirs,
                folds,
            )
            continue
        try:
            output = decode(stored)
        except (KeyError, TypeError, ValueError, zlib.error) as exc:
            logger.debug(
                "trial %d's stored out-of-fold output is unreadable: %s", trial.number, exc
            )
            continue
        if output.shape != shape:
            logger.debug(
                "trial %d's output has shape %s, not %s", trial.number, output.shape, shape
            )
            continue
        family = str(trial.params.get(FAMILY_PARAM, model))
        yield trial.number, float(trial.value), output, family
