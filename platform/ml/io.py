"""Reading tabular files with errors a user can act on."""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpilot.platform.errors import DataError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pandas as pd

FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".xlsx": "excel",
    ".xls": "excel",
}
_ENCODINGS = ("utf-8", "utf-8-sig", "gb18030", "latin-1")
_FINGERPRINT_FULL_LIMIT = 512 * 1024 * 1024
_EDGE = 8 * 1024 * 1024
#: from this size on, whole delimited files are parsed by pyarrow's multi-threaded reader
ARROW_MIN_BYTES = 8 * 1024 * 1024
#: rows read by both parsers to check that they agree
_CHECK_ROWS = 2000


def readable_path(path: str | Path) -> Path:
    """The path to open for a file of the plan: mlpilot may hand a contained pipeline an
    open descriptor or a read-only copy instead (``protocol.ENV_READ_MAP``)."""
    import json

    from mlpilot.platform.ml import protocol

    mapping = json.loads(os.environ.get(protocol.ENV_READ_MAP) or "{}")
    return Path(mapping.get(str(path), path))


def detect_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is not None:
        return fmt
    head = _head(path)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"PK\x03\x04"):  # a zip: Excel's .xlsx (a descriptor has no suffix)
        return "excel"
    if head.lstrip().startswith((b"{", b"[")):  # JSON lines, or a JSON array of records
        return "jsonl"
    return "csv"


def _head(path: Path, size: int = 8192) -> bytes:
    with path.open("rb") as fh:
        return fh.read(size)


def check_readable(path: str | Path) -> Path:
    """Resolve ``path`` and fail with a one-line reason if it cannot be a table."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"data file not found: {path}", hint="check the path given to --data")
    if path.is_dir():
        raise DataError(f"{path} is a directory, not a data file")
    if path.stat().st_size == 0:
        raise DataError(
            f"{path} is empty (0 bytes)",
            hint="give a CSV, Parquet or JSON-lines file with a header and rows",
        )
    fmt = detect_format(path)
    if fmt in ("csv", "tsv", "jsonl") and looks_binary(_head(path)):
        raise DataError(
            f"{path} is not a tabular text file (it contains binary data)",
            hint="mlpilot reads CSV, TSV, Parquet, JSON lines and Excel files",
        )
    if fmt == "excel":
        check_excel(path)
    if str(path).startswith("/proc/self/fd/"):
        return path  # a handed-over descriptor: resolving it would name a file it may not open
    return path.resolve()


#: bytes of text files: printable ASCII, tab, line breaks, form feed, escape, and UTF-8's
_TEXT_BYTES = frozenset(range(0x20, 0x100)) | frozenset(b"\t\n\r\f\v\x1b")
#: the share of other bytes (NULs, control characters) from which a file is binary
BINARY_SHARE = 0.1
#: how Excel workbooks begin: a zip (.xlsx) or an OLE2 compound file (.xls)
_ZIP_MAGIC = b"PK\x03\x04"
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file are not text.

    One stray NUL (a cell pasted from elsewhere) does not make a CSV binary: like
    ``file``, this weighs the share of bytes no text holds. UTF-16 text (told by its
    byte-order mark) has a NUL in every other byte and is text.
    """
    if not head or head.startswith(_WIDE_BOMS):
        return False
    odd = sum(1 for byte in head if byte not in _TEXT_BYTES)
    return odd / len(head) > BINARY_SHARE


def check_excel(path: Path) -> None:
    """Fail in one line when a file named ``.xlsx``/``.xls`` is no Excel workbook."""
    import zipfile

    head = _head(path, 8)
    if head.startswith(_OLE2_MAGIC):
        return
    if head.startswith(_ZIP_MAGIC):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError, ValueError):
            names = set()
        if "[Content_Types].xml" in names and any(n.startswith("xl/") for n in names):
            return
        what = "a zip archive without an Excel workbook in it"
    else:
        what = "text" if not looks_binary(_head(path)) else "neither a workbook nor text"
    raise DataError(
        f"{path.name} is named like an Excel file but is {what}",
        hint="give the real workbook, or a file named for what it is (.csv, .parquet, …)",
    )


