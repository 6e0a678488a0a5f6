"""Plain-text ncu output, the session and source pages, and how a file's form is told.

Every capture with both a plain-text (``ncu --import r.ncu-rep > r.txt``) and a details CSV
export (``--csv``) of the same report must give the same launches, metrics and ncu rule
results. Broken inputs are generated here (tmp_path) and named generated_*.
"""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ncu_advisor import ReportParseError, analyze, read_report
from ncu_advisor.cli import main
from ncu_advisor.readers import detect_form, read_head
from ncu_advisor.readers.common import nvtx_ranges

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_reports"
FOREIGN = SAMPLES / "foreign"
LINEINFO = SAMPLES / "demos_lineinfo"
LIVE_TEXT = SAMPLES / "forms" / "forms_app.live.full.txt"


def _details_of(text: Path) -> Path | None:
    base = re.sub(r"\.txt(\.gz)?$", "", str(text))
    return next((Path(p) for p in (f"{base}.details.csv", f"{base}.details.csv.gz")
                 if Path(p).exists()), None)


# Every capture exported both ways (the source pages are another page, not the details one).
PAIRS = sorted((t, _details_of(t)) for folder in (FOREIGN, LINEINFO)
               for t in folder.glob("*.txt*") if _details_of(t) is not None)


@pytest.fixture(scope="module", params=PAIRS, ids=[t.name for t, _ in PAIRS])
def pair(request):
    """(text report, details CSV report) of one capture, each read once."""
    text, details = request.param
    return read_report(text), read_report(details)


def test_every_capture_with_both_forms_is_compared():
    assert len(PAIRS) >= 20
    assert {t.name for t, _ in PAIRS} >= {"torch_ops.txt.gz", "triton_kernels.txt",
                                          "coalescing.txt", "cupy_builtins.txt.gz"}


def test_text_gives_the_launches_of_the_details_csv(pair):
    text, details = pair
    columns = ["id", "process_id", "process", "host", "name", "short_name", "grid_x", "grid_y",
               "grid_z", "block_x", "block_y", "block_z", "device", "cc", "context", "stream",
               "nvtx", "duration_ns", "invocations"]
    pd.testing.assert_frame_equal(text.launches[columns], details.launches[columns])
    assert (text.launches["form"] == "text").all()
    assert text.launches["duration_ns"].gt(0).all()


def _keyed(metrics: pd.DataFrame) -> pd.DataFrame:
    metrics = metrics.astype({"section": str, "label": str})  # the CSV's are categoricals
    occurrence = metrics.groupby(["launch", "section", "label"], dropna=False).cumcount()
    return metrics.assign(occurrence=occurrence).set_index(
        ["launch", "section", "label", "occurrence"]).sort_index()


def test_text_gives_every_metric_of_the_details_csv_with_the_same_value(pair):
    text, details = _keyed(pair[0].metrics), _keyed(pair[1].metrics)
    assert text.index.equals(details.index)  # the same rows, no more, no less
    assert len(text) > 80 * len(pair[0].launches)
    # Same printed precision, same unit conversion: equal, not merely close.
    np.testing.assert_array_equal(text["value"].to_numpy(), details["value"].to_numpy())
    for column in ("metric", "unit", "text"):
        assert text[column].fillna("").tolist() == details[column].fillna("").tolist(), column
    assert text["metric"].notna().mean() > 0.95  # labels resolved with the same table


def _rules(report) -> pd.DataFrame:
    rules = report.ncu_rules.assign(
        description=report.ncu_rules["description"].str.split().str.join(" "),
        speedup_type=report.ncu_rules["speedup_type"].fillna(""),
        speedup=report.ncu_rules["speedup"].fillna(-1.0))
    return rules.drop(columns="title").sort_values(
        ["launch", "section", "rule", "type", "description"]).reset_index(drop=True)


