"""The reader on every real export form in sample_reports/forms, and on bad input.

Captures are real (see sample_reports/forms/PROVENANCE.md); broken inputs are generated here
from them (truncated, corrupted, re-encoded) and named as such.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import read_cached

from ncu_advisor import ReportParseError, analyze, read_report
from ncu_advisor.readers.common import parse_numbers, short_name
from ncu_advisor.report import _wide_view
from ncu_advisor.units import normalize_unit

FORMS = Path(__file__).resolve().parent.parent / "sample_reports" / "forms"
REP = FORMS / "forms_app.ncu-rep.gz"
APP_KERNELS = ["copy_coalesced", "copy_strided", "scale_vec", "scale_vec", "apply_pair",
               "saxpy", "saxpy", "saxpy", "tiny_reduce"]
PER_LAUNCH_FORMS = sorted(p.name for p in FORMS.glob("forms_app.*.csv") if "summary" not in p.name)
# Exports of forms_app.ncu-rep itself (the live runs are separate runs of the program).
IMPORT_FORMS = [n for n in PER_LAUNCH_FORMS
                if n.startswith("forms_app.import.") and "nvtx" not in n]


@pytest.fixture(scope="module")
def reference():
    """The .ncu-rep read through ncu_report: the most precise form of the capture."""
    return read_cached(REP)


@pytest.mark.parametrize("name", PER_LAUNCH_FORMS)
def test_every_form_gives_the_nine_launches(name):
    report = read_cached(FORMS / name)
    assert report.launches["short_name"].tolist() == APP_KERNELS
    assert report.launches["id"].tolist() == list(range(9))
    assert (report.launches[["grid_x", "block_x"]].notna()).all().all()
    assert report.launches.loc[0, "block_x"] == 256
    assert report.launches.loc[8, "grid_x"] == 4
    assert report.launches["cc"].eq("9.0").all()
    assert report.launches["duration_ns"].between(5_000, 20_000_000).all()
    assert report.warnings == []


def test_kernel_names_are_ncu_demangled_names():
    report = read_cached(FORMS / "forms_app.import.details.csv")
    names = report.launches["name"].tolist()
    assert names[0] == "copy_coalesced(float *, const float *, int)"
    assert names[4].startswith("void lab::apply_pair<lab::Mul<float>, lab::Add<float, ")


@pytest.mark.parametrize("name", IMPORT_FORMS)
def test_same_launch_same_numbers_in_every_form(name, reference):
    """Every metric a form shares with the .ncu-rep agrees within the form's printed precision."""
    wide = read_cached(FORMS / name).wide()
    ref = reference.wide()
    common = [c for c in wide.columns if c in ref.columns
              and not c.startswith("derived__pct_occupancy_per")]  # instanced curves
    a = wide[common].to_numpy(float)
    b = ref[common].to_numpy(float)
    both = np.isfinite(a) & np.isfinite(b)
    assert both.sum() >= 700  # the smallest import (details page) shares ~86 metrics x 9
    # Details/summary print 2 decimals or 3-4 significant digits in auto units.
    # Values within 0.1 of zero (signed noise such as -0.058 %) may print as 0.
    # The raw page scales a whole column to one unit: small values lose digits against the
    # column's largest (e.g. 10.7 KB/s printed as 0.00 Tbyte/s).
    column_scale = np.nan_to_num(np.nanmax(np.abs(b), axis=0, keepdims=True,
                                            initial=0.0, where=np.isfinite(b)))
    tol = np.maximum(np.maximum(np.where(np.abs(b) < 0.1, 0.1, 0.006), 0.006 * np.abs(b)),
                     0.005 * column_scale)
    bad = both & (np.abs(a - b) > tol)
    pairs = [(common[j], a[i, j], b[i, j]) for i, j in zip(*np.nonzero(bad), strict=True)]
    # PM-sampled sm__cycles_active.avg differs between replay passes; nothing else may.
    pairs = [p for p in pairs if not p[0].startswith("sm__cycles_active")]
    assert pairs == []


def test_raw_keeps_pm_sampling_columns_apart(reference):
    report = read_cached(FORMS / "forms_app.import.raw.base.csv")
    metrics = set(report.metrics["metric"])
    assert "TPC.TriageCompute.sm__cycles_active.avg" in metrics
    assert "sm__cycles_active.avg" in metrics


def test_summary_groups_kernels_and_counts_invocations():
    report = read_cached(FORMS / "forms_app.import.summary.csv")
    launches = report.launches
    # Sorted by name; saxpy ran three times with three grids: three entries of one call each.
    assert sorted(launches["short_name"]) == sorted(APP_KERNELS)
    assert launches["invocations"].tolist() == [1] * 9
    assert launches["id"].isna().all()
    assert {"minimum", "maximum"} <= set(report.metrics.columns)


