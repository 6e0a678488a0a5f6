"""Inputs that once gave wrong numbers with exit 0 and no warning (issue 25): numbers in other
locales, unit spellings, repeated or shuffled launch IDs, a page given twice. Each input is
made here from a real capture; each must now read right, or be refused / warned about."""

from __future__ import annotations

import csv
import io
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ncu_advisor.errors import ReportParseError
from ncu_advisor.readers import read_report
from ncu_advisor.readers.common import parse_numbers
from ncu_advisor.units import is_known, normalize_unit

ROOT = Path(__file__).resolve().parent.parent
DETAILS = ROOT / "sample_reports" / "demos" / "coalescing.details.csv"
RAW = ROOT / "sample_reports" / "demos" / "coalescing.raw.csv"
_EN_NUMBER = re.compile(r"^-?\d{1,3}(,\d{3})*(\.\d+)?$|^-?\d+(\.\d+)?$")


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _write(rows: list[list[str]], path: Path) -> Path:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
    return path


def _localized(src: Path, dst: Path, decimal: str, group: str) -> Path:
    """The capture with its numbers written as a locale would (1,234.5 -> 1.234,5)."""
    rows = _rows(src)
    header = rows[0]
    columns = ([header.index(c) for c in ("Metric Value", "Estimated Speedup") if c in header]
               if "Metric Value" in header else range(11, len(header)))
    for row in rows[1:]:
        for i in columns:
            if i < len(row) and _EN_NUMBER.match(row[i]):
                row[i] = row[i].replace(",", "\0").replace(".", decimal).replace("\0", group)
    return _write(rows, dst)


def _numbers(report) -> pd.Series:
    m = report.metrics
    return m.set_index([m["launch"], m["metric"].astype(str), m["label"].astype(str),
                        m["section"].astype(str)])["value"]


@pytest.mark.parametrize("src", [DETAILS, RAW], ids=["details", "raw"])
@pytest.mark.parametrize("decimal, group", [
    (",", "."), (",", " "), (",", "\u00a0"), (",", "\u202f"), (".", "'")],
    ids=["german", "french-space", "french-nbsp", "french-nnbsp", "swiss"])
def test_numbers_of_any_locale_read_the_same(tmp_path, src, decimal, group):
    want = read_report(src)
    got = read_report(_localized(src, tmp_path / f"x{src.name}", decimal, group))
    a, b = _numbers(want), _numbers(got)
    assert a.notna().sum() == b.notna().sum()
    assert np.allclose(a.dropna().to_numpy(), b[a.notna().to_numpy()].to_numpy())
    assert got.launches["duration_ns"].tolist() == want.launches["duration_ns"].tolist()


def test_two_number_formats_in_one_file_are_refused(tmp_path):
    rows = _rows(DETAILS)
    i = rows[0].index("Metric Value")
    hit = next(r for r in rows[1:] if len(r) > i and re.fullmatch(r"\d+\.\d+", r[i]))
    hit[i] = hit[i].replace(".", ",")
    with pytest.raises(ReportParseError, match="two formats"):
        read_report(_write(rows, tmp_path / "mixed.details.csv"))


@pytest.mark.parametrize("text, value", [
    ("3.199.470.873,31", 3199470873.31), ("41,97", 41.97), ("1'215'000.00", 1215000.0),
    ("1\u202f215\u202f000,5", 1215000.5), ("1,2,3", np.nan)])
def test_parse_numbers_in_other_formats(text, value):
    got = parse_numbers(pd.Series([text]))[0]
    assert (np.isnan(got) and np.isnan(value)) or got == pytest.approx(value)


@pytest.mark.parametrize("unit, base, factor", [
    ("\u00b5s", "ns", 1e3), ("\u03bcs", "ns", 1e3), ("sec", "ns", 1e9), ("usecond", "ns", 1e3),
    ("KB", "byte", 1e3), ("KiB", "byte", 1024.0), ("GiB", "byte", 2.0**30),
    ("TB/s", "byte/s", 1e12), ("GHz", "hz", 1e9), ("byte/\u00b5s", "byte/s", 1e6),
    ("Kinst", "inst", 1e3), ("sector/ms", "sector/s", 1e3)])
def test_every_spelling_of_a_unit(unit, base, factor):
    assert normalize_unit(unit) == (base, pytest.approx(factor))


@pytest.mark.parametrize("unit", ["furlong", "Kfoo/s", "byte/s/s", "xs"])
def test_an_unknown_unit_is_not_the_base_unit(unit):
    assert not is_known(unit) and np.isnan(normalize_unit(unit)[1])


def _with_unit(src: Path, dst: Path, label: str, unit: str) -> Path:
    rows = _rows(src)
    h = rows[0]
    for row in rows[1:]:
        if len(row) > h.index("Metric Unit") and row[h.index("Metric Name")] == label:
            row[h.index("Metric Unit")] = unit
    return _write(rows, dst)


