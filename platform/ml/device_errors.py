"""Which failures are the GPU's: the one rule the pipeline and its parent share.

An ``auto`` GPU leg that fails with a device error at any stage reruns whole on the CPU
(``execution.StartedLeg``); the pipeline keeps such an error's own text rather than
rewording a ``MemoryError`` as its address-space limit (``ml.context``). The rule reads
the error's class name and message, so that it also applies to what the parent only sees as
text: a stored ``{type, message}`` or the last line of a crashed child's stderr.

The patterns follow what the libraries raise:

- CuPy: ``cupy_backends.cuda.api.runtime.CUDARuntimeError`` ("cudaErrorMemoryAllocation:
  out of memory"), ``CUDADriverError``, ``cupy.cuda.memory.OutOfMemoryError``, the
  ``CUBLASError``/``CUSOLVERError``/``CUSPARSEError`` of its library wrappers;
- Numba: ``numba.cuda.cudadrv.driver.CudaAPIError`` ("[2] Call to cuMemAlloc results in
  CUDA_ERROR_OUT_OF_MEMORY"), ``CudaSupportError``;
- RMM: ``MemoryError("std::bad_alloc: out_of_memory: CUDA error at: …rmm/…")``;
- libcudf and RAFT (cuML): ``cudf::logic_error("CUDF failure at: <file>:<line>: …")``
  (``cpp/include/cudf/utilities/error.hpp``, ``CUDF_EXPECTS``/``CUDF_FAIL``; "cuDF failure"
  in older releases), ``cudf::cuda_error("CUDA error encountered at: …")``, ``"RAFT failure
  at file=…"``; cuML's own ``"cuML failure"`` wording. A libcudf logic error counts too: the
  CPU leg does not run libcudf at all;
- XGBoost: ``XGBoostError`` whose message names CUDA, the device or thrust;
- PyTorch: ``torch.cuda.OutOfMemoryError`` ("CUDA out of memory").
"""

from __future__ import annotations

import logging
import re

logger = logging.getLogger(__name__)

__all__ = ["DEVICE_ERROR_TYPES", "is_device_error"]

#: exception class names that are device errors whatever their message says
DEVICE_ERROR_TYPES = frozenset(
    {
        "CUDARuntimeError",
        "CUDADriverError",
        "CudaAPIError",
        "CudaSupportError",
        "CudaDriverError",
        "NvrtcError",
        "CUBLASError",
        "CUSOLVERError",
        "CUSPARSEError",
        "CURANDError",
        "CUFFTError",
        "NCCLError",
    }
)

_DEVICE_TEXT = re.compile(
    r"cudaError\w*|CUDA_ERROR_\w+|CUDA error|CUDA out of memory|CUDF failure|RAFT failure"
    r"|cuML failure|rmm::|\brmm/|out_of_memory|CUBLAS_STATUS_\w+|CUSOLVER_STATUS_\w+"
    r"|CUSPARSE_STATUS_\w+|illegal memory access|no CUDA-capable device|device-side assert"
    r"|thrust::system",
    re.IGNORECASE,  # libcudf wrote "cuDF failure" before it wrote "CUDF failure"
)
#: XGBoost raises one class for everything: its device errors name the device
_XGBOOST_DEVICE = re.compile(r"cuda|gpu|device_helpers|thrust", re.IGNORECASE)


def is_device_error(kind: str | None, message: str | None) -> bool:
    """Whether an error of class ``kind`` with ``message`` came from the GPU stack."""
    kind, message = kind or "", message or ""
    name = kind.rsplit(".", 1)[-1]
    if name in DEVICE_ERROR_TYPES:
        return True
    if name == "OutOfMemoryError" and not kind.startswith("builtins"):
        return True  # cupy's and torch's: the device's memory, never the host's
    if name == "XGBoostError":
        return bool(_XGBOOST_DEVICE.search(message))
    return bool(_DEVICE_TEXT.search(message))
