"""``python -m cuml.accel SCRIPT ARGS``: install, then run SCRIPT as ``__main__``."""

import runpy
import sys

import cuml.accel

cuml.accel.install()
script, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_path(script, run_name="__main__")
