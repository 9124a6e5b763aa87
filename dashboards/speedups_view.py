"""Pure computations of the GPU speedups and Benchmarks pages: no store, no Dash.

Two document shapes carry per-stage CPU and GPU times (DESIGN §5): an ``--engine compare``
run's (``stages`` maps a stage to its row, written by ``platform/agent/compare.py``) and
``benchmarks/stages.py``'s (``kind: "stages"``, ``rows`` a list). A stage's speedup is
taken only as the document recorded it: a leg that did not run is unavailable, with its
reason, and nothing is computed in its place.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from mlpilot.dashboards.comparison import sig

logger = logging.getLogger(__name__)

#: the source of a point: an ``--engine compare`` run or ``benchmarks/stages.py``
SOURCE_COMPARE, SOURCE_STAGES = "--engine compare", "benchmarks/stages.py"
#: the experiment shown for ``benchmarks/stages.py`` documents, which have none
STAGES_EXPERIMENT = "(stage benchmark)"


@dataclass(frozen=True)
class StagePoint:
    """One stage of one comparison: its times, the GPU leg's share and what it amounts to."""

    bench_id: str
    experiment: str
    source: str
    engine: str  # the GPU the GPU leg had, or why it had none
    stage: str
    rows: int | None
    cpu_s: float | None
    gpu_s: float | None
    speedup: float | None  # only a recorded GPU speedup (or engines' ratio), never estimated
    gpu_share: float | None
    status: str


def is_speedup_doc(doc: dict[str, Any]) -> bool:
    if doc.get("kind") == "stages":
        return isinstance(doc.get("rows"), list)
    return isinstance(doc.get("stages"), dict) and not doc.get("kind")


def _engine(doc: dict[str, Any]) -> str:
    gpu = doc.get("gpu") or {}
    if not gpu.get("available"):
        return "GPU unavailable"
    return (doc.get("hardware") or {}).get("gpu") or "GPU"


def _compare_status(row: dict[str, Any], gpu: dict[str, Any]) -> str:
    if not gpu.get("available"):
        return f"unavailable: {gpu.get('reason') or 'the GPU leg did not run'}"
    if row.get("refused"):
        return f"refused: {row['refused']}"
    if row.get("kind") == "mostly_cpu":
        return row.get("note") or "mostly CPU: not a GPU speedup"
    if row.get("speedup") is None:
        return "no speedup recorded"
    return "GPU speedup" if row.get("kind") != "engines" else "engines end to end"


def compare_points(doc: dict[str, Any]) -> list[StagePoint]:
    gpu = doc.get("gpu") or {}
    rows = (doc.get("dataset") or {}).get("rows")
    return [
        StagePoint(
            bench_id=str(doc.get("_id", "")),
            experiment=str(doc.get("experiment") or ""),
            source=SOURCE_COMPARE,
            engine=_engine(doc),
            stage=stage,
            rows=rows,
            cpu_s=row.get("cpu_s"),
            gpu_s=row.get("gpu_s") if gpu.get("available") else None,
            speedup=row.get("speedup") if gpu.get("available") else None,
            gpu_share=row.get("gpu_share") if gpu.get("available") else None,
            status=_compare_status(row, gpu),
        )
        for stage, row in (doc.get("stages") or {}).items()
        if isinstance(row, dict)
    ]


def stages_points(doc: dict[str, Any]) -> list[StagePoint]:
    gpu = doc.get("gpu") or {}
    out = []
    for row in doc.get("rows") or []:
        ran = row.get("gpu_s") is not None
        reason = gpu.get("reason") or "the GPU leg did not run"
        out.append(
            StagePoint(
                bench_id=str(doc.get("_id", "")),
                experiment=STAGES_EXPERIMENT,
                source=SOURCE_STAGES,
                engine=_engine(doc),
                stage=str(row.get("row", "")),
                rows=row.get("rows"),
                cpu_s=row.get("cpu_s"),
                gpu_s=row.get("gpu_s"),
                speedup=row.get("speedup") if ran else None,
                gpu_share=row.get("gpu_share") if ran else None,
                status="GPU leg ran" if ran else f"unavailable: {reason}",
            )
        )
    return out


def points(docs: list[dict[str, Any]]) -> list[StagePoint]:
    """Every stage of every speedup document, in the documents' order."""
    out: list[StagePoint] = []
    for doc in docs:
        if not is_speedup_doc(doc):
            continue
        out.extend(stages_points(doc) if doc.get("kind") == "stages" else compare_points(doc))
    return out


def experiments(found: list[StagePoint]) -> list[str]:
    return sorted({p.experiment for p in found})


def only(found: list[StagePoint], chosen: list[str] | None) -> list[StagePoint]:
    """The points of the chosen experiments (none chosen: all of them)."""
    return [p for p in found if not chosen or p.experiment in chosen]