def test_text_gives_the_ncu_rule_results_of_the_details_csv(pair):
    text, details = pair
    per_launch = [
        sorted(zip(r["rule"], r["type"], strict=True))
        for r in (g for _, g in text.ncu_rules.groupby("launch"))]
    expected = [
        sorted(zip(r["rule"], r["type"], strict=True))
        for r in (g for _, g in details.ncu_rules.groupby("launch"))]
    assert per_launch == expected
    # Section ids, speedups and the unwrapped descriptions agree too.
    pd.testing.assert_frame_equal(_rules(text), _rules(details), check_dtype=False)


def test_rule_ids_are_ncu_ids_not_placeholders(pair):
    rules = pair[0].ncu_rules["rule"]
    assert rules.str.fullmatch(r"[A-Za-z0-9]+").all(), rules[rules.str.contains(".")]


def test_wrapped_url_longer_than_the_line_is_joined_without_a_space():
    rules = read_report(LINEINFO / "bank-conflicts.txt").ncu_rules
    shared = rules[rules["rule"] == "UncoalescedSharedAccess"]["description"].iloc[0]
    assert "#shared-memory-in-matrix-multiplication-c-ab)" in shared
    assert "The CUDA Best Practices Guide (https://" in shared


def test_text_analyzes_like_the_details_csv():
    text = analyze(read_report(LINEINFO / "coalescing.txt")).to_dict()
    details = analyze(read_report(LINEINFO / "coalescing.details.csv")).to_dict()

    def findings(data):
        return [(k["id"], f["rule"], f["severity"]) for k in data["kernels"]
                for f in k["findings"]]

    assert findings(text) == findings(details)
    assert findings(text)


# ------------------------------------------------------------------------------ NVTX


def test_nvtx_stack_in_text_gives_the_csv_ranges():
    text = read_report(FOREIGN / "torch_ops.txt.gz").launches["nvtx"]
    assert text.iloc[0] == "model/block0/linear_fp32"
    assert "data/sort/cub::DeviceRadixSort" in set(text)
    assert "data/cumsum/cub::DeviceScan::InclusiveScan" in set(text)
    assert text.notna().all()


def test_csv_nvtx_keeps_registered_cub_range_names_whole():
    ranges = read_report(FOREIGN / "torch_ops.details.csv.gz").launches["nvtx"]
    assert "data/sort/cub::DeviceRadixSort" in set(ranges)
    assert not ranges.dropna().str.contains(":none").any()


@pytest.mark.parametrize(("column", "ranges"), [
    ('1662  "<default domain>:copies:none:none:none:none:none:none" ', "copies"),
    ('514  "<default domain>:data:none:none:none:none:none:none"  '
     '"CCCL:cub::DeviceRadixSort:none:none:none:none:REGISTERED:cub::DeviceRadixSort" ',
     "data/cub::DeviceRadixSort"),
    ('7  "<default domain>:a:b:none:none:none:none:none:none" ', "a:b"),
    ('7  "dom:r:none:none:none:none:ASCII:another message" ', "r"),
    ("", None),
])
def test_nvtx_ranges(column, ranges):
    assert nvtx_ranges(column) == ranges


# ------------------------------------------------------------------------------ live logs


def test_live_log_with_program_output_and_prof_lines():
    report = read_report(LIVE_TEXT)
    launches = report.launches
    assert launches["id"].tolist() == list(range(9))
    prof = [ln for ln in LIVE_TEXT.read_text().splitlines() if ln.startswith("==PROF== Profiling")]
    # The order ncu profiled them in (its "Profiling "name" - N" lines) is the order of IDs.
    assert launches["short_name"].tolist() == [re.search(r'"(.+?)"', ln)[1] for ln in prof]
    assert launches["process"].eq("forms_app").all() and launches["process_id"].eq(8154).all()
    assert launches["duration_ns"].iloc[0] == pytest.approx(49150.0)  # "Duration us 49.15"
    messages = report.session["ncu_messages"]
    assert messages[0].startswith("==WARNING== Note: Running with unmodified GPU clocks")
    assert any(m.startswith("==PROF== Disconnected") for m in messages)
    assert any("without fixed GPU frequencies" in m and "(9 of 9 launches)" in m
               for m in messages)
    assert not any("forms_app:" in m for m in messages)  # the program's own output
    assert report.session["clock_control"] == "none"
    assert report.warnings == []