def test_auto_units_are_converted_per_row():
    auto = read_cached(FORMS / "forms_app.import.details.csv")
    base = read_cached(FORMS / "forms_app.import.details.base.csv")
    for metric in ("gpu__time_duration.sum", "dram__bytes.sum.per_second",
                   "dram__cycles_elapsed.avg.per_second"):
        a = auto.wide()[metric].to_numpy()
        b = base.wide()[metric].to_numpy()
        assert np.allclose(a, b, rtol=0.01), metric
    units = auto.units()
    assert units["gpu__time_duration.sum"] == "ns"
    assert units["dram__bytes.sum.per_second"] == "byte/s"


def test_labels_resolve_to_metric_names_with_section_context():
    report = read_cached(FORMS / "forms_app.import.details.csv")
    m = report.metrics
    assert m["metric"].notna().all()
    # "Memory Throughput" means different metrics in two sections.
    sol = m[(m["section"] == "GPU Speed Of Light Throughput") & (m["label"] == "Memory Throughput")]
    mwa = m[(m["section"] == "Memory Workload Analysis") & (m["label"] == "Memory Throughput")]
    sol_metric = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
    assert set(sol["metric"]) == {sol_metric}
    assert set(mwa["metric"]) == {"dram__bytes.sum.per_second"}


def test_print_details_all_skips_inline_tables_and_prose():
    report = read_cached(FORMS / "forms_app.import.details.all.csv.gz")
    assert len(report.launches) == 9
    assert report.metrics["metric"].notna().all()
    numa = report.metrics[report.metrics["metric"].fillna("").str.contains("numa", case=False)]
    assert len(report.metrics) > 15_000 and numa.shape[0] >= 0


def test_live_run_preamble_and_program_output_are_not_data():
    report = read_cached(FORMS / "forms_app.live.full.csv")
    assert report.session["clock_control"] == "none"
    assert any("Connected to process" in m for m in report.session["ncu_messages"])
    assert len(report.launches) == 9


def test_nvtx_columns_shift_nothing_and_give_ranges():
    report = read_cached(FORMS / "forms_app.live.nvtx.csv")
    ranges = report.launches["nvtx"].tolist()
    assert ranges[:2] == ["copies", "copies"] and ranges[2:5] == ["templates"] * 3
    assert ranges[5] is None or (isinstance(ranges[5], float) and math.isnan(ranges[5]))
    assert report.launches["short_name"].tolist() == APP_KERNELS
    torch = read_cached(FORMS / "torch_mlp.live.nvtx.csv.gz")
    assert {"forward", "loss"} <= set(torch.launches["nvtx"].dropna())


def test_nvtx_rename_changes_names_but_not_short_names():
    plain = read_cached(FORMS / "torch_mlp.import.basic.nvtx.csv.gz").launches
    renamed = read_cached(FORMS / "torch_mlp.import.basic.nvtx-rename.csv.gz").launches
    assert renamed["name"].str.startswith(("forward/", "loss/")).sum() == 5
    assert renamed["short_name"].tolist() == plain["short_name"].tolist()
    # The rename also switches demangling style: "<4," becomes "<(int)4,".
    assert plain["name"].str.contains("<4, ").any()
    assert renamed["name"].str.contains("<(int)4, ", regex=False).any()


