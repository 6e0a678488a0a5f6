"""A mutation corpus over the real captures (issue 25): each capture, changed by each mutator
below, is read and analyzed in this process. Asserted over every case: no exception but the
project's own one-line errors, the inputs unmodified, no negative time or saving, and for the
mutators that keep the numbers (another locale, shuffled rows, a page given twice, a repeated
units row, another spelling of a unit, a program's own output before the header) the same
launch durations as the unmutated capture, or a warning that says why not.

Slow (``-m slow``) over one capture of each form in each folder; ``NCU_ADVISE_MUTATION=all``
takes every capture (the issue-25 run: 206 captures, 0 failures, 533 s). The default run
takes one capture of each form.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import os
import random
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ncu_advisor import analyze, read_report
from ncu_advisor.errors import NcuAdviseError
from ncu_advisor.readers.common import read_input_bytes

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_reports"
_TOKEN = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+\.\d+")
_TOO_BIG = 12 << 20  # decompressed bytes: larger captures only make the run longer


def _text(path: Path) -> str | None:
    raw = read_input_bytes(path)
    if len(raw) > _TOO_BIG:
        return None
    return raw.decode("utf-8")


def _form(text: str) -> str | None:
    head = text[:4096]
    if '"Metric Value"' in head and '"Invocations"' not in head:
        return "details"
    if '"ID","Process ID"' in head and '"Metric Name"' not in head:
        return "raw"
    return None


def _form_of(path: Path) -> str:
    """The export form a capture's name says (``.details.csv``, ``.raw.csv.gz``, ...)."""
    name = path.name.removesuffix(".gz").removesuffix(".xz")
    return next((f for f in (".live.csv", ".details.csv", ".raw.csv", ".txt", ".csv")
                 if name.endswith(f)), path.suffix)


def _captures() -> list[Path]:
    """Every capture with NCU_ADVISE_MUTATION=all; by default one per folder and form.

    The whole corpus (about 230 captures x 11 mutators) took 530-930 s, most of CI's time;
    one capture of each form in each folder of sample_reports/ keeps every reader and every
    kind of capture in the run (CI), and the whole corpus stays one variable away.
    """
    out = []
    for path in sorted(SAMPLES.rglob("*.csv*")):
        if "logs" in path.parts or ".source." in path.name or ".session." in path.name:
            continue
        out.append(path)
    if os.environ.get("NCU_ADVISE_MUTATION") == "all":
        return out
    seen: set[tuple[Path, str]] = set()
    sample = []
    for path in out:
        key = (path.parent, _form_of(path))
        if key not in seen:
            seen.add(key)
            sample.append(path)
    return sample


def _rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The lines before ncu's header, and the CSV rows from it on."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if '"Kernel Name"' in ln)
    return lines[:start], list(csv.reader(io.StringIO("".join(lines[start:]))))