def test_text_read_with_its_details_csv_merges_into_one_set_of_launches():
    report = read_report([FOREIGN / "triton_kernels.details.csv", FOREIGN / "triton_kernels.txt"])
    alone = read_report(FOREIGN / "triton_kernels.details.csv")
    assert len(report.launches) == len(alone.launches) == 4
    assert len(report.ncu_rules) == len(alone.ncu_rules)  # wrapped copies are the same result


# ------------------------------------------------------------------------------ forms


@pytest.mark.parametrize(("path", "form"), [
    (LIVE_TEXT, "text"),
    (FOREIGN / "torch_ops.txt.gz", "text"),
    (FOREIGN / "logs" / "torch_ops.ncu.log", "text"),
    (FOREIGN / "torch_ops.details.csv.gz", "csv"),
    (FOREIGN / "torch_ops.raw.csv.gz", "csv"),
    (SAMPLES / "forms" / "forms_app.live.full.csv", "csv"),
    (SAMPLES / "forms" / "forms_app.import.summary.csv", "csv"),
    (FOREIGN / "torch_ops.session.csv", "session"),
    (LINEINFO / "coalescing.source.csv", "source"),
    (LINEINFO / "local-memory.source.csv.gz", "source"),
    (LINEINFO / "coalescing.source.txt", "source-text"),
    (FOREIGN / "triton_kernels.ncu-rep.gz", "ncu-rep"),
])
def test_detect_form(path, form):
    assert detect_form(path, read_head(path)) == form


@pytest.mark.parametrize("name", ["generated_profile.out", "generated_profile.csv"])
def test_text_output_saved_under_another_name_is_found_by_content(tmp_path, name):
    copy = tmp_path / name
    shutil.copy(FOREIGN / "triton_kernels.txt", copy)
    assert detect_form(copy, read_head(copy)) == "text"
    assert len(read_report(copy).launches) == 4


def test_folder_reads_ncu_text_and_leaves_other_text_files_alone(tmp_path):
    shutil.copy(FOREIGN / "triton_kernels.txt", tmp_path / "triton_kernels.txt")
    shutil.copy(FOREIGN / "host.txt", tmp_path / "host.txt")
    shutil.copy(FOREIGN / "logs" / "triton_kernels.ncu.log", tmp_path / "run.log")
    with gzip.open(tmp_path / "generated_copy.txt.gz", "wb") as fh:
        fh.write((LINEINFO / "coalescing.txt").read_bytes())
    report = read_report(tmp_path)
    assert sorted(Path(s).name for s in report.sources) == ["generated_copy.txt.gz",
                                                            "triton_kernels.txt"]
    assert len(report.launches) == 6
    # The ncu log is ncu output without results: skipped with a reason; notes are not read.
    assert len(report.warnings) == 1
    assert "run.log" in report.warnings[0] and "no kernel results" in report.warnings[0]


# ------------------------------------------------------------------------------ session, source


def test_session_page_alone_is_a_one_line_error_that_says_what_to_export():
    path = FOREIGN / "torch_ops.session.csv"
    with pytest.raises(ReportParseError) as err:
        read_report(path)
    message = str(err.value)
    assert message.startswith(f"{path}: a --page session export")
    assert "--page details|raw" in message and "\n" not in message


def test_session_page_with_the_details_export_adds_its_facts():
    report = read_report([FOREIGN / "torch_ops.session.csv",
                          FOREIGN / "torch_ops.details.csv.gz"])
    assert len(report.launches) == 32
    session = report.session
    assert session["ncu_command"].endswith("--nvtx --profile-from-start off python3 "
                                           "sample_programs/torch_ops.py")
    assert session["created"] == "2026-Dec-01 03:16:58"
    assert session["ncu_version"] == "2025.3.1.0"
    assert session["section_set"] == "full" and session["clock_control"] == "none"
    assert session["gpu"] == "NVIDIA H200" and session["cc"] == "9.0"
    assert session["sm_count"] == 132
    assert "Target IP Addresses" not in str(session)


