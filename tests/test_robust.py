"""Regression tests for inputs and outputs that once crashed, hung or destroyed data.

Every broken input is generated here from a real capture and named ``generated_*``.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import analysis_cached, read_cached

from ncu_advisor import analyze, read_report
from ncu_advisor.analysis.metric_use import analysis_texts, lean_reading
from ncu_advisor.cli import main
from ncu_advisor.render.text import render_text, safe_text

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "sample_reports" / "forms"
DETAILS = FORMS / "forms_app.import.details.csv"
RAW = FORMS / "forms_app.import.raw.csv"
SUMMARY = FORMS / "forms_app.import.summary.csv"
REP = ROOT / "sample_reports" / "occupancy" / "occ_sweep.ncu-rep"
sys.path.insert(0, str(ROOT / "benchmarks"))
from generate import replicate_raw  # noqa: E402


def run(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *words):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ncu-advise: error: "), err
    for word in words:
        assert word in lines[0], lines[0]


def json_ok(code, out, err):
    assert code == 0, err
    return json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


# --- readers: columns by name, safe numbers and IDs, line endings ----------------------------

@pytest.mark.parametrize("column", ["Metric Name", "Section Name", "ID", "Metric Unit"])
def test_renamed_details_column_is_an_input_error_or_ignored(tmp_path, capsys, column):
    text = DETAILS.read_text().replace(f'"{column}"', '"Renamed Column"', 1)
    path = tmp_path / "generated_renamed.csv"
    path.write_text(text)
    code, out, err = run(["analyze", path, "-f", "json"], capsys)
    if column in ("Metric Name", "ID"):
        assert_one_line_error(code, err, repr(column))
    else:  # optional columns: read without them, the unknown one named in a warning
        data = json_ok(code, out, err)
        assert len(data["kernels"]) == 9
        assert any("'Renamed Column'" in w for w in data["warnings"])


def test_shuffled_raw_columns_read_the_same(tmp_path):
    import csv
    import io

    rows = list(csv.reader(io.StringIO(RAW.read_text())))
    order = list(range(len(rows[0])))[::-1]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(
        [[r[i] for i in order] for r in rows])
    path = tmp_path / "generated_shuffled.raw.csv"
    path.write_text(out.getvalue())
    a, b = read_report(RAW).wide(), read_report(path).wide()
    assert a.sort_index(axis=1).equals(b.sort_index(axis=1))


@pytest.mark.parametrize("number", ["1e400", "-1e999", "9" * 400])
def test_numbers_beyond_float_range_are_missing_with_a_warning(tmp_path, capsys, number):
    text = RAW.read_text().splitlines(keepends=True)
    cells = text[2].split('","')
    grid = next(i for i, c in enumerate(text[0].split('","')) if c == "launch__grid_size")
    cells[grid] = number
    text[2] = '","'.join(cells)
    path = tmp_path / "generated_huge.raw.csv"
    path.write_text("".join(text))
    data = json_ok(*run(["analyze", path, "-f", "json"], capsys))
    assert any("beyond float range" in w and "launch__grid_size" in w for w in data["warnings"])


@pytest.mark.parametrize("odd_id", [" 7", "0x1F", "NaN", "1e400", "-", "99999999999999999999"])
def test_non_integer_raw_ids_are_kept_without_an_id(tmp_path, capsys, odd_id):
    text = lines_of(RAW)
    text[2] = f'"{odd_id}"' + text[2][text[2].index(","):]
    path = tmp_path / "generated_odd_id.raw.csv"
    path.write_text("".join(text))
    data = json_ok(*run(["analyze", path, "-f", "json"], capsys))
    assert len(data["kernels"]) == 9  # the launch is kept
    if odd_id == " 7":  # read as ID 7, and so placed in ncu's ID order
        assert [k["id"] for k in data["kernels"]].count(7) == 2
    else:
        assert data["kernels"][0]["id"] is None
        assert any("not a whole number" in w and "launch row 1" in w for w in data["warnings"])


@pytest.mark.parametrize("odd_id", ["0x1F", "NaN", "1e400"])
def test_non_integer_process_id_in_details_is_skipped_with_a_warning(tmp_path, capsys, odd_id):
    text = DETAILS.read_text().replace('"0","2193"', f'"0","{odd_id}"')
    path = tmp_path / "generated_odd_pid.csv"
    path.write_text(text)
    data = json_ok(*run(["analyze", path, "-f", "json"], capsys))
    assert len(data["kernels"]) == 8 and any("not launch rows" in w for w in data["warnings"])


@pytest.mark.parametrize("ending", ["\r", "\r\n"])
@pytest.mark.parametrize("source", [DETAILS, RAW, SUMMARY])
def test_any_line_ending(tmp_path, source, ending):
    path = tmp_path / f"generated_eol_{len(ending)}.csv"
    path.write_bytes(source.read_text().replace("\n", ending).encode())
    report = read_report(path)
    assert len(report.launches) == 9 and report.warnings == []
    assert report.wide().equals(read_report(source).wide())


def test_summary_with_nvtx_domain_header_is_read(tmp_path):
    """An --nvtx summary page starts its header with the NVTX "Domain" column."""
    text = lines_of(SUMMARY)
    text = [('"Domain",' if i == 0 else '"<default domain>",') + ln for i, ln in enumerate(text)]
    path = tmp_path / "generated_nvtx.summary.csv"
    path.write_text("".join(text))
    assert len(read_report(path).launches) == 9


def test_nan_and_infinity_never_reach_the_json(tmp_path, capsys):
    text = DETAILS.read_text().replace('"Duration","us","', '"Duration","us","nan')
    path = tmp_path / "generated_nan.csv"
    path.write_text(text)
    json_ok(*run(["analyze", path, "-f", "json"], capsys))


@pytest.mark.slow  # six processes reading 3 MB rows (~6 s)
def test_a_row_over_one_megabyte_is_one_line_and_the_process_exits(tmp_path):
    """Arrow's reader once hung at exit (thread pool) after a row longer than its block."""
    text = lines_of(DETAILS)
    text.insert(5, '"0","1546","' + "x" * 3_000_000 + '"\n')
    path = tmp_path / "generated_long_row.csv"
    path.write_text("".join(text))
    raw_text = lines_of(RAW)
    raw_text.insert(3, '"9","' + "y" * 3_000_000 + '"\n')
    raw_path = tmp_path / "generated_long_row.raw.csv"
    raw_path.write_text("".join(raw_text))
    for p in (path, raw_path):
        for _ in range(3):
            result = subprocess.run([sys.executable, "-m", "ncu_advisor.cli", "analyze", str(p)],
                                    capture_output=True, text=True, timeout=120, check=False)
            assert result.returncode in (0, 2), result.stderr
            if result.returncode == 2:
                assert len(result.stderr.strip().splitlines()) == 1


