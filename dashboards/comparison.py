"""What the Compare page shows, computed without any store: figures rounded to a few
significant digits, the best value per metric by its direction, the parameters that
differ, and a readable name and one colour per run.

Pure functions of the rows ``queries.compare_view`` returns, so they are unit-tested
without MLflow or MongoDB; the page only lays them out.
"""

from __future__ import annotations

import colorsys
import logging
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from mlpilot.tracking import vocab

logger = logging.getLogger(__name__)

#: significant digits of every figure on the page: 0.6851992409867173 reads as 0.6852
DIGITS = 4
#: the same ten colours plotly uses by default, so a run looks the same as on other pages
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: prefixes of the model metrics whose direction the vocabulary knows (``test_rmse``)
SCORE_PREFIXES = ("test_", "cv_")
LABEL_PROMPT_CHARS = 28
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d+")


def sig(value: Any, digits: int = DIGITS) -> str:
    """A number in ``digits`` significant digits, without exponent for everyday sizes.

    Integers stay whole (``hpo_trials`` 50, 12,000 rows); a float is rounded, never
    padded (0.5 stays 0.5); very large or very small values use an exponent."""
    if value is None or isinstance(value, bool):
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not isinstance(value, float):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= 6 or magnitude < -4:
        return f"{value:.{digits - 1}e}"
    decimals = max(0, digits - 1 - magnitude)
    text = f"{round(value, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def metric_direction(key: str) -> str | None:
    """``maximize``/``minimize`` for a model metric the vocabulary knows, else None.

    ``hpo_best_value`` and custom metrics have no direction of their own (a search's
    best value is rmse for one run and recall for another): nothing is marked for them."""
    for prefix in SCORE_PREFIXES:
        if key.startswith(prefix) and key[len(prefix) :] in vocab.METRICS:
            return vocab.direction(key)
    return None


def is_timing(key: str) -> bool:
    """``time_<stage>_s`` metrics are timings, not model metrics (DESIGN §4)."""
    return key.startswith("time_") and key.endswith("_s")


def numeric(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def best_of(values: dict[str, Any], direction: str | None) -> set[str]:
    """Keys of the best value (all of them on a tie), given the metric's direction.

    Nothing is marked without a direction, or when fewer than two runs have the value:
    a lone number is not "best" of anything."""
    present = {k: v for k, v in ((k, numeric(v)) for k, v in values.items()) if v is not None}
    if direction not in ("maximize", "minimize") or len(present) < 2:
        return set()
    target = (max if direction == "maximize" else min)(present.values())
    if min(present.values()) == max(present.values()):
        return set()  # every run the same: no run is better
    return {k for k, v in present.items() if v == target}


def differing(rows: Sequence[dict[str, Any]], field: str) -> list[str]:
    """Keys of ``row[field]`` whose value is not the same in every row (a key missing in
    some rows differs from one that is present)."""
    keys = sorted({k for r in rows for k in r.get(field) or {}})
    return [k for k in keys if len({_hashable((r.get(field) or {}).get(k)) for r in rows}) > 1]


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, (dict, list)) else value


def run_label(row: dict[str, Any]) -> str:
    """A readable name: the model (else the template) and the prompt's start."""
    kind = row.get("model") or row.get("template") or "run"
    prompt = " ".join(str(row.get("prompt") or "").split())
    if len(prompt) > LABEL_PROMPT_CHARS:
        cut = prompt[: LABEL_PROMPT_CHARS - 1]
        if " " in cut[LABEL_PROMPT_CHARS // 2 :]:  # end on a whole word when one is near
            cut = cut.rsplit(" ", 1)[0]
        prompt = cut.rstrip() + "…"
    return f"{kind} · {prompt}" if prompt else f"{kind} · {str(row.get('run_id', ''))[:8]}"


def unique_labels(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One label per row; runs that would read the same get their short id appended."""
    labels = [run_label(r) for r in rows]
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return [
        f"{label} ({str(r.get('run_id', ''))[:6]})" if counts[label] > 1 else label
        for label, r in zip(labels, rows, strict=True)
    ]


def colours(n: int) -> list[str]:
    """``n`` distinct colours: the palette first, then hues a golden angle apart (up to the
    page's 100 runs, neighbours never share a colour)."""
    out = list(PALETTE[:n])
    for i in range(len(out), n):
        hue = (i * 0.618033988749895) % 1.0
        lightness = 0.42 if i % 2 else 0.55
        r, g, b = colorsys.hls_to_rgb(hue, lightness, 0.65)
        out.append(f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}")
    return out


def metric_table(
    rows: Sequence[dict[str, Any]],
    keys: Iterable[str],
    field: str,
    direction_of: Any = metric_direction,
) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """Table rows (one per key, one column per run id, values as text) and the cells to
    mark as best, as (row index, run id)."""
    table: list[dict[str, Any]] = []
    best_cells: list[tuple[int, str]] = []
    for index, key in enumerate(keys):
        values = {r["run_id"]: (r.get(field) or {}).get(key) for r in rows}
        direction = direction_of(key)
        best = best_of(values, direction)
        line: dict[str, Any] = {"key": key, "better": _arrow(direction)}
        for run_id, value in values.items():
            line[run_id] = sig(as_number(value)) + (" ★" if run_id in best else "")
        table.append(line)
        best_cells += [(index, run_id) for run_id in best]
    return table, best_cells


def as_number(value: Any) -> Any:
    """A parameter's text as its number ("0.5752867891211308" → 0.5752867891211308):
    MLflow keeps parameters as strings. Anything else is returned as it was."""
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return int(value) if _INTEGER.fullmatch(value.strip()) else float(value)
    return value


def is_model_metric(key: str) -> bool:
    """Scores of the model (``test_``, ``cv_``, the search's ``hpo_``), not run facts such
    as rows removed or memory used."""
    return key.startswith((*SCORE_PREFIXES, "hpo_"))


def _arrow(direction: str | None) -> str:
    return {"maximize": "↑ higher", "minimize": "↓ lower"}.get(direction or "", "")


def scaled_axes(
    rows: Sequence[dict[str, Any]], keys: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """Each axis's (low, high) over the runs, for parallel coordinates."""
    ranges = {}
    for key in keys:
        values = [v for v in (numeric(r["metrics"].get(key)) for r in rows) if v is not None]
        if values:
            ranges[key] = (min(values), max(values))
    return ranges


def position(value: float, low: float, high: float, direction: str | None) -> float:
    """Where a value sits on its axis, 0 (bottom) to 1 (top), the better end on top."""
    if high == low:
        return 0.5
    share = (value - low) / (high - low)
    return 1.0 - share if direction == "minimize" else share
