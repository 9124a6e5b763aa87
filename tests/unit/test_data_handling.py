"""Reading files and detecting column kinds, with one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlpilot.platform.errors import DataError
from mlpilot.platform.ml.dtypes import coerce_column, detect_column, detect_schema
from mlpilot.platform.ml.io import read_table
from mlpilot.platform.ml.profile import profile_table


def test_kinds_are_detected() -> None:
    frame = pd.DataFrame(
        {
            "mixed_dates": ["2024-01-05", "01/06/2024", "Jan 7, 2024"] * 10,
            "money": ["1,234.5", "$12", "45%"] * 10,
            "yes_no": ["Yes", "No", "Yes"] * 10,
            "customer_id": [f"C{i:04d}" for i in range(30)],
            "row_number": list(range(30)),
            "city": ["a", "b", None] * 10,
            "constant": [1] * 30,
            "empty": [np.nan] * 30,
            "flag": [0, 1, 1] * 10,
            "price": np.linspace(1, 2, 30),
        }
    )
    kinds = {spec.name: spec.kind for spec in detect_schema(frame)}
    assert kinds == {
        "mixed_dates": "datetime",
        "money": "numeric",
        "yes_no": "boolean",
        "customer_id": "identifier",
        "row_number": "identifier",
        "city": "categorical",
        "constant": "constant",
        "empty": "empty",
        "flag": "boolean",
        "price": "numeric",
    }


def test_three_date_formats_in_one_column_all_parse() -> None:
    series = pd.Series(["2024-01-05", "01/06/2024", "Jan 7, 2024", None])
    spec = detect_column("when", series.dropna().repeat(10).reset_index(drop=True))
    parsed = coerce_column(series, spec)
    assert list(parsed[:3].dt.day) == [5, 6, 7] and pd.isna(parsed[3])


def test_numeric_strings_become_numbers() -> None:
    spec = detect_column("money", pd.Series(["1,234.5", "$12", "45%"] * 10))
    assert list(coerce_column(pd.Series(["1,234.5", "$12", "oops"]), spec)[:2]) == [1234.5, 12.0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"a,b,target\n", "has a header but no data rows"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not a tabular text file"),
    ],
)
def test_bad_files_get_one_line_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        read_table(path)
    assert message in info.value.one_line() and "\n" not in info.value.one_line()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data file not found"):
        read_table(tmp_path / "nope.csv")


def test_duplicate_column_names_are_kept_apart_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("a,a,b\n1,2,3\n4,5,6\n")
    profile = profile_table(path)
    assert profile.names == ["a", "a.1", "b"]
    assert "duplicate column names" in profile.notes[0]


def test_chinese_column_names_and_gbk_encoding(tmp_path: Path) -> None:
    path = tmp_path / "cn.csv"
    path.write_bytes(
        "日期,门店,销售额\n2024-01-01,北京,10.5\n2024-01-02,上海,11\n".encode("gb18030")
    )
    frame = read_table(path)
    assert list(frame.columns) == ["日期", "门店", "销售额"] and frame["门店"].iloc[0] == "北京"


def test_parquet_and_json_lines(tmp_path: Path) -> None:
    frame = pd.DataFrame({"x": [1, 2], "y": ["a", "b"]})
    frame.to_parquet(tmp_path / "d.parquet")
    frame.to_json(tmp_path / "d.jsonl", orient="records", lines=True)
    assert read_table(tmp_path / "d.parquet").equals(frame)
    assert list(read_table(tmp_path / "d.jsonl")["y"]) == ["a", "b"]


def test_large_files_are_read_in_compacted_chunks(tmp_path: Path) -> None:
    from mlpilot.platform.datasets import make_sales, write_table

    path = write_table(make_sales(30_000, seed=1), tmp_path / "big.csv")
    whole = read_table(path)
    chunked = read_table(path, memory_budget_mb=0.5)
    info = chunked.attrs["mlpilot_read"]
    assert info["chunks"] >= 2 and info["saved_mb"] > 0
    assert chunked.shape == whole.shape and list(chunked.columns) == list(whole.columns)
    assert np.allclose(chunked["sales"].astype(float), whole["sales"], rtol=1e-6)
    assert chunked["sales"].dtype == "float32"


ARROW_CASES = {
    "padded": "city,price,flag,day\n East, 12.5 ,true,2024-01-02\n West,3,false,2024-02-03\n",
    "quoted_newline": 'note,value\n"two\nlines",1\nplain,2\n',
    "late_text": "code,value\n" + "1,2\n" * 50 + "x7,3\n",
    "empty_column": "a,b,c\n1,,x\n2,,y\n",
    "stamps": "at,v\n2024-01-02T03:04:05+02:00,1\n2024-01-03T00:00:00+00:00,2\n",
    "missing": "a,b\n1,NA\n,2\nnull,3\n",
    "slashed_dates": "day,v\n01/02/2024,1\n03/04/2024,2\n",
    "duplicate_names": "x,x,y\n1,2,3\n4,5,6\n",
    "padded_missing": "label,v\nyes,1\n NA,2\nno,3\n",
    "fractional_stamps": "at,v\n2024-01-02 03:04:05.123,1\n2024-01-03 00:00:00.5,2\n",
    "hex_text": "code,v\n0x1F,1\n0x20,2\n0x21,3\n",
    "one_zero_true": "flag,v\n1,1\n0,2\ntrue,3\n",
    "unnamed_header": ",v\na,1\nb,2\n",
    "iso_stamps": "at,v\n2024-01-02T03:04:05,1\n2024-01-03T00:00:00,2\n,3\n",
}


@pytest.mark.parametrize("case", sorted(ARROW_CASES))
def test_pyarrow_reader_agrees_with_pandas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Large files go through pyarrow: kinds and coerced values must match pandas' parser."""
    from mlpilot.platform.ml import io

    path = tmp_path / "data.csv"
    path.write_text(ARROW_CASES[case], encoding="utf-8")
    by_pandas = read_table(path)
    monkeypatch.setattr(io, "ARROW_MIN_BYTES", 0)
    by_arrow = read_table(path)
    assert list(by_arrow.columns) == list(by_pandas.columns)
    assert len(by_arrow) == len(by_pandas)
    for column in by_pandas.columns:
        spec = detect_column(column, by_pandas[column])
        arrow_spec = detect_column(column, by_arrow[column])
        assert arrow_spec.kind == spec.kind, column
        expected = coerce_column(by_pandas[column], spec).reset_index(drop=True)
        got = coerce_column(by_arrow[column], arrow_spec).reset_index(drop=True)
        pd.testing.assert_series_equal(got, expected, check_dtype=False, check_names=False)
        # the logged model keeps the spec learned from the big file and later gets raw
        # text rows: they must parse the same way
        raw = coerce_column(by_pandas[column], arrow_spec).reset_index(drop=True)
        pd.testing.assert_series_equal(raw, expected, check_dtype=False, check_names=False)