# --- .ncu-rep: checked first, read in a child process ----------------------------------------

@pytest.mark.parametrize("cut", [10, 100, 5_000, 500_000])
def test_truncated_ncu_rep_is_one_line_or_a_warning(tmp_path, capsys, cut):
    path = tmp_path / "generated_truncated.ncu-rep"
    path.write_bytes(REP.read_bytes()[:cut])
    code, out, err = run(["analyze", path], capsys)
    if code == 0:  # the kernels before the cut, and a warning naming the loss
        assert "truncated" in err and "kernel(s)" in out
        assert all(ln.split()[-1] for ln in out.splitlines() if ln[:4].strip().isdigit())
    else:
        assert_one_line_error(code, err, str(path))


def test_native_reader_crash_is_one_line(tmp_path, capsys, monkeypatch):
    """A report that makes the native reader abort ends the child, not the command."""
    from ncu_advisor.readers import ncu_rep

    crasher = tmp_path / "generated_abort_child.py"
    crasher.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)\n")
    monkeypatch.setattr(ncu_rep, "_CHILD", crasher)
    code, _, err = run(["analyze", REP], capsys)
    assert_one_line_error(code, err, str(REP), "SIGABRT")


def test_native_reader_log_lines_stay_off_stderr(tmp_path, capsys, monkeypatch):
    from ncu_advisor.readers import ncu_rep

    chatty = tmp_path / "generated_chatty_child.py"
    chatty.write_text(f"import sys, runpy\nprint('==ERROR== noise', file=sys.stderr)\n"
                      f"sys.argv[0] = {str(ncu_rep._CHILD)!r}\n"
                      f"runpy.run_path({str(ncu_rep._CHILD)!r}, run_name='__main__')\n")
    monkeypatch.setattr(ncu_rep, "_CHILD", chatty)
    code, out, err = run(["analyze", REP], capsys)
    assert code == 0 and err == "" and "launch(es)" in out


# --- outputs: never over an input, all or nothing, one-line errors ---------------------------

@pytest.mark.parametrize("source", [DETAILS, REP])
def test_output_that_is_an_input_is_refused_before_any_work(tmp_path, capsys, source):
    copy = tmp_path / f"generated_input{source.suffix}"
    copy.write_bytes(source.read_bytes())
    before = copy.read_bytes()
    link = tmp_path / "generated_link"
    link.symlink_to(copy)
    for target in (copy, link, tmp_path / "." / copy.name):
        code, _, err = run(["analyze", copy, "-f", "json", "-o", target], capsys)
        assert_one_line_error(code, err, "one of the inputs")
    code, _, err = run(["analyze", tmp_path, "-f", "json", "-o", copy], capsys)
    assert_one_line_error(code, err, "input folder")
    assert copy.read_bytes() == before


