"""Run by each dask-cuda worker of a GPU study (``preload``): turn cuml.accel on there.

cudf.pandas cannot be installed in a Dask worker (pandas is imported long before a
preload runs); trials only need the estimators accelerated, and their data arrives as
frames already. The objective checks the engine of the process that scores each trial.
"""

from __future__ import annotations

from typing import Any


def dask_setup(worker: Any) -> None:
    import cuml.accel

    cuml.accel.install()