def series(found: list[StagePoint]) -> dict[str, list[StagePoint]]:
    """Per stage, the points that have a recorded speedup and a data size, by size."""
    out: dict[str, list[StagePoint]] = {}
    for p in found:
        if p.speedup is not None and p.rows:
            out.setdefault(p.stage, []).append(p)
    for stage_points in out.values():
        stage_points.sort(key=lambda p: p.rows or 0)
    return out


def share_text(share: float | None) -> str:
    return f"{share:.0%}" if share is not None else "—"


def hover(p: StagePoint) -> str:
    from mlpilot.dashboards.components import plot_text

    return (
        f"{plot_text(p.stage)} · {plot_text(p.experiment)} · {plot_text(p.engine)}"
        f"<br>{p.rows:,} rows: {sig(p.speedup)}×, "
        f"GPU share {share_text(p.gpu_share)}"
    )


def point_cells(p: StagePoint) -> tuple[str, ...]:
    """A row of the page's table: a leg that did not run says so instead of a number."""
    speedup = f"{sig(p.speedup)}×" if p.speedup is not None else "unavailable"
    if p.speedup is None and p.status.startswith(("mostly CPU", "refused", "no speedup")):
        speedup = "—"
    return (
        p.experiment,
        p.source,
        p.engine,
        f"{p.rows:,}" if isinstance(p.rows, int) else "?",
        p.stage,
        sig(p.cpu_s) if p.cpu_s is not None else "—",
        sig(p.gpu_s) if p.gpu_s is not None else "—",
        speedup,
        share_text(p.gpu_share),
        p.status,
    )


POINT_HEADER = (
    "experiment",
    "source",
    "engine",
    "rows",
    "stage",
    "CPU s",
    "GPU s",
    "speedup",
    "GPU share",
    "status",
)


# -- the Benchmarks page -------------------------------------------------------------------------
def automl_label(doc: dict[str, Any]) -> str:
    created = str(doc.get("created_at") or "")[:16]
    return f"{created} · budget {sig(doc.get('budget_s'))} s · {len(doc.get('rows') or [])} sets"


def automl_header(doc: dict[str, Any]) -> list[str]:
    tools = list(doc.get("tools") or [])
    peers = [t for t in tools if t != "mlpilot"]
    return ["data set", "metric", *tools, *[f"vs {p}" for p in peers if "mlpilot" in tools]]


def _tool_cell(result: dict[str, Any] | None) -> str:
    if not result:
        return "—"
    if result.get("score") is None:
        return f"failed: {result.get('error') or 'no score'}"
    text = f"{sig(result['score'])} in {sig(result.get('wall_s'))} s"
    if result.get("log_loss") is not None:
        text += f" (log loss {sig(result['log_loss'])})"
    return text


def automl_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Per data set: its metric, each tool's score and wall time, mlpilot's verdicts."""
    tools = list(doc.get("tools") or [])
    out = []
    for row in doc.get("rows") or []:
        cells = [str(row.get("set", "")), str(row.get("metric", ""))]
        cells += [_tool_cell((row.get("tools") or {}).get(t)) for t in tools]
        if "mlpilot" in tools:
            cells += [str((row.get("vs") or {}).get(t, "—")) for t in tools if t != "mlpilot"]
        out.append(cells)
    return out


def automl_counts(doc: dict[str, Any]) -> list[str]:
    tie = doc.get("tie")
    return [
        f"mlpilot vs {peer}: {c.get('win', 0)} wins, {c.get('tie', 0)} ties (±{tie}), "
        f"{c.get('loss', 0)} losses"
        for peer, c in (doc.get("counts") or {}).items()
    ]


def _flat(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flat(inner, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, (list, tuple)):
        return json.dumps(value, default=str)
    return sig(value) if isinstance(value, (int, float)) else str(value)


def generic_table(rows: list[Any]) -> tuple[list[str], list[list[str]]]:
    """Any list of row documents as a table: nested fields dotted, columns in first-seen
    order, so a document shape this page does not know still shows every value."""
    flat = []
    for row in rows:
        out: dict[str, Any] = {}
        _flat(row if isinstance(row, dict) else {"value": row}, "", out)
        flat.append(out)
    columns: list[str] = []
    for row in flat:
        columns += [k for k in row if k not in columns]
    return columns, [[_cell(row.get(c)) for c in columns] for row in flat]


def doc_facts(doc: dict[str, Any]) -> dict[str, str]:
    """The scalar fields of a document beside its table (``rows`` and ids left out)."""
    out: dict[str, Any] = {}
    _flat({k: v for k, v in doc.items() if k not in ("rows", "_id", "table")}, "", out)
    return {k: _cell(v) for k, v in out.items()}
