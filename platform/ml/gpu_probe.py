"""The GPU probe: run exactly as a GPU leg runs, it proves the GPU engine works here.

mlpilot starts it as ``python -m cudf.pandas -m cuml.accel gpu_probe.py`` with the
pipelines' scrubbed environment, and reads the JSON report it writes to
``$MLPILOT_PROBE_OUT``. Importing cudf proves nothing since 25.10 dropped its import-time
device checks, so every check does real work on the device:

- ``driver``: a CUDA 12 driver (the ``-cu12`` wheels need it) and a device of compute
  capability 7.0 or newer (what RAPIDS supports);
- ``accelerators``: cudf.pandas and cuml.accel are active in this process;
- ``cudf``: a reduction computed by cuDF on the device;
- ``cuml_fit``: a small ridge fit that cuml.accel reports as having run on the GPU;
- ``xgboost``: a two-round XGBoost fit whose booster reports the CUDA device.

A check that fails records why and the others still run; a crash (a driver error that
kills the process) leaves no report, which the parent reads as a failed probe.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlpilot.platform.ml import protocol

logger = logging.getLogger(__name__)

MIN_DRIVER_CUDA = 12000  # cuDriverGetVersion of CUDA 12.0
MIN_CAPABILITY = (7, 0)


def check_driver() -> str:
    from mlpilot.platform.ml.devices import cuda_driver_report

    report = cuda_driver_report()
    if not report.ok:
        raise RuntimeError(report.reason)
    major, minor = report.driver_version // 1000, report.driver_version % 1000 // 10
    if report.driver_version < MIN_DRIVER_CUDA:
        raise RuntimeError(f"the driver supports CUDA {major}.{minor}; the -cu12 wheels need 12.0+")
    if report.capability < MIN_CAPABILITY:
        cc = ".".join(map(str, report.capability))
        raise RuntimeError(f"{report.name} has compute capability {cc}; RAPIDS needs 7.0+")
    cc = ".".join(map(str, report.capability))
    return f"{report.name}, compute capability {cc}, driver CUDA {major}.{minor}"


def check_accelerators() -> str:
    from mlpilot.platform.ml.devices import accelerator_status

    status = accelerator_status()
    missing = [name for name in ("cudf.pandas", "cuml.accel") if not status.get(name)]
    if missing:
        raise RuntimeError(f"{' and '.join(missing)} not active in the GPU command")
    return f"cudf {status.get('cudf', '?')}, cuml {status.get('cuml', '?')}"


def check_cudf() -> str:
    import cudf

    total = float(cudf.Series([1.0, 2.0, 3.0, 4.0]).sum())
    if total != 10.0:
        raise RuntimeError(f"cuDF summed 1..4 to {total}")
    return "cuDF reduction on the device"


def check_cuml_fit() -> str:
    import numpy as np
    from sklearn.linear_model import Ridge

    from mlpilot.platform.ml.devices import StageDevices

    devices = StageDevices("gpu")
    devices.start()
    try:
        devices.stage_started("probe")
        rng = np.random.default_rng(0)
        X = rng.random((256, 4), dtype=np.float32)
        Ridge(alpha=1.0).fit(X, X @ np.arange(1, 5, dtype=np.float32))
        record = devices.stage_ended("probe")
    finally:
        devices.stop()
    if "Ridge.fit" not in record["gpu"]:
        why = record["reasons"].get("Ridge.fit") or "no GPU call was logged"
        raise RuntimeError(f"Ridge.fit did not run on the GPU ({why})")
    return "Ridge.fit ran on GPU"


def check_xgboost() -> str:
    import numpy as np
    import xgboost

    from mlpilot.platform.ml.devices import booster_device

    rng = np.random.default_rng(0)
    X = rng.random((256, 4), dtype=np.float32)
    model = xgboost.XGBRegressor(n_estimators=2, device="cuda", tree_method="hist")
    model.fit(X, X[:, 0])
    cuda = xgboost.build_info().get("CUDA_VERSION")
    if booster_device(model) != "gpu":
        raise RuntimeError(
            f"XGBoost {xgboost.__version__} (built for CUDA {cuda}) trained on the CPU"
        )
    return f"XGBoost {xgboost.__version__} (CUDA {cuda}) trained on the GPU"


CHECKS: dict[str, Callable[[], str]] = {
    "driver": check_driver,
    "accelerators": check_accelerators,
    "cudf": check_cudf,
    "cuml_fit": check_cuml_fit,
    "xgboost": check_xgboost,
}


def run_checks(checks: dict[str, Callable[[], str]] | None = None) -> dict[str, Any]:
    # who ran it: the parent checks that the probe ran as the pipelines run (their account)
    account = {"uid": os.getuid(), "gid": os.getgid(), "home": os.environ.get("HOME", "")}
    report: dict[str, Any] = {"checks": {}, "account": account}
    for name, check in (checks or CHECKS).items():
        try:
            report["checks"][name] = {"ok": True, "detail": check()}
        except Exception as exc:  # recorded as the check's failure; the parent decides
            logger.debug("GPU probe check %s failed", name, exc_info=True)
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            report["checks"][name] = {"ok": False, "detail": last[:300]}
    return report


def main() -> int:
    out = os.environ.get(protocol.ENV_PROBE_OUT)
    report = run_checks()
    text = json.dumps(report, indent=2)
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