def _join(pre: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return "".join(pre) + out.getvalue()


def _value_columns(rows: list[list[str]], form: str) -> list[int]:
    header = rows[0]
    if form == "details":
        return [header.index(c) for c in ("Metric Value", "Estimated Speedup") if c in header]
    return [i for i, h in enumerate(header) if i >= 11]


def _locale(decimal: str, group: str) -> Callable[[str, str], str | None]:
    def mutate(text: str, form: str) -> str | None:
        pre, rows = _rows(text)
        cols = _value_columns(rows, form)
        def swap(m: re.Match) -> str:
            return m.group().replace(",", "\0").replace(".", decimal).replace("\0", group)

        for row in rows[1:]:
            for i in cols:
                if i < len(row):  # every number in the cell: aggregates, exponents too
                    row[i] = _TOKEN.sub(swap, row[i])
        return _join(pre, rows)
    return mutate


def _shuffled(text: str, form: str) -> str | None:
    pre, rows = _rows(text)
    body = rows[2:] if form == "raw" else rows[1:]
    random.Random(7).shuffle(body)
    return _join(pre, rows[:2] + body if form == "raw" else rows[:1] + body)


def _twice(text: str, form: str) -> str | None:
    return text + text


def _units_twice(text: str, form: str) -> str | None:
    if form != "raw":
        return None
    pre, rows = _rows(text)
    return _join(pre, [rows[0], rows[1], rows[1], *rows[2:]])


def _micro_sign(text: str, form: str) -> str | None:
    """Every ``us`` unit spelled ``µs``."""
    pre, rows = _rows(text)
    if form == "raw":
        rows[1] = ["\u00b5s" if u == "us" else u for u in rows[1]]
    else:
        i = rows[0].index("Metric Unit")
        for row in rows[1:]:
            if len(row) > i and row[i] == "us":
                row[i] = "\u00b5s"
    return _join(pre, rows)


def _program_output(text: str, form: str) -> str | None:
    return 'caf\xe9 "Kernel Name" printed by the program\n' + text


def _negative(text: str, form: str) -> str | None:
    pre, rows = _rows(text)
    if form == "raw":
        if "gpu__time_duration.sum" not in rows[0]:
            return None
        i = rows[0].index("gpu__time_duration.sum")
        rows[2][i] = "-" + rows[2][i]
    else:
        m, v = rows[0].index("Metric Name"), rows[0].index("Metric Value")
        row = next((r for r in rows[1:] if len(r) > v and r[m] == "Duration"), None)
        if row is None:
            return None
        row[v] = "-" + row[v]
    return _join(pre, rows)


def _cut(text: str, form: str) -> bytes:
    data = gzip.compress(text.encode("utf-8"), mtime=0)
    return data[: int(len(data) * 0.97)]


def _flip(text: str, form: str) -> bytes:
    data = bytearray(text.encode("utf-8"))
    rnd = random.Random(len(data))
    for _ in range(8):
        data[rnd.randrange(len(data))] = rnd.randrange(256)
    return bytes(data)


# Mutators that keep every number: the durations must come out the same (or be warned about).
SAME_NUMBERS = {
    "german": _locale(",", "."), "french": _locale(",", "\u202f"), "swiss": _locale(".", "'"),
    "shuffled": _shuffled, "twice": _twice, "units-twice": _units_twice,
    "micro-sign": _micro_sign, "program-output": _program_output,
}
OTHER = {"negative": _negative, "cut": _cut, "flip": _flip}


def _durations(report) -> list[float]:
    return sorted(report.launches["duration_ns"].fillna(-1.0).tolist())


def _check(original: Path, name: str, mutate, tmp_path: Path) -> str:
    text = _text(original)
    if text is None:
        return "skipped"
    form = _form(text)
    if form is None:
        return "skipped"
    mutated = mutate(text, form)
    if mutated is None:
        return "skipped"
    suffix = ".csv.gz" if name == "cut" else ".csv"
    path = tmp_path / f"{original.name.split('.')[0]}.{name}.{form}{suffix}"
    data = mutated if isinstance(mutated, bytes) else mutated.encode("utf-8")
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    before = hashlib.sha256(original.read_bytes()).hexdigest()
    try:
        report = read_report(path)
        result = analyze(report)
    except NcuAdviseError as exc:
        message = str(exc)
        assert "\n" not in message.strip(), message
        assert name not in SAME_NUMBERS, f"{name} of {original.name} refused: {message}"
        return "refused"
    finally:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        assert hashlib.sha256(original.read_bytes()).hexdigest() == before
    durations = report.launches["duration_ns"].dropna()
    assert (durations >= 0).all(), f"negative time: {name} of {original.name}"
    assert result.total_time_ns >= 0
    for finding in result.findings:
        saving = finding.estimated_saving_ns
        assert saving is None or not saving < 0, f"negative saving: {finding.rule}"
    if name in SAME_NUMBERS:
        want = read_report(original)
        got = _durations(report)
        if got != _durations(want):
            assert report.warnings, f"{name} of {original.name}: durations changed silently"
            assert np.allclose(sorted(d for d in got if d >= 0),
                               sorted(d for d in _durations(want) if d >= 0)) \
                or any("repeated" in w or "unit" in w for w in report.warnings)
        assert "Kernel Name" not in report.launches["name"].tolist()
    return "read"


MUTATORS = {**SAME_NUMBERS, **OTHER}
QUICK = [SAMPLES / "demos" / "coalescing.details.csv", SAMPLES / "demos" / "coalescing.raw.csv"]


@pytest.mark.parametrize("name", list(MUTATORS))
@pytest.mark.parametrize("capture", QUICK, ids=lambda p: p.name)
def test_mutations_of_one_capture_per_form(tmp_path, capture, name):
    assert _check(capture, name, MUTATORS[name], tmp_path) in ("read", "refused", "skipped")


def _marked(captures: list[Path]) -> list:
    """The first capture of each form runs with -m slow (CI); the rest of the sample is a sweep."""
    forms: set[str] = set()
    out = []
    for path in captures:
        first = _form_of(path) not in forms
        forms.add(_form_of(path))
        out.append(path if first else pytest.param(path, marks=pytest.mark.sweep))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("capture", _marked(_captures()),
                         ids=lambda p: str(p.relative_to(SAMPLES)))
def test_mutations_of_every_capture(tmp_path, capture):
    outcomes = {name: _check(capture, name, mutate, tmp_path)
                for name, mutate in MUTATORS.items()}
    assert set(outcomes.values()) <= {"read", "refused", "skipped"}