def test_files_not_in_utf8_fall_back_to_pandas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlpilot.platform.ml import io

    path = tmp_path / "data.csv"
    path.write_bytes("城市,价格\n北京,1\n上海,2\n".encode("gb18030"))
    monkeypatch.setattr(io, "ARROW_MIN_BYTES", 0)
    frame = read_table(path)
    assert list(frame.columns) == ["城市", "价格"]
    assert frame["城市"].tolist() == ["北京", "上海"]


def test_a_stray_nul_is_text_and_a_binary_file_is_not(tmp_path: Path) -> None:
    from mlpilot.platform.ml.io import looks_binary

    text = b"a,b,y\n" + b"".join(b"%d,%d,%d\n" % (i, i * 2, i % 2) for i in range(50))
    assert not looks_binary(text.replace(b"7,", b"7\x00,", 1))
    assert not looks_binary("a,b\n1,2\n".encode("utf-16"))  # NULs of UTF-16 are text
    assert looks_binary(b"\x00\x01\x02" * 100) and looks_binary(bytes(range(256)))
    path = tmp_path / "one-nul.csv"
    path.write_bytes(text.replace(b"7,", b"7\x00,", 1))
    assert list(read_table(path).columns) == ["a", "b", "y"]


@pytest.mark.parametrize(
    ("name", "content", "what"),
    [
        ("zip.xlsx", "zip", "a zip archive without an Excel workbook in it"),
        ("text.xlsx", b"a,b\n1,2\n", "text"),
        ("noise.xls", bytes(range(256)) * 4, "neither a workbook nor text"),
    ],
)
def test_a_file_named_like_excel_that_is_not_says_so(
    tmp_path: Path, name: str, content: bytes | str, what: str
) -> None:
    import zipfile

    path = tmp_path / name
    if content == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("readme.txt", "hello")
    else:
        path.write_bytes(content)
    with pytest.raises(DataError) as info:
        read_table(path)
    assert info.value.one_line().startswith(f"{name} is named like an Excel file but is {what}")