def test_output_through_a_symlink_writes_the_target(tmp_path, capsys):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = run(["analyze", DETAILS, "-f", "json", "-o", link], capsys)
    assert code == 0, err
    assert link.is_symlink() and json.loads(target.read_text())["kernels"]


def test_output_to_a_fifo_writes_through(tmp_path, capsys):
    fifo = tmp_path / "generated_fifo"
    os.mkfifo(fifo)
    received = tmp_path / "received.json"
    with received.open("wb") as sink:  # a file, not a pipe: a full pipe would block both
        reader = subprocess.Popen(["cat", str(fifo)], stdout=sink)
        code, _, err = run(["analyze", DETAILS, "-f", "json", "-o", fifo], capsys)
        reader.wait(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(received.read_text())["kernels"]


def test_output_to_dev_stdout_is_not_replaced():
    result = subprocess.run([sys.executable, "-m", "ncu_advisor.cli", "analyze", str(DETAILS),
                             "-f", "json", "-o", "/dev/stdout"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kernels"] and Path("/dev/stdout").exists()


def test_output_errors_are_one_line(tmp_path, capsys):
    folder = tmp_path / "dir"
    folder.mkdir()
    code, _, err = run(["analyze", DETAILS, "-o", folder], capsys)
    assert_one_line_error(code, err, "is a folder")
    code, _, err = run(["analyze", DETAILS, "-o", tmp_path / "no" / "such" / "x.json"], capsys)
    assert_one_line_error(code, err, "does not exist")
    afile = tmp_path / "afile"
    afile.write_text("keep")
    code, _, err = run(["export", DETAILS, "-o", afile], capsys)
    assert_one_line_error(code, err, "not a folder")
    assert afile.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_one_line(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        code, _, err = run(["analyze", DETAILS, "-o", folder / "x.json"], capsys)
        assert_one_line_error(code, err, "Permission denied")
        code, _, err = run(["export", DETAILS, "-o", folder / "tables"], capsys)
        assert_one_line_error(code, err, "Permission denied")
    finally:
        folder.chmod(0o700)


def test_full_disk_leaves_no_partial_output(tmp_path, capsys, monkeypatch):
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "out.json"
    code, _, err = run(["analyze", DETAILS, "-f", "json", "-o", target], capsys)
    assert_one_line_error(code, err, str(target), "No space left")
    tables = tmp_path / "tables"
    code, _, err = run(["export", RAW, "-o", tables], capsys)
    assert_one_line_error(code, err, "No space left")
    assert not target.exists() and list(tables.iterdir()) == []


def test_export_is_all_or_nothing(tmp_path, capsys, monkeypatch):
    import pandas as pd

    real = pd.DataFrame.to_parquet
    calls = []

    def fail_third(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fail_third)
    out = tmp_path / "tables"
    out.mkdir()
    (out / "launches.parquet").write_text("previous run")
    code, _, err = run(["export", RAW, "-o", out], capsys)
    assert_one_line_error(code, err, "No space left")
    assert sorted(p.name for p in out.iterdir()) == ["launches.parquet"]
    assert (out / "launches.parquet").read_text() == "previous run"


# --- silent loss: folders, usage errors ------------------------------------------------------

@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable folders")
def test_unreadable_subfolder_is_named_in_a_warning(tmp_path):
    (tmp_path / "a.csv").write_bytes(DETAILS.read_bytes())
    hidden = tmp_path / "locked"
    hidden.mkdir()
    hidden.chmod(0)
    try:
        report = read_report(tmp_path)
    finally:
        hidden.chmod(0o700)
    assert any("locked" in w and "cannot list" in w for w in report.warnings)


@pytest.mark.parametrize("args", [["analyze", "-f", "xml", str(DETAILS)], ["analyze"],
                                  ["analyze", "--top"], ["export", str(DETAILS), "--to", "x"]])
def test_usage_errors_are_one_line(capsys, args):
    code, _, err = run(args, capsys)
    assert_one_line_error(code, err)


def test_control_characters_in_names_are_escaped(capsys, tmp_path):
    evil = "k\x1b[2J\x07\r\u2028\u202eevil"
    text = DETAILS.read_text().replace("copy_coalesced(float *", evil + "(float *")
    path = tmp_path / "generated_evil.csv"
    path.write_text(text)
    code, out, _ = run(["analyze", path], capsys)
    assert code == 0
    assert not any(c in out for c in "\x1b\x07\r\u2028\u202e")
    assert "k\\x1b[2J\\x07\\x0d\\u2028\\u202eevil" in out
    assert safe_text("plain <name>") == "plain <name>"


# --- lean and linear reading ----------------------------------------------------------------

@pytest.mark.parametrize("path", [RAW, FORMS / "forms_app.ncu-rep.gz", DETAILS])
def test_lean_read_analyzes_identically(path):
    full = analysis_cached(path).to_dict()
    lean_report = read_report(path, **lean_reading())
    lean = analyze(lean_report).to_dict()
    for d in (full, lean):
        d.pop("generated_at")
    assert lean == full
    if path != DETAILS:
        assert lean_report.metrics["metric"].nunique() < 400 < len(read_cached(path).wide().columns)
    if path == RAW:  # numbers keep no text, except those the analysis reads
        texts = lean_report.metrics.loc[lean_report.metrics["text"].notna()]
        kept_numbers = texts.loc[texts["value"].notna(), "metric"].unique().tolist()
        assert 0 < len(texts) < len(lean_report.metrics) / 10
        assert set(kept_numbers) <= analysis_texts() and kept_numbers
        assert "NVIDIA H200" in texts["text"].tolist()


@pytest.mark.slow  # a scaling check (benchmarks/bench_scale.py measures it at size)
def test_to_dict_is_linear_in_launches(tmp_path):
    """10x the launches of a real raw capture must not cost 100x (it was quadratic)."""
    import time

    src = ROOT / "sample_reports" / "occupancy" / "occ_probe.import.raw.base.csv.gz"
    times = []
    for n in (200, 2000):
        path = tmp_path / f"generated_{n}.raw.csv"
        replicate_raw(src, path, launches=n)
        result = analyze(read_report(path, **lean_reading()))
        best = float("inf")
        for _ in range(3):  # the fastest of three: a loaded machine slows single runs
            start = time.perf_counter()
            data = result.to_dict()
            best = min(best, time.perf_counter() - start)
        times.append(best)
        assert len(data["kernels"]) == n
    assert times[1] < 25 * times[0]  # linear: ~8x measured; quadratic would be ~100x


def test_gzip_raw_is_streamed_too(tmp_path):
    path = tmp_path / "generated.raw.csv.gz"
    path.write_bytes(gzip.compress(RAW.read_bytes()))
    assert read_report(path).wide().equals(read_report(RAW).wide())


def test_text_output_of_generated_many_launches(tmp_path):
    path = tmp_path / "generated_many.raw.csv"
    replicate_raw(RAW, path, launches=90)
    text = render_text(analyze(read_report(path, **lean_reading())).to_dict())
    assert text.startswith("ncu-advise: 90 launch(es)")


def test_undecodable_names_from_a_damaged_report_become_replacement_characters():
    """A damaged .ncu-rep made the native reader return a name with a lone surrogate, which
    pyarrow refused (internal error, found by the long fuzz run); records are cleaned on
    arrival from the child reader."""
    from ncu_advisor.readers.ncu_rep import _valid_text

    record = ("launch", {"name": "k\udc80"}, ["m\udcff"], [""], [1.0], {0: "x\udc80"}, [])
    clean = _valid_text(record)
    assert clean[1]["name"] == "k\ufffd" and clean[2] == ["m\ufffd"] and clean[5][0] == "x\ufffd"
    assert clean[4] == [1.0] and isinstance(clean, tuple)
    "".join([clean[1]["name"]]).encode("utf-8")  # valid UTF-8 now


def test_json_writer_is_strict_whatever_the_values():
    """orjson writes the JSON; what it refuses (an integer beyond 64 bits, a lone surrogate
    from a damaged name) goes through the standard library with the same clean-up."""
    import numpy as np

    from ncu_advisor import json_text

    value = {"nan": float("nan"), "inf": np.float64("inf"), "n": np.int32(3), "t": (1, 2),
             "name": "k<\u00e9\u2028\x1b>"}
    assert json.loads(json_text.dumps(value)) == {"nan": None, "inf": None, "n": 3,
                                                  "t": [1, 2], "name": "k<\u00e9\u2028\x1b>"}
    for odd in ({"id": 10**30, "x": float("nan")}, {"name": "k\udc80", "x": float("inf")}):
        text = json_text.dumps(odd)
        parsed = json.loads(text)  # strict: no NaN or Infinity token
        assert parsed["x"] is None and b"NaN" not in text and b"Infinity" not in text
    nested = json_text.dumps({"a": [1, {"b": 2}]}, depth=2)
    assert nested.splitlines()[1] == b'      "a": ['  # 2 spaces of its own + 4 of the depth
    with pytest.raises(TypeError):
        json_text.dumps({"x": object()})