def read_table(
    path: str | Path,
    *,
    nrows: int | None = None,
    memory_budget_mb: float | None = None,
) -> pd.DataFrame:
    """Read a CSV/TSV, Parquet, JSON-lines or Excel file into a DataFrame.

    Raises :class:`DataError` naming the problem for empty, header-only, binary or
    unparsable files. Duplicate header names are kept apart by pandas (``x``, ``x.1``).
    A delimited file larger than the memory budget is read in chunks, each compacted
    (float64 → float32 where exact) before the next is read; ``frame.attrs["mlpilot_read"]``
    says how.
    """
    import pandas as pd

    path = check_readable(path)
    fmt = detect_format(path)
    try:
        if (
            fmt in ("csv", "tsv")
            and nrows is None
            and path.stat().st_size > _budget_bytes(memory_budget_mb)
        ):
            frame = _read_chunked(path, fmt, _budget_bytes(memory_budget_mb))
        elif fmt in ("csv", "tsv"):
            frame = _read_delimited(path, fmt, nrows)
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
            if nrows is not None:
                frame = frame.head(nrows)
        elif fmt == "jsonl":
            frame = _read_json(path, nrows)
        else:
            frame = _read_excel(path, nrows)
    except DataError:
        raise
    except (ValueError, TypeError, OSError, UnicodeError, pd.errors.ParserError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"{path.name} could not be read as {fmt.upper()}: {first[:200]}",
            hint="mlpilot reads CSV, TSV, Parquet, JSON lines and Excel files",
        ) from None
    if frame.shape[1] == 0:
        raise DataError(f"{path.name} has no columns", hint="the first line must be a header")
    if len(frame) == 0:
        raise DataError(
            f"{path.name} has a header but no data rows",
            hint="add rows below the header line",
        )
    if fmt in ("csv", "tsv") and frame.shape[1] == 1 and _looks_like_prose(frame):
        raise DataError(
            f"{path.name} does not look like a table (one column of free text)",
            hint="give a CSV with a header row and comma-separated values",
        )
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _read_excel(path: Path, nrows: int | None) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_excel(path, nrows=nrows)
    except ImportError:
        raise DataError(
            f"reading Excel file {path.name} needs the 'openpyxl' package",
            hint="pip install openpyxl, or save the sheet as CSV",
        ) from None
    except Exception as exc:  # a damaged workbook: zipfile, openpyxl and xlrd say it their ways
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"{path.name} could not be read as an Excel workbook: {first[:200]}",
            hint="open it in a spreadsheet and save it again, or save the sheet as CSV",
        ) from None


def _budget_bytes(memory_budget_mb: float | None) -> int:
    """The memory budget for one table: MLPILOT_MEMORY_BUDGET_MB, else a quarter of RAM."""
    if memory_budget_mb is None:
        from mlpilot.platform.config import get_settings

        memory_budget_mb = get_settings().memory_budget_mb
    if memory_budget_mb is not None:
        return int(memory_budget_mb * 2**20)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 4)
    except (ValueError, OSError, AttributeError):
        return 2 * 2**30


def _read_chunked(path: Path, fmt: str, budget: int) -> pd.DataFrame:
    import pandas as pd

    from mlpilot.platform.ml.dtypes import float32_safe

    rows_per_chunk = max(
        10_000, int(budget / max(path.stat().st_size / max(count_rows(path) or 1, 1), 1) / 4)
    )
    chunks, saved = [], 0
    for chunk in _read_delimited(path, fmt, None, chunksize=rows_per_chunk):
        for column in chunk.columns:
            if chunk[column].dtype == "float64" and float32_safe(chunk[column]):
                saved += chunk[column].memory_usage(deep=False) // 2
                chunk[column] = chunk[column].astype("float32")
        chunks.append(chunk)
    if not chunks:
        raise pd.errors.EmptyDataError("no rows")
    frame = pd.concat(chunks, ignore_index=True)
    frame.attrs["mlpilot_read"] = {
        "chunks": len(chunks),
        "rows_per_chunk": rows_per_chunk,
        "saved_mb": round(saved / 2**20, 1),
    }
    return frame


def _read_delimited(path: Path, fmt: str, nrows: int | None, chunksize: int | None = None) -> Any:
    import warnings

    import pandas as pd

    if nrows is None and chunksize is None and path.stat().st_size >= ARROW_MIN_BYTES:
        frame = read_with_arrow(path, fmt)
        if frame is not None:
            return frame
    encodings, sep = sniff_delimited(path, fmt)
    last_error: Exception | None = None
    for encoding in encodings:
        try:
            with warnings.catch_warnings():
                # a row with more fields than the header: pandas would drop the extra
                # fields (index_col=False) or turn the first ones into an index
                warnings.simplefilter("error", pd.errors.ParserWarning)
                reader = pd.read_csv(
                    path,
                    sep=sep,
                    nrows=nrows,
                    encoding=encoding,
                    skipinitialspace=True,
                    low_memory=False,
                    chunksize=chunksize,
                    index_col=False,
                )
                if chunksize is not None:
                    first = next(reader, None)  # decode errors surface on the first chunk
                    return _chain(first, reader)
                return reader
        except (pd.errors.ParserWarning, pd.errors.ParserError) as exc:
            raise _ragged(path, sep, exc) from None
        except UnicodeDecodeError as exc:
            last_error = exc
            continue
        except pd.errors.EmptyDataError:
            raise DataError(
                f"{path.name} has no header and no rows",
                hint="the first line must name the columns",
            ) from None
    raise DataError(f"{path.name} is not text in any encoding mlpilot knows: {last_error}")


