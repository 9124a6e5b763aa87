"""``python -m cudf.pandas -m MODULE ARGS``: install, then run MODULE as ``__main__``."""

import runpy
import sys

import cudf.pandas

if len(sys.argv) < 3 or sys.argv[1] != "-m":
    sys.exit("usage: python -m cudf.pandas -m MODULE ARGS (the stand-in takes no script)")
cudf.pandas.install()
module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
