"""Paths in a plan are policy, not strings (DESIGN §8).

A plan — hand-written, shared, or steered into an LLM — names files. Before anything runs,
every one is resolved and checked against what the user allowed on the command line:

- **reads**: the data file the user gave (``--data``) and files under folders named with
  ``--allow-read DIR``; never anything inside a dot-folder (``~/.ssh``, ``~/.aws``), however
  it is reached (``..``, symbolic links);
- **writes**: only inside the run's own folder — a relative path without ``..``; a user's
  ``--out`` on the CLI is the one exception, and it never comes from a plan;
- **models**: ``models:/…``, ``runs:/…`` or a logged-model id (``m-…``) of the configured
  tracking store; no local folders, no other schemes.

``check_paths`` raises ``PlanError`` with one line naming the step, the argument and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mlpilot.platform.errors import PlanError
from mlpilot.platform.plan.model import Plan

#: arguments of the canonical tools, by what the path is for
READS = {("load_data", "path"), ("predict", "data_path")}
WRITES = {("predict", "output_path")}
MODELS = {("predict", "model_uri")}
_MODEL_URI = re.compile(r"^(models:/[^/].*|runs:/[0-9a-zA-Z]+/.+|m-[0-9a-f]{8,})$")
#: argument names that name files in a plugin tool's step: checked as reads
_PLUGIN_PATH = re.compile(r"(^|_)(path|file|filename|dir|folder)$")


@dataclass(frozen=True)
class PathPolicy:
    """What the user allowed: the data file given with ``--data``, and read folders."""

    data_file: str | None = None
    read_folders: tuple[str, ...] = field(default_factory=tuple)
    #: the plan came from a file (``--plan``): its own data path needs ``--data`` again
    saved_plan: bool = False

    def allows_read(self, path: str) -> str | None:
        """None if ``path`` may be read, else why not."""
        resolved = Path(path).expanduser().resolve()
        if self.data_file and resolved == Path(self.data_file).expanduser().resolve():
            return None  # the file the user named, wherever it lives
        hidden = _hidden_part(resolved)
        if hidden:
            return f"it is inside the hidden folder {hidden!r}"
        for folder in self.read_folders:
            if resolved.is_relative_to(Path(folder).expanduser().resolve()):
                return None
        if not self.data_file and self.saved_plan:
            return (
                "no --data confirms it (a saved plan's data file must be named again with --data)"
            )
        return (
            "mlpilot reads the file given with --data and folders named with --allow-read DIR only"
        )


def _hidden_part(path: Path) -> str | None:
    return next(
        (part for part in path.parts if part.startswith(".") and part not in (".", "..")), None
    )


def check_write(path: str) -> str | None:
    """None if ``path`` stays inside the run folder, else why not."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or Path(path).expanduser().is_absolute() or path.startswith("~"):
        return "a plan writes only inside its run folder: give a relative name (predictions.csv)"
    if ".." in pure.parts:
        return "'..' would leave the run folder"
    return None


def check_model_uri(uri: str) -> str | None:
    if _MODEL_URI.match(uri.strip()):
        return None
    return (
        "a plan loads models only as models:/NAME@ALIAS, models:/NAME/VERSION, "
        "runs:/RUN_ID/model or a logged-model id (m-…) of the tracking store"
    )


_READ_HINT = "name the file with --data, or its folder with --allow-read DIR"
_WRITE_HINT = "write inside the run folder (a relative name); choose your own file with --out"
_MODEL_HINT = (
    "log or register the model first; a local model folder is predicted with "
    "mlpilot predict --model DIR --trust-local-model"
)


def check_paths(plan: Plan, policy: PathPolicy, plugin_tools: frozenset[str] = frozenset()) -> None:
    """Every path of ``plan`` against ``policy``; raises ``PlanError`` on the first refusal.

    A file a step reads is made absolute here, resolved against the user's folder where
    it was checked: the pipeline runs in its run folder, where a relative name would
    open another file than the one allowed (``load_data`` reads the profiled file).
    """
    for number, step in enumerate(plan.steps, start=1):
        for name, value in list(step.args.items()):
            if not isinstance(value, str) or not value:
                continue
            key = (step.tool, name)
            if key in READS or (step.tool in plugin_tools and _PLUGIN_PATH.search(name)):
                problem, hint = policy.allows_read(value), _READ_HINT
                if problem is None and key != ("load_data", "path"):
                    step.args[name] = str(Path(value).expanduser().resolve())
            elif key in WRITES:
                problem, hint = check_write(value), _WRITE_HINT
            elif key in MODELS:
                problem, hint = check_model_uri(value), _MODEL_HINT
            else:
                continue
            if problem:
                raise PlanError(
                    f"step {number} ({step.tool}): {name}={value!r} is refused: {problem}",
                    hint=hint,
                )