def test_metrics_only_and_small_sets():
    report = read_cached(FORMS / "forms_app.live.metrics.csv")
    assert set(report.metrics["metric"]) == {
        "gpu__time_duration.sum", "dram__bytes_read.sum", "launch__registers_per_thread",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed"}
    assert report.ncu_rules.empty
    basic = read_cached(FORMS / "forms_app.live.basic.csv")
    assert len(basic.ncu_rules) > 0 and len(basic.metrics) < 600


def test_ncu_rules_from_csv_and_rep(reference):
    csv_rules = read_cached(FORMS / "forms_app.import.details.csv").ncu_rules
    assert {"SOLBottleneck", "LaunchConfiguration"} <= set(csv_rules["rule"])
    assert set(csv_rules["type"]) <= {"OPT", "INF", "WRN", "ERR"}
    rep_rules = reference.ncu_rules
    assert rep_rules["title"].notna().any()  # the .ncu-rep keeps message titles
    assert not rep_rules["description"].str.contains("@section:").any()


def test_directory_reads_every_report_and_merges_exports_of_one_capture():
    report = read_cached(FORMS)
    per_source = report.launches.groupby("source").size()
    # The eleven imports of forms_app.ncu-rep share process and IDs: one set of 9 launches.
    assert report.launches["process_id"].eq(2193).sum() == 9 + 9  # imports + summary
    assert per_source.sum() == len(report.launches)


def _pivoted(report) -> pd.DataFrame:
    """``Report.wide()`` as a pandas pivot builds it (the reference the scatter must match)."""
    named = report.metrics.dropna(subset=["metric"])
    named = named.drop_duplicates(subset=["launch", "metric"], keep="first")
    wide = named.pivot(index="launch", columns="metric", values="value")
    wide.columns = pd.Index(wide.columns.astype(object), name="metric")
    return wide.reindex(report.launches["launch"])


@pytest.mark.parametrize("paths", [
    [FORMS / "forms_app.import.raw.csv"],  # categorical names, launch-major, no repeats
    [FORMS / "forms_app.import.details.csv"],  # names as text, a metric in several sections
    [FORMS],  # eleven exports of one capture merged: every cell given by several rows
])
def test_wide_view_is_the_pivot_of_the_long_table(paths):
    report = read_cached(paths if len(paths) > 1 else paths[0])
    expected = _pivoted(report)
    pd.testing.assert_frame_equal(report.wide(), expected)
    assert report.wide().notna().to_numpy().sum() == expected.notna().to_numpy().sum() > 0


def test_wide_view_keeps_the_first_row_of_a_repeated_cell():
    launches = pd.Series([5, 7], name="launch")
    metrics = pd.DataFrame({"launch": [7, 5, 7, 9], "metric": ["b", "a", "b", np.nan],
                            "value": [1.0, 2.0, 3.0, 4.0]})
    wide = _wide_view(metrics, launches)
    assert wide.columns.tolist() == ["a", "b"] and wide.index.tolist() == [5, 7]
    assert wide.loc[7, "b"] == 1.0 and wide.loc[5, "a"] == 2.0
    assert np.isnan(wide.loc[5, "b"]) and np.isnan(wide.loc[7, "a"])


def test_string_metrics_keep_their_text(reference):
    assert reference.text(0, "device__attribute_display_name") == "NVIDIA H200"
    assert reference.session["gpu"] == "NVIDIA H200"
    assert reference.session["sm_count"] == 132


@pytest.mark.parametrize(("text", "value"), [
    ("1,234.5", 1234.5), ("8,388,608 (3,145,728; 2,097,152)", 8388608.0), ("7.755e-06", 7.755e-06),
    ("n/a", np.nan), ("no data", np.nan), ("nan", np.nan), ("PolicySpread", np.nan),
    ("1 (0-15)", 1.0), ("", np.nan),
])
def test_parse_numbers(text, value):
    import pandas as pd

    got = parse_numbers(pd.Series([text]))[0]
    assert (np.isnan(got) and np.isnan(value)) or got == value


@pytest.mark.parametrize(("unit", "base", "factor"), [
    ("Gbyte/s", "byte/s", 1e9), ("us", "ns", 1e3), ("msecond", "ns", 1e6), ("Ghz", "hz", 1e9),
    ("%/Kbyte", "%/byte", 1e-3), ("sector/ns", "sector/s", 1e9), ("Kbyte/block", "byte/block", 1e3),
    ("inst/cycle", "inst/cycle", 1.0), ("", "", 1.0),
])
def test_units(unit, base, factor):
    got_base, got_factor = normalize_unit(unit)
    assert got_base == base and got_factor == pytest.approx(factor)


def test_short_names_of_cpp_templates():
    assert short_name("void at::native::vectorized_elementwise_kernel<4, at::native::Fn<float>, "
                      "std::array<char *, 1>>(int, T2, T3)") == "vectorized_elementwise_kernel"
    assert short_name("void (anonymous namespace)::softmax_warp_forward<float, 10>(T2 *)") == \
        "softmax_warp_forward"
    assert short_name("copy_coalesced(float *, const float *, int)") == "copy_coalesced"


# --- bad input: one clear error, or a partial read with a warning -------------------------

def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("name", "data", "message"), [
    ("generated_empty.csv", b"", "empty"),
    ("generated_blank.csv", b"\n\n  \n", "empty"),
    ("generated_binary.csv", bytes(range(256)) * 4, "binary"),
    ("generated_not_ncu.csv", b"a,b,c\n1,2,3\n", "not an Nsight Compute CSV"),
    ("generated_latin1.csv", '"ID","Process ID"\n"0","caf\xe9"\n'.encode("latin-1"), "not UTF-8"),
    ("generated_header_only.csv", b'"ID","Process ID","Kernel Name"\n', "no data rows"),
    ("generated_corrupt.ncu-rep", b"\x00garbage" * 100, "not a readable .ncu-rep"),
    ("generated_empty.ncu-rep", b"", "empty"),
])
def test_bad_files_raise_one_line_errors(tmp_path, name, data, message):
    path = _write(tmp_path, name, data)
    with pytest.raises(ReportParseError) as err:
        read_report(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ")
    assert message in text[len(str(path)):]  # the reason, not the file's own name
    assert "\n" not in text


def test_missing_path_and_empty_directory(tmp_path):
    with pytest.raises(ReportParseError, match="no such file"):
        read_report(tmp_path / "nope.csv")
    with pytest.raises(ReportParseError, match="holds no .csv or .ncu-rep"):
        read_report(tmp_path)


def test_truncated_csv_reads_what_it_can_and_warns(tmp_path):
    text = (FORMS / "forms_app.import.details.csv").read_bytes()
    cut = _write(tmp_path, "generated_truncated.csv", text[: len(text) * 2 // 3])
    report = read_report(cut)
    assert 1 <= len(report.launches) < 9
    assert any("ends mid-line (truncated?)" in w for w in report.warnings)


def test_utf16_export_from_powershell_is_read(tmp_path):
    text = (FORMS / "forms_app.import.details.csv").read_text()
    path = _write(tmp_path, "generated_utf16.csv", text.encode("utf-16"))
    assert len(read_report(path).launches) == 9


def test_malformed_rows_are_skipped_with_a_warning(tmp_path):
    lines = (FORMS / "forms_app.live.metrics.csv").read_text().splitlines(keepends=True)
    lines.insert(12, '"0","1546","x","y","z","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0",'
                     '"s","m","u","1","extra","fields","here"\n')
    path = _write(tmp_path, "generated_malformed.csv", "".join(lines).encode())
    report = read_report(path)
    assert len(report.launches) == 9
    assert any("skipped 1 malformed or non-data line(s), first: '\"0\",\"1546\",\"x\"" in w
               for w in report.warnings), report.warnings


def test_details_rule_rows_keep_file_order():
    """Ncu's rule results of each launch come out in the order the export lists them.

    The rule rows were collected by a callback of the multithreaded CSV parser, which met
    the blocks in a random order: the JSON of one capture changed from run to run.
    """
    import csv
    import gzip

    path = FORMS.parent / "foreign" / "torch_ops.details.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    col = {name: header.index(name) for name in ("ID", "Rule Name")}
    expected: dict[str, list[str]] = {}
    for row in rows[1:]:
        if len(row) == len(header) and row[col["Rule Name"]]:
            expected.setdefault(row[col["ID"]], []).append(row[col["Rule Name"]])
    report = read_report(path)
    ids = dict(zip(report.launches["launch"], report.launches["id"], strict=True))
    got: dict[str, list[str]] = {}
    for launch, rule in zip(report.ncu_rules["launch"], report.ncu_rules["rule"], strict=True):
        got.setdefault(str(ids[launch]), []).append(rule)
    assert len(expected) > 20 and got == expected


def _findings(report):
    analysis = analyze(report)
    return sorted((-1 if f.launch is None else f.launch, f.rule, f.severity)
                  for f in analysis.findings)


# ~22 s over its four packings: the decoder capture read and analyzed each time.
@pytest.mark.slow
@pytest.mark.parametrize("packing", ["gzip", "xz", "zstd", "no suffix"])
def test_a_compressed_or_renamed_report_reads_as_the_report(tmp_path, packing):
    """`.ncu-rep.gz`, `.ncu-rep.xz`, a zstd-compressed `.ncu-repz` and a report without its
    suffix are known by content (the zstd case is our own compression of a real report: no ncu
    here writes .ncu-repz, which Nsight Compute 2026.3 does by default)."""
    data = gzip.decompress(REP.read_bytes())  # the capture is stored gzipped
    if packing == "gzip":
        target = tmp_path / "forms_app.ncu-rep.gz"
        target.write_bytes(gzip.compress(data))
    elif packing == "xz":
        import lzma

        target = tmp_path / "forms_app.ncu-rep.xz"
        target.write_bytes(lzma.compress(data))
    elif packing == "zstd":
        zstandard = pytest.importorskip("zstandard")
        target = tmp_path / "forms_app.ncu-repz"
        target.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        target = tmp_path / "forms_app-report"
        target.write_bytes(data)
    plain, packed = read_report(REP), read_report(target)
    assert packed.sources == [str(target)]
    assert (packed.launches["source"] == str(target)).all()
    assert packed.launches.drop(columns="source").equals(plain.launches.drop(columns="source"))
    assert _findings(packed) == _findings(plain)


def test_a_broken_compressed_report_is_one_line(tmp_path):
    target = tmp_path / "cut.ncu-rep.gz"
    target.write_bytes(gzip.compress(REP.read_bytes())[:5000])
    with pytest.raises(ReportParseError, match=r"cut\.ncu-rep\.gz"):
        read_report(target)
