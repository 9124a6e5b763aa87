"""The README's CLI blocks, run as a newcomer would: in order, on defaults, nothing exported.

Every command of the tour and of the runs/models section runs in a fresh folder with a
fresh home directory (so ``~/.mlpilot`` is new) and no MLPILOT_* or MLFLOW_* variable set.
Only sizes shrink (2,000 rows, 3 trials); capitalised placeholders are filled from what
earlier commands printed, as a reader would copy them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SECTIONS = ("## A short tour of the CLI", "## Runs, models and the two stores")
SMALLER = {"--rows 20000": "--rows 2000", "trials=20": "trials=3"}
RUN_LINE = re.compile(r"MLflow run:\s+([0-9a-f]{32})")
MODEL_LINE = re.compile(r"model:\s+models:/(m-[0-9a-f]+)")


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = []
    for heading in SECTIONS:
        after = text[text.index(heading) :]
        block = after[after.index("```bash\n") + 8 :]
        block = block[: block.index("```")]
        for line in block.splitlines():
            if line.startswith("mlpilot "):
                commands.append(re.sub(r"\s{2,}#.*$", "", line).strip())
    return commands


def newcomer_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MLPILOT_", "MLFLOW_"))
        and k not in ("NVIDIA_API_KEY", "OPENAI_API_KEY")
    }
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class Reader:
    """What a reader remembers from the output: run ids and logged model ids."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.models: list[str] = []

    def read(self, output: str) -> None:
        self.runs += RUN_LINE.findall(output)
        self.models += MODEL_LINE.findall(output)

    def fill(self, command: str) -> str:
        for old, new in SMALLER.items():
            command = command.replace(old, new)
        if "RUN_ID" in command or "MODEL_ID" in command:
            assert len(self.runs) >= 2 and self.models, f"nothing printed yet to fill {command!r}"
        command = command.replace("OTHER_RUN_ID", self.runs[-2] if len(self.runs) > 1 else "")
        command = command.replace("RUN_ID", self.runs[-1] if self.runs else "")
        return command.replace("m-MODEL_ID", self.models[-1] if self.models else "")


def test_readme_cli_blocks_run_in_order_on_defaults(tmp_path: Path) -> None:
    commands = readme_commands()
    assert len(commands) >= 20, commands
    work, home = tmp_path / "work", tmp_path / "user"
    work.mkdir()
    home.mkdir()
    env, reader, transcript = newcomer_env(home), Reader(), []
    for line in commands:
        command = reader.fill(line)
        done = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )
        transcript.append(f"$ {command}\n{done.stdout[-800:]}{done.stderr[-800:]}")
        assert done.returncode == 0, "\n".join(transcript[-3:])
        reader.read(done.stdout)
    joined = "\n".join(transcript)
    assert "registered sales-forecaster version 1" in joined
    assert (work / "predictions.csv").read_text().count("\n") == 501  # header + 500 rows
    assert (home / ".mlpilot" / "mlflow.db").exists()
    # everything lives under ~/.mlpilot: nothing written into the user's folder by MLflow
    assert not (work / "mlruns").exists() and not (work / "mlflow.db").exists()


def test_explicit_sqlite_uri_keeps_artifacts_beside_the_database(tmp_path: Path) -> None:
    work, home, store = tmp_path / "work", tmp_path / "user", tmp_path / "store"
    for folder in (work, home, store):
        folder.mkdir()
    env = newcomer_env(home) | {"MLFLOW_TRACKING_URI": f"sqlite:///{store}/mlflow.db"}
    for command in (
        "mlpilot datasets sales --rows 600 --out sales.csv",
        "mlpilot run 'quick baseline' --data sales.csv --target sales --engine cpu",
    ):
        done = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    run_id = RUN_LINE.search(done.stdout)
    assert run_id, done.stdout
    assert not (work / "mlruns").exists() and not (work / "mlflow.db").exists()
    assert list((store / "artifacts").rglob("MLmodel")), "the model is not beside the database"
    registered = subprocess.run(
        ["mlpilot", "models", "register", run_id.group(1), "--name", "m1"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert registered.returncode == 0, registered.stderr