def test_source_page_alone_is_a_one_line_error_naming_the_page():
    for path in (LINEINFO / "coalescing.source.csv", LINEINFO / "coalescing.source.txt"):
        with pytest.raises(ReportParseError) as err:
            read_report(path)
        message = str(err.value)
        assert message.startswith(f"{path}: a --page source export") and "\n" not in message


def test_source_page_with_the_details_export_keeps_the_details_launches():
    report = read_report([LINEINFO / "coalescing.details.csv", LINEINFO / "coalescing.source.csv"])
    assert len(report.launches) == 2
    # The per-line counters attach to the launches read beside them (derive/source_lines.py).
    assert not report.source_lines.empty
    assert set(report.source_lines["launch"]) <= set(report.launches["launch"])


def test_cli_session_page_alone_exits_2_with_one_line(capsys):
    code = main(["analyze", str(FOREIGN / "torch_ops.session.csv")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--page session" in err and "Traceback" not in err


# ------------------------------------------------------------------------------ bad input


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


TRITON = (FOREIGN / "triton_kernels.txt").read_bytes()
FIRST_KERNEL = TRITON[: TRITON.index(b"\n  softmax_kernel")] + b"\n"


@pytest.mark.parametrize(("name", "data", "message"), [
    ("generated_empty.txt", b"", "empty"),
    ("generated_notes.txt", b"Some notes about a run.\nNothing from ncu here.\n",
     "not Nsight Compute output"),
    ("generated_binary.txt", bytes(range(256)) * 4, "binary"),
    ("generated_prof_only.log", b"==PROF== Connected to process 1 (/bin/app)\n"
     b"==PROF== Disconnected from process 1\n", "no kernel results"),
    ("generated_no_permission.log", b"==PROF== Connected to process 1 (/bin/app)\n"
     b"==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
     b"Performance Counters on the target device 0.\n", "it says: ==ERROR== ERR_NVGPUCTRPERM"),
    ("generated_header_only.txt", FIRST_KERNEL[: FIRST_KERNEL.index(b"    Warning")],
     "no launch in this text output has metric values"),
])
def test_bad_text_raises_one_line_errors(tmp_path, name, data, message):
    path = _write(tmp_path, name, data)
    with pytest.raises(ReportParseError) as err:
        read_report(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_truncated_text_reads_the_whole_launches_and_warns(tmp_path):
    cut = TRITON.index(b"Issued Ipc Active", TRITON.index(b"\n  colsum_strided_kernel"))
    report = read_report(_write(tmp_path, "generated_truncated.txt", TRITON[:cut]))
    assert report.launches["short_name"].tolist() == ["add_kernel", "softmax_kernel",
                                                      "colsum_strided_kernel"]
    assert any("ends mid-line" in w for w in report.warnings)
    assert any("without its closing ruler" in w for w in report.warnings)
    # The last launch keeps the rows read before the cut.
    full = read_report(FOREIGN / "triton_kernels.txt")
    assert report.wide().at[2, "gpu__time_duration.sum"] == \
        full.wide().at[2, "gpu__time_duration.sum"]


@pytest.mark.parametrize("fraction", [0.05, 0.2, 0.37, 0.5, 0.81, 0.99])
def test_text_cut_anywhere_reads_or_fails_in_one_line(tmp_path, fraction):
    path = _write(tmp_path, "generated_cut.txt", TRITON[: int(len(TRITON) * fraction)])
    try:
        report = read_report(path)
    except ReportParseError as err:
        assert "\n" not in str(err)
        return
    assert 1 <= len(report.launches) <= 4 and report.warnings
    analyze(report).to_dict()