def test_an_unknown_unit_is_missing_with_a_warning_naming_the_metric(tmp_path):
    got = read_report(_with_unit(DETAILS, tmp_path / "u.details.csv", "Duration", "furlong"))
    assert got.launches["duration_ns"].isna().all()
    assert any("unknown unit" in w and "Duration" in w for w in got.warnings)


@pytest.mark.parametrize("unit, scale", [("\u00b5s", 1e3), ("sec", 1e9), ("", None)])
def test_a_duration_in_another_spelling(tmp_path, unit, scale):
    rows = _rows(DETAILS)
    h = rows[0]
    for row in rows[1:]:
        if len(row) > h.index("Metric Unit") and row[h.index("Metric Name")] == "Duration":
            row[h.index("Metric Unit")] = unit
            row[h.index("Metric Value")] = "49"
    got = read_report(_write(rows, tmp_path / "d.details.csv"))
    if scale is None:  # an emptied unit is not nanoseconds: missing, and said
        assert got.launches["duration_ns"].isna().all()
        assert any("gpu__time_duration.sum" in w for w in got.warnings)
    else:
        assert got.launches["duration_ns"].tolist() == [49 * scale] * len(got.launches)


def test_a_raw_page_with_an_unknown_unit(tmp_path):
    rows = _rows(RAW)
    i = rows[0].index("gpu__time_duration.sum")
    rows[1][i] = "fortnight"
    got = read_report(_write(rows, tmp_path / "u.raw.csv"))
    assert got.launches["duration_ns"].isna().all()
    assert any("unknown unit" in w and "gpu__time_duration.sum" in w for w in got.warnings)


def _launches(report) -> list[tuple]:
    return list(zip(report.launches["id"], report.launches["name"],
                    report.launches["duration_ns"], strict=True))


def test_shuffled_rows_keep_ncus_launch_order(tmp_path):
    want = read_report(DETAILS)
    rows = _rows(DETAILS)
    body = rows[1:]
    random.Random(3).shuffle(body)
    got = read_report(_write([rows[0], *body], tmp_path / "shuffled.details.csv"))
    assert _launches(got) == _launches(want)
    raw = _rows(RAW)
    got = read_report(_write([*raw[:2], *raw[2:][::-1]], tmp_path / "shuffled.raw.csv"))
    assert _launches(got) == _launches(read_report(RAW))


def _repeat_first_launch(rows: list[list[str]], form: str) -> list[list[str]]:
    """A second launch of the first kernel under the same ID, lasting 57 us."""
    h = rows[0]
    if form == "raw":
        extra = list(rows[2])
        extra[h.index("gpu__time_duration.sum")] = "57,000"
        return [*rows[:3], extra, *rows[3:]]
    first = [r for r in rows[1:] if r[0] == rows[1][0]]
    extra = [list(r) for r in first]
    for r in extra:
        if len(r) > h.index("Metric Value") and r[h.index("Metric Name")] == "Duration":
            r[h.index("Metric Value")] = "57,000"
    return [h, *first, *extra, *[r for r in rows[1:] if r[0] != rows[1][0]]]


@pytest.mark.parametrize("src", [DETAILS, RAW], ids=["details", "raw"])
def test_a_repeated_id_never_merges_two_launches(tmp_path, src):
    form = "raw" if src is RAW else "details"
    want = read_report(src)
    got = read_report(_write(_repeat_first_launch(_rows(src), form), tmp_path / f"r.{src.name}"))
    assert len(got.launches) == len(want.launches) + 1
    assert 57000.0 in got.launches["duration_ns"].tolist()
    assert got.launches["duration_ns"].sum() == pytest.approx(
        want.launches["duration_ns"].sum() + 57000.0)
    assert any("repeated IDs" in w for w in got.warnings)


@pytest.mark.parametrize("src", [DETAILS, RAW], ids=["details", "raw"])
def test_a_page_given_twice_makes_no_phantom_launch(tmp_path, src):
    twice = tmp_path / f"twice.{src.name}"
    twice.write_text(src.read_text() * 2)
    got = read_report(twice)
    want = read_report(src)
    assert _launches(got) == _launches(want)
    assert "Kernel Name" not in got.launches["name"].tolist()
    assert len(got.ncu_rules) == len(want.ncu_rules)
    assert any("repeated" in w for w in got.warnings)


def test_a_units_row_repeated_is_no_launch(tmp_path):
    rows = _rows(RAW)
    got = read_report(_write([*rows[:2], rows[1], *rows[2:]], tmp_path / "units2.raw.csv"))
    assert _launches(got) == _launches(read_report(RAW))
    assert any("units row" in w for w in got.warnings)