#: byte-order marks of text that is not a byte per character (NULs are not binary there)
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")
_DELIMITERS = (",", ";", "\t", "|")


def sniff_delimited(path: Path, fmt: str) -> tuple[tuple[str, ...], str]:
    """The encodings to try and the delimiter of a delimited file.

    UTF-16 is told by its byte-order mark; the delimiter is the one of ``, ; TAB |`` that
    the header line holds most (a comma unless another one is there and commas are not).
    """
    head = _head(path, 65536)
    encodings = ("utf-16",) if head.startswith(_WIDE_BOMS) else _ENCODINGS
    if fmt == "tsv":
        return encodings, "\t"
    for encoding in encodings:
        try:
            first = head.decode(encoding, errors="strict").splitlines()[0] if head else ""
            break
        except (UnicodeDecodeError, IndexError):
            first = ""
    counts = {d: first.count(d) for d in _DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return encodings, best if counts[best] and not counts[","] else ","


def _ragged(path: Path, sep: str, exc: Exception) -> DataError:
    """A file whose rows do not match its header, in one line (pandas says it two ways)."""
    import re

    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
    where = f" (line {found[2]} has {found[3]} for {found[1]} columns)" if found else ""
    if not found and not isinstance(exc, Warning) and "tokenizing" not in str(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return DataError(f"{path.name} could not be read as a table: {first[:200]}")
    return DataError(
        f"{path.name} has rows with more fields than its header names{where}",
        hint=f"fix those rows, or quote fields that contain the delimiter {sep!r}",
    )


def _read_json(path: Path, nrows: int | None) -> Any:
    """JSON lines, or one JSON array of records (``[{"a": 1}, …]``)."""
    import pandas as pd

    if _head(path, 4096).lstrip().startswith(b"["):
        frame = pd.read_json(path, orient="records", dtype=False)
        return frame.head(nrows) if nrows is not None else frame
    return pd.read_json(path, lines=True, nrows=nrows, dtype=False)


def release_memory() -> None:
    """Give memory freed while reading back to the system.

    pyarrow's allocator keeps what the CSV parser used (about 70 MiB on a million-row
    file) and glibc keeps freed pages of pandas' intermediate copies; the model trains on
    top of whatever is still held, so the peak of the whole pipeline drops by as much.
    """
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except ImportError:
        logger.debug("no pyarrow: no Arrow memory to release")
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError as exc:  # not glibc (musl): nothing to trim
            logger.debug("malloc_trim unavailable: %s", exc)


def read_with_arrow(path: Path, fmt: str) -> pd.DataFrame | None:
    """A whole delimited file through pyarrow's parser (several times faster than pandas'
    on large files), or None to use pandas' parser instead.

    The column kinds are decided from values afterwards (``dtypes.detect_column``), and
    the data profile that planners see comes from pandas' parser: so the first rows are
    read by both, and any column whose kind differs (pyarrow types fractional-second
    stamps, hex numbers and 0/1/true columns its own way), a header pandas names
    differently, or padded text (pandas skips the spaces after a delimiter) sends the
    whole file to pandas. So do duplicate header names, encodings other than UTF-8,
    quoted line breaks and a type that changes down the file; pandas reports real errors.
    """
    import pandas as pd

    if duplicate_header_names(path):
        return None
    encodings, sep = sniff_delimited(path, fmt)
    if encodings[0] != "utf-8":  # UTF-16: pandas' parser knows it, pyarrow's does not
        return None
    try:
        frame = pd.read_csv(path, sep=sep, engine="pyarrow")
    except Exception as exc:  # no pyarrow, or a file it parses differently: pandas decides
        logger.debug("no pyarrow, or a file it parses differently: pandas decides: %s", exc)
        return None
    for column in frame.columns:
        values = frame[column]
        if values.dtype != object:
            continue
        first = _first_value(values)
        if isinstance(first, bytes):  # not UTF-8: pandas tries the other encodings
            return None
        if type(first) is datetime.date:  # pyarrow hands ISO dates over as date objects
            frame[column] = pd.to_datetime(values)
    return frame if _agrees_with_pandas(frame, path, fmt) else None


def _agrees_with_pandas(frame: pd.DataFrame, path: Path, fmt: str) -> bool:
    from mlpilot.platform.ml.dtypes import detect_column

    try:
        sample = _read_delimited(path, fmt, _CHECK_ROWS)
    except Exception as exc:
        logger.debug("pandas could not read the first rows; the whole file goes to pandas: %s", exc)
        return False
    if list(sample.columns) != list(frame.columns):
        return False
    head = frame.head(len(sample))
    for column in sample.columns:
        ours, theirs = head[column], sample[column]
        same_family = _family(ours) == _family(theirs)  # then the kinds agree by design
        if (
            not same_family
            and detect_column(str(column), ours).kind != detect_column(str(column), theirs).kind
        ):
            return False
        if _family(ours) == "text":
            text = ours.dropna().astype(str)
            if (text.str.len() != text.str.lstrip().str.len()).any():
                return False
    return True


def _family(values: pd.Series) -> str:
    import pandas as pd

    if pd.api.types.is_bool_dtype(values):
        return "boolean"
    if pd.api.types.is_numeric_dtype(values):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(values):
        return "datetime"
    return "text"


def _first_value(values: pd.Series) -> Any:
    first = values.first_valid_index()
    return None if first is None else values[first]


def _chain(first: Any, rest: Any) -> Any:
    if first is not None:
        yield first
    yield from rest


def _looks_like_prose(frame: pd.DataFrame) -> bool:
    header = str(frame.columns[0])
    return len(header) > 60 or header.count(" ") > 8


def duplicate_header_names(path: Path) -> list[str]:
    """Names that appear more than once in a CSV header (pandas renames the copies)."""
    import csv

    if detect_format(path) not in ("csv", "tsv"):
        return []
    encodings, sep = sniff_delimited(path, detect_format(path))
    for encoding in encodings:
        try:
            with path.open(encoding=encoding, newline="") as fh:
                header = next(csv.reader(fh, delimiter=sep), [])
            break
        except (UnicodeDecodeError, StopIteration):
            header = []
    seen: dict[str, int] = {}
    for name in (h.strip() for h in header):
        seen[name] = seen.get(name, 0) + 1
    return [name for name, count in seen.items() if count > 1]


def count_columns(path: Path) -> int | None:
    """Columns of a file from its header alone (no row is parsed); None where only reading
    tells (JSON lines, Excel)."""
    import csv

    fmt = detect_format(path)
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return len(pq.read_schema(path).names)
        except Exception as exc:  # not Parquet after all: reading it says why
            logger.debug("no column count from the Parquet footer: %s", exc)
            return None
    if fmt not in ("csv", "tsv"):
        return None
    encodings, sep = sniff_delimited(path, fmt)
    csv.field_size_limit(sys.maxsize)  # one huge header field is the reader's business
    for encoding in encodings:
        try:
            with path.open(encoding=encoding, newline="") as fh:
                return len(next(csv.reader(fh, delimiter=sep), []))
        except (UnicodeDecodeError, csv.Error):
            continue
    return None


def check_width(path: Path, columns: int | None, limit: int) -> None:
    """Refuse a table wider than ``limit`` columns (``MLPILOT_MAX_COLUMNS``) in one line."""
    if columns is not None and columns > limit:
        raise DataError(
            f"{path.name} has {columns:,} columns, more than the {limit:,} mlpilot profiles "
            "(MLPILOT_MAX_COLUMNS)",
            hint="select the columns that matter, or raise MLPILOT_MAX_COLUMNS",
        )


def count_rows(path: Path) -> int | None:
    """Data rows in a file, cheaply: line count for text, metadata for Parquet."""
    fmt = detect_format(path)
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows)
        except Exception as exc:
            logger.debug("no row count from the Parquet footer: %s", exc)
            return None
    if fmt not in ("csv", "tsv", "jsonl"):
        return None
    lines = 0
    last = b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(4 * 1024 * 1024):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1
    return max(lines - (0 if fmt == "jsonl" else 1), 0)


def fingerprint(path: Path) -> str:
    """``sha256:<hex>`` of the file (of its size, head and tail when very large)."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size <= _FINGERPRINT_FULL_LIMIT:
            while chunk := fh.read(4 * 1024 * 1024):
                digest.update(chunk)
            return f"sha256:{digest.hexdigest()}"
        digest.update(str(size).encode())
        digest.update(fh.read(_EDGE))
        fh.seek(size - _EDGE)
        digest.update(fh.read(_EDGE))
    return f"sha256-partial:{digest.hexdigest()}"