def test_a_real_workbook_still_reads(tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    path = tmp_path / "book.xlsx"
    pd.DataFrame({"a": [1, 2, 3], "y": [0, 1, 0]}).to_excel(path, index=False)
    assert read_table(path)["a"].tolist() == [1, 2, 3]


def test_a_table_wider_than_the_cap_is_refused_from_its_header(tmp_path: Path) -> None:
    from mlpilot.platform.ml.io import count_columns

    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{i}" for i in range(30)) + "\n" + ",".join("1" * 30) + "\n")
    assert count_columns(path) == 30
    with pytest.raises(DataError) as info:
        profile_table(path, max_columns=20)
    assert "30 columns, more than the 20 mlpilot profiles (MLPILOT_MAX_COLUMNS)" in str(info.value)
    assert len(profile_table(path, max_columns=30).columns) == 30
    parquet = tmp_path / "wide.parquet"
    pd.DataFrame({f"c{i}": [1, 2] for i in range(30)}).to_parquet(parquet)
    assert count_columns(parquet) == 30
    with pytest.raises(DataError, match="MLPILOT_MAX_COLUMNS"):
        profile_table(parquet, max_columns=20)
    jsonl = tmp_path / "wide.jsonl"
    jsonl.write_text(json.dumps({f"c{i}": 1 for i in range(30)}) + "\n")
    with pytest.raises(DataError, match="MLPILOT_MAX_COLUMNS"):  # counted once read
        profile_table(jsonl, max_columns=20)


def test_the_column_cap_is_a_setting() -> None:
    from mlpilot.platform.config import Settings

    assert Settings.from_env({"MLPILOT_HOME": "/tmp/x"}).max_columns == 10_000
    assert (
        Settings.from_env({"MLPILOT_HOME": "/tmp/x", "MLPILOT_MAX_COLUMNS": "50"}).max_columns == 50
    )


def test_columns_of_peoples_names_are_identifiers_cars_and_a_few_directors_are_not() -> None:
    rng = np.random.default_rng(2)
    first = [f"{a}{b}" for a in ("Jo", "Ma", "Li", "Ro", "Sa", "Pe") for b in ("hn", "ry", "sa")]
    last = ["Smith", "Jones", "Brown", "Garcia", "Miller", "Davis", "Wilson", "Moore"]
    people = pd.Series([f"{rng.choice(first)} {rng.choice(last)}" for _ in range(500)])
    assert detect_column("name", people).kind == "identifier"  # by how the values are written
    few = pd.Series(rng.choice(first, 800))
    assert detect_column("first_name", few).kind == "identifier"  # by the column's name
    assert detect_column("姓名", few).kind == "identifier"
    cars = pd.Series(rng.choice([f"ford model {i}" for i in range(200)], 800))
    assert detect_column("name", cars).kind == "categorical"
    directors = pd.Series(rng.choice([f"Dr. {name}" for name in last], 800))
    assert detect_column("director", directors).kind == "categorical"
