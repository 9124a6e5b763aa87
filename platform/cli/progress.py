"""Live progress for ``mlpilot run`` on stderr, and the closing summary."""

from __future__ import annotations

from typing import Any

from mlpilot.platform.cli._output import console
from mlpilot.platform.ml.protocol import PipelineEvent
from mlpilot.tracking.vocab import RunState

_STATE_STYLE = {RunState.SUCCEEDED: "green", RunState.FAILED: "red", RunState.CANCELLED: "yellow"}

_STAGE_LABELS = {
    "load": "loading data",
    "clean": "cleaning",
    "features": "engineering features",
    "train": "training",
    "score": "scoring on the test set",
    "tune": "tuning",
    "evaluate": "cross-validating",
    "importance": "feature importance",
    "refit": "refitting on every row",
    "log_model": "logging the model",
    "register": "registering",
    "predict": "predicting",
}


class ConsoleProgress:
    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.out = console(stderr=True)
        self.bar: Any = None
        self.task: Any = None

    def state(self, state: str, message: str = "") -> None:
        if self.quiet:
            return
        style = _STATE_STYLE.get(state, "cyan")
        self.out.print(
            f"[{style}]● {state}[/{style}]" + (f"  {_escape(message)}" if message else "")
        )

    def event(self, event: PipelineEvent) -> None:
        if self.quiet:
            return
        kind, stage = event.type, event.stage or ""
        if kind == "stage_start":
            self.out.print(f"  … {_STAGE_LABELS.get(stage, stage)}")
        elif kind == "stage_end":
            self._stop_bar()
            self.out.print(f"  ✓ {_STAGE_LABELS.get(stage, stage)} ({event.seconds or 0:.2f} s)")
        elif kind in ("note", "progress"):
            self.out.print(f"    {_escape(event.message or '')}")
        elif kind == "trial":
            self._trial(event)
        elif kind == "study":
            name = _escape(event.message or "")
            self.out.print(f"    study {name} (more workers: mlpilot worker --study {name})")
        elif kind == "pipeline_failed":
            self._stop_bar()
            self.out.print(f"  [red]✗ {_escape(event.message or '')}[/red]")

    def _trial(self, event: PipelineEvent) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        total = event.total
        if self.bar is None:
            self.bar = Progress(
                TextColumn("    trials"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.out,
                transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task("", total=total)
        best = event.best
        label = " ".join(str(w) for w in ("best", event.metric) if w)
        # `n` counts the study's finished trials (a resumed study, or other workers', too)
        position = {"completed": event.n} if isinstance(event.n, int) else {"advance": 1}
        self.bar.update(
            self.task,
            total=total,
            description=f"{label} {best:.5g}" if isinstance(best, (int, float)) else "",
            **position,
        )

    def _stop_bar(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_outcome(outcome: Any) -> None:
    out = console()
    if outcome.status == "ANSWERED":
        from mlpilot.platform.cli.answers import print_answer

        steps = (outcome.plan or {}).get("steps") or [{}]
        print_answer(steps[0].get("tool"), outcome.answer)
        return
    if outcome.error:
        stage = outcome.error.get("stage")
        where = f" at {str(stage).lower()}" if stage else ""
        out.print(f"[red]Run {outcome.status}[/red]{where}")
    else:
        out.print(f"[green]Run {outcome.status}[/green]")
    main = outcome.main_metric
    keys = [
        k
        for k in outcome.metrics
        if k.startswith(("test_", "cv_", "hpo_best")) and not k.endswith("_std")
    ]
    if main:
        keys.sort(key=lambda k: (main not in k, k))
    for key in keys[:8]:
        out.print(f"  {key:<28} {outcome.metrics[key]:.5g}")
    if outcome.importance:
        out.print(
            "  top features: "
            + ", ".join(_escape(str(i["feature"])) for i in outcome.importance[:5])
        )
    if "total" in outcome.timings:
        out.print(f"  total time                   {outcome.timings['total']:.1f} s")
    for note in outcome.notes:
        out.print(f"  note: {_escape(note)}")
    if outcome.registered:
        r = outcome.registered
        out.print(
            f"  registered: {r['name']} version {r['version']}"
            + (f" @{r['alias']}" if r.get("alias") else "")
        )
    if outcome.predictions:
        out.print(f"  predictions: {outcome.predictions['path']}")
    if outcome.run_id:
        out.print(f"  MLflow run:   {outcome.run_id} (experiment {outcome.experiment})")
        out.print(f"  tracking URI: {outcome.tracking_uri}")
        if outcome.tracking_uri and outcome.tracking_uri.startswith("sqlite"):
            out.print(f"  see it with:  mlflow ui --backend-store-uri {outcome.tracking_uri}")
    study = getattr(outcome, "study", None)
    if study and study.get("name"):
        out.print(
            f"  study:        {study['name']} ({study.get('n_trials')} trials in {study.get('storage')})",
            markup=False,
        )
        out.print(
            f"  more trials:  mlpilot worker --study {study['name']} --trials N", markup=False
        )
    if outcome.pipeline_path:
        out.print(f"  pipeline:     {outcome.pipeline_path}")
    if outcome.model_uri:
        out.print(f"  model:        {outcome.model_uri}")
    out.print(
        f"  session:      {outcome.session_id} (continue with --session {outcome.session_id})"
    )
