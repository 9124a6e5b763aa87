"""The data profile (schema card) that planners and validators see.

Column names and sample values are *data*: planners quote them, never execute them.
Only a sample of rows is read, so profiling a large file stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpilot.platform.ml.dtypes import EXCLUDED_KINDS, detect_schema, id_like_name
from mlpilot.platform.ml.io import (
    check_readable,
    check_width,
    count_columns,
    count_rows,
    detect_format,
    duplicate_header_names,
    fingerprint,
    read_table,
)

SAMPLE_ROWS = 5000
MAX_SAMPLE_VALUES = 3
MAX_VALUE_CHARS = 40


@dataclass
class ColumnProfile:
    name: str
    kind: str
    dtype: str
    missing: float
    unique: int
    samples: list[str]
    note: str | None = None

    @property
    def usable_as_feature(self) -> bool:
        return self.kind not in EXCLUDED_KINDS


@dataclass
class DataProfile:
    path: str
    format: str
    rows: int
    rows_sampled: int
    columns: list[ColumnProfile]
    fingerprint: str
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnProfile | None:
        return next((c for c in self.columns if c.name == name), None)

    def candidate_targets(self) -> list[str]:
        """Columns that could be predicted: not identifiers, constants, empty or free text."""
        return [c.name for c in self.columns if c.kind not in EXCLUDED_KINDS]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "rows": self.rows,
            "rows_sampled": self.rows_sampled,
            "fingerprint": self.fingerprint,
            "notes": list(self.notes),
            "columns": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "dtype": c.dtype,
                    "missing": c.missing,
                    "unique": c.unique,
                    "samples": c.samples,
                    **({"note": c.note} if c.note else {}),
                }
                for c in self.columns
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataProfile:
        return cls(
            path=data["path"],
            format=data["format"],
            rows=int(data["rows"]),
            rows_sampled=int(data.get("rows_sampled", data["rows"])),
            fingerprint=data.get("fingerprint", ""),
            notes=list(data.get("notes", [])),
            columns=[
                ColumnProfile(
                    name=c["name"],
                    kind=c["kind"],
                    dtype=c.get("dtype", ""),
                    missing=float(c.get("missing", 0.0)),
                    unique=int(c.get("unique", 0)),
                    samples=list(c.get("samples", [])),
                    note=c.get("note"),
                )
                for c in data["columns"]
            ],
        )


def _short(value: object) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def profile_table(
    path: str | Path, sample_rows: int = SAMPLE_ROWS, max_columns: int | None = None
) -> DataProfile:
    """Profile a data file from its first ``sample_rows`` rows.

    A table wider than ``max_columns`` (default ``MLPILOT_MAX_COLUMNS``) is refused from
    its header, before any row is parsed: profiling a million columns takes minutes and
    its schema card would not fit a metadata document.
    """
    if max_columns is None:
        from mlpilot.platform.config import get_settings

        max_columns = get_settings().max_columns
    resolved = check_readable(path)
    check_width(resolved, count_columns(resolved), max_columns)
    frame = read_table(resolved, nrows=sample_rows)
    check_width(resolved, frame.shape[1], max_columns)  # JSON lines, Excel: known once read
    columns = []
    for spec, name in zip(detect_schema(frame), frame.columns, strict=True):
        series = frame[name]
        values = series.dropna()
        columns.append(
            ColumnProfile(
                name=str(name),
                kind=spec.kind,
                dtype=str(series.dtype),
                missing=round(float(series.isna().mean()), 4),
                unique=int(values.nunique()),
                samples=[_short(v) for v in values.drop_duplicates().head(MAX_SAMPLE_VALUES)],
                note=spec.note,
            )
        )
    notes = []
    duplicates = duplicate_header_names(resolved)
    if duplicates:
        listed = ", ".join(repr(d) for d in duplicates)
        notes.append(
            f"duplicate column names in the header ({listed}); later copies were renamed NAME.1, NAME.2, …"
        )
    rows = count_rows(resolved) if len(frame) >= sample_rows else len(frame)
    return DataProfile(
        path=str(resolved),
        format=detect_format(resolved),
        rows=int(rows if rows is not None else len(frame)),
        rows_sampled=len(frame),
        columns=columns,
        fingerprint=fingerprint(resolved),
        notes=notes,
    )


def target_identifier(column: ColumnProfile) -> bool:
    """Whether a column named as the target identifies rows (``dtypes.target_is_identifier``):
    text different in every row, or distinct integers under an id-like name; never floats."""
    if column.kind != "identifier" or column.dtype.startswith(("float", "Float")):
        return False
    if column.dtype.startswith(("int", "Int", "uint", "UInt")):
        return id_like_name(column.name)
    return True


def infer_task(column: ColumnProfile) -> str:
    """``classification`` or ``regression`` for a target column, from its profile."""
    if column.kind == "identifier" and not target_identifier(column):
        return "regression" if column.unique > 20 else "classification"  # distinct integers
    if column.kind in ("boolean", "categorical", "text", "identifier"):
        return "classification"
    if column.kind == "integer" and column.unique <= 20:
        return "classification"
    return "regression"
