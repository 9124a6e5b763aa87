"""``mlpilot worker`` under the GPU engine: started as
``python -m cudf.pandas -m cuml.accel _accelerated.py`` (the engine's own command), it runs
the CLI with the arguments the first process passed in the environment — never after the
script, where the accelerators' own parsers may read them.
"""

from __future__ import annotations

import json
import os
import sys

from mlpilot.platform.ml import protocol


def run() -> None:
    argv = json.loads(os.environ.pop(protocol.ENV_WORKER_ARGV, "[]"))
    sys.argv = ["mlpilot", *argv]
    from mlpilot.platform.cli.main import main

    main()


if __name__ == "__main__":
    run()
