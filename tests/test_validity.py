"""The validity lint on real captures: ncu notes, missing sections, short and duplicate launches."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncu_advisor.analysis.pipeline import RAW_EXPORT_HINT, analyze
from ncu_advisor.readers import read_report
from ncu_advisor.render.html import render_html
from ncu_advisor.render.text import render_text

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "sample_reports" / "forms"
FOREIGN = ROOT / "sample_reports" / "foreign"
LINEINFO = ROOT / "sample_reports" / "demos_lineinfo"


def _checks(analysis, check):
    return [e for e in analysis.validity if e["check"] == check]


@pytest.fixture(scope="module")
def live_full():
    """ncu --set full --csv ./forms_app: unlocked-clock note, 6 metrics ncu could not read."""
    return analyze(read_report(FORMS / "forms_app.live.full.csv"))


@pytest.fixture(scope="module")
def live_basic():
    return analyze(read_report(FORMS / "forms_app.live.basic.csv"))


@pytest.fixture(scope="module")
def torch_ops():
    return analyze(read_report([FOREIGN / "torch_ops.details.csv.gz",
                                FOREIGN / "torch_ops.raw.csv.gz"]))


def test_unlocked_clock_note_is_reported(live_full):
    (clocks,) = _checks(live_full, "clocks")
    assert clocks["severity"] == "warning"
    assert "unmodified GPU clocks" in clocks["message"] and "durations" in clocks["message"]


def test_metrics_ncu_could_not_collect_are_named(live_full):
    (entry,) = _checks(live_full, "unavailable-metrics")
    assert "could not collect 6 metric(s)" in entry["message"]
    assert "ctc__rx_bytes_data_user.sum" in entry["message"]
    # C2C link counters: none of our rules reads them.
    assert "no check of ncu-advise uses them" in entry["message"]


def test_na_values_are_reported():
    analysis = analyze(read_report(FORMS / "forms_app.import.details.all.csv.gz"))
    (entry,) = _checks(analysis, "unavailable-metrics")
    assert "exported as n/a" in entry["message"] and "ctc__" in entry["message"]


def test_basic_set_is_said_once_with_the_sections_to_add(live_basic):
    (entry,) = _checks(live_basic, "missing-sections")
    assert entry["severity"] == "warning"
    assert entry["message"].startswith("this looks like a --set basic capture")
    for section, family in (("MemoryWorkloadAnalysis_Tables", "coalescing"),
                            ("WarpStateStats", "divergence"),
                            ("ComputeWorkloadAnalysis", "fast-math")):
        assert f"--section {section}" in entry["message"]
        assert family in entry["message"]
    assert sum("--set basic" in e["message"] for e in live_basic.validity) == 1


def test_basic_import_is_recognised_too():
    analysis = analyze(read_report(FORMS / "forms_app.import.basic.nvtx.csv"))
    (entry,) = _checks(analysis, "missing-sections")
    assert "--set basic" in entry["message"]


def test_full_details_page_names_the_export_not_the_set(live_full):
    # A full-set capture lacks no section; its details page leaves raw metrics out.
    assert _checks(live_full, "missing-sections") == []
    (entry,) = _checks(live_full, "missing-metrics")
    assert "--page raw" in entry["message"] and "coalescing" in entry["message"]


def test_short_launches_and_merged_exports(torch_ops):
    (short,) = _checks(torch_ops, "short-launches")
    launches = torch_ops.report.launches
    n_short = int((launches["duration_ns"] < 5000).sum())
    assert n_short == 8 and short["message"].startswith(f"{n_short} launch(es) ran under 5 us")
    (merged,) = _checks(torch_ops, "merged-exports")
    assert merged["message"].startswith("32 launch record(s)")


def test_the_same_launches_read_twice_are_flagged():
    analysis = analyze(read_report([LINEINFO / "coalescing.ncu-rep.gz",
                                    LINEINFO / "coalescing.raw.csv.gz"]))
    (entry,) = _checks(analysis, "duplicate-launches")
    assert entry["severity"] == "warning" and "counted twice" in entry["message"]


def test_separate_runs_are_flagged(live_full, live_basic):
    both = analyze(read_report([FORMS / "forms_app.live.full.csv",
                                FORMS / "forms_app.live.basic.csv"]))
    (entry,) = _checks(both, "mixed-runs")
    assert "2 separate runs" in entry["message"]
    assert _checks(live_full, "mixed-runs") == []


def test_launch_limit_and_controls_from_the_ncu_command():
    # torch_mlp.live.nvtx.csv.gz: `ncu --set full --nvtx --csv -c 12`, 8 launches profiled.
    analysis = analyze(read_report(FORMS / "torch_mlp.live.nvtx.csv.gz"))
    assert len(analysis.report.launches) == 8
    analysis.extra_session["ncu_command"] = "ncu --set full --nvtx -c 8 python3 torch_mlp.py"
    (limit,) = _checks(analysis, "launch-limit")
    assert limit["severity"] == "warning" and "-c 8" in limit["message"]
    analysis.extra_session["ncu_command"] = (
        "ncu --set full -c 12 --cache-control none --replay-mode kernel python3 torch_mlp.py")
    (limit,) = _checks(analysis, "launch-limit")
    assert limit["severity"] == "info" and "every launch was profiled" in limit["message"]
    assert "not flushed" in _checks(analysis, "cache-control")[0]["message"]
    assert "replay mode kernel" in _checks(analysis, "replay-mode")[0]["message"]


def test_clocks_locked_to_base_and_unknown():
    analysis = analyze(read_report(FORMS / "forms_app.import.raw.csv"))
    (unknown,) = _checks(analysis, "clocks")
    assert unknown["severity"] == "info" and "does not record" in unknown["message"]
    analysis.extra_session["clock_control"] = "base"
    (base,) = _checks(analysis, "clocks")
    assert "locked to base" in base["message"]


def test_validity_leads_json_text_and_html(live_basic):
    data = live_basic.to_dict()
    assert [e["severity"] for e in data["validity"]][0] == "warning"
    assert all(set(e) == {"check", "severity", "message"} for e in data["validity"])
    text = render_text(data, width=120)
    assert text.index("Validity:") < text.index("  ID       time") < text.index("Top findings")
    html = render_html(data)
    assert html.index('id="validity"') < html.index('id="summary"')


def test_details_only_has_one_definition():
    """The raw-export hint and the missing-metrics check agree on what is details-only."""
    details = FOREIGN / "torch_tf32_on.details.csv.gz"
    both = [details, FOREIGN / "torch_tf32_on.raw.csv.gz"]
    alone, merged = read_report(details), read_report(both)
    assert alone.details_only and alone.body_only_launches().all()
    # Read beside its raw page, a details launch is not body-only (its form says "details").
    assert set(merged.launches["form"]) == {"details"}
    assert not merged.details_only and not merged.body_only_launches().any()
    for report, hinted in ((alone, True), (merged, False)):
        result = analyze(report)
        skipped = [n for n in result.not_evaluated if n.missing]
        assert skipped, "a rule lacks metrics in both"
        assert all(n.collect_with.startswith(RAW_EXPORT_HINT) == hinted for n in skipped)
        (entry,) = [v for v in result.validity if v["check"] == "missing-metrics"]
        assert (entry["severity"] == "warning") == hinted
        assert ("details-page export" in entry["message"]) == hinted
