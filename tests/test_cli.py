"""The command line as a user runs it: outputs, the JSON contract, exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "sample_reports" / "forms"
DEMOS = ROOT / "sample_reports" / "demos"
FAKE_NCU = Path(__file__).parent / "fake_ncu" / "ncu"


def run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_text_lists_launches_by_time_and_top_findings(capsys):
    code, out, err = run(["analyze", str(FORMS / "forms_app.ncu-rep.gz")], capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("ncu-advise: 9 launch(es) of 6 kernel(s)")
    table = [ln for ln in lines if ln[:4].strip().isdigit()]
    assert table[0].split()[0] == "8" and "tiny_reduce" in table[0]  # 95% of GPU time first
    assert "Top findings" in out and "[HIGH] coalescing.global-loads: #1 copy_strided" in out
    assert max(len(ln) for ln in lines) <= 120


def test_analyze_json_contract(capsys):
    code, out, _ = run(["analyze", str(DEMOS / "coalescing.raw.csv"),
                        str(DEMOS / "coalescing.details.csv"), "--format", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["schema_version"] == 1 and data["tool"]["name"] == "ncu-advise"
    assert len(data["kernels"]) == 2
    k = data["kernels"][0]
    for field in ("id", "name", "source", "grid", "block", "duration_ns", "findings",
                  "not_evaluated", "roofline", "occupancy", "ncu_rules"):
        assert field in k
    assert k["name"] == "coalescing_strided_copy" and k["grid"] == [65536, 1, 1]
    assert k["roofline"]["bound"] in ("memory", "compute", "latency")
    assert isinstance(k["occupancy"]["theoretical_pct"], float)
    finding = next(f for f in k["findings"] if f["rule"] == "coalescing.global-loads")
    assert finding["severity"] == "high" and finding["category"] == "coalescing"
    assert finding["evidence"]["global_ld_bytes_per_sector"] == {
        "value": 4.0, "unit": "byte/sector", "label": "bytes used per global-load sector"}
    assert {r["rule"] for r in k["ncu_rules"]} >= {"SOLBottleneck"}
    assert data["findings"][0]["rule"].startswith("coalescing.")


@pytest.mark.slow  # every export form of a capture in one run (~3 s)
def test_a_folder_of_every_export_form_analyzes(capsys):
    """Launches without a stream (summaries) or a process ID (.ncu-rep) mix with the rest."""
    code, out, err = run(["analyze", str(FORMS), "-f", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert len(data["kernels"]) > 90 and data["findings"]


def test_summary_input_gives_one_entry_per_kernel_with_invocations(capsys):
    code, out, _ = run(["analyze", str(FORMS / "forms_app.import.summary.csv"), "-f", "json"],
                       capsys)
    data = json.loads(out)
    assert len(data["kernels"]) == 9
    assert all(k["invocations"] == 1 and k["id"] is None for k in data["kernels"])


def test_html_output_is_written_atomically_and_escaped(tmp_path, capsys):
    target = tmp_path / "report.html"
    code, _, err = run(["analyze", str(FORMS / "forms_app.ncu-rep.gz"), "-f", "html", "-o",
                        str(target)], capsys)
    assert code == 0 and f"wrote {target}" in err
    html = target.read_text()
    assert "apply_pair&lt;lab::Mul&lt;float&gt;" in html
    assert "apply_pair<lab::Mul" not in html
    assert oct(target.stat().st_mode & 0o777) != "0o600"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize(("args", "message"), [
    (["analyze", "/no/such/file.csv"], "no such file or directory"),
    (["analyze", str(ROOT / "pyproject.toml")], "not an Nsight Compute CSV export"),
    (["rules", "no.such-rule"], "no rule 'no.such-rule'"),
    (["demo", "no-such-demo"], "unknown demo"),
    (["analyse", "x"], "unknown command 'analyse'; did you mean 'analyze'?"),
    (["analyze", str(FORMS / "forms_app.ncu-rep.gz"), "--rules", "/no/such/dir"],
     "no such rule file or folder"),
])
def test_bad_input_one_line_exit_2(args, message, capsys):
    code, out, err = run(args, capsys)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_input_leaves_no_output_file(tmp_path, capsys):
    bad = tmp_path / "generated_empty.csv"
    bad.write_text("")
    target = tmp_path / "out.json"
    code, _, err = run(["analyze", str(bad), "-f", "json", "-o", str(target)], capsys)
    assert code == 2 and err.strip().endswith(": file is empty")
    assert not target.exists() and list(tmp_path.iterdir()) == [bad]


def test_usage_errors_exit_2(capsys):
    assert main(["analyze", "--format", "xml", "x"]) == 2
    assert main(["occupancy", "--cc", "9.0", "--block-size", "2048", "--registers", "32"]) == 2


def test_export_tables(tmp_path, capsys):
    for fmt in ("parquet", "csv"):
        out = tmp_path / fmt
        code, stdout, _ = run(["export", str(FORMS / "forms_app.import.raw.base.csv"), "--to", fmt,
                               "-o", str(out)], capsys)
        assert code == 0
        read = pd.read_parquet if fmt == "parquet" else pd.read_csv
        launches = read(out / f"launches.{fmt}")
        metrics = read(out / f"metrics.{fmt}")
        assert len(launches) == 9 and len(metrics) > 19_000
        assert {"launch", "metric", "unit", "value", "text"} <= set(metrics.columns)
        assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_rules_list_and_show(capsys):
    code, out, _ = run(["rules"], capsys)
    assert code == 0 and "coalescing.global-loads" in out and "rules;" in out
    code, out, _ = run(["rules", "bank-conflicts.shared-memory"], capsys)
    assert "Fires when:" in out and "shared_conflict_pct >= 10" in out and "32x33" in out


def test_demo_list_works_without_a_gpu(capsys):
    code, out, _ = run(["demo", "--list", "--format", "json"], capsys)
    demos = json.loads(out)
    assert code == 0 and len(demos) == 14
    assert all({"name", "category"} <= set(d) for d in demos)
    assert all(set(d["lesson"]) >= {"what", "why", "fix"} for d in demos)
    assert all(d["bad"]["kernels"] and d["good"]["kernels"] for d in demos)
    code, out, _ = run(["demo", "--list"], capsys)
    assert "coalescing [coalescing]" in out and "lesson:" in out


def test_demo_run_without_cupy_is_a_clear_error(capsys):
    pytest.importorskip("numpy")
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy is installed here")
    except ImportError:
        pass
    code, _, err = run(["demo", "coalescing"], capsys)
    assert code == 2 and "CuPy" in err and "Traceback" not in err


def test_profile_end_to_end_with_the_fake_ncu(tmp_path, monkeypatch, capsys):
    """`ncu-advise ./app` writes report.html and report.json (ncu is the test double)."""
    app = tmp_path / "app"
    shutil.copy("/bin/true", app)
    monkeypatch.setenv("NCU", str(FAKE_NCU))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["./app", "--some-flag"], capsys)
    assert code == 0, err
    folder = tmp_path / "ncu-advise-report"
    data = json.loads((folder / "report.json").read_text())
    assert len(data["kernels"]) == 9 and data["command"] == ["./app", "--some-flag"]
    assert data["session"]["ncu_version"]
    assert "<html" in (folder / "report.html").read_text()
    assert "Top findings" in out


def test_console_script_is_installed_and_runs():
    exe = shutil.which("ncu-advise", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("console script not installed in this environment")
    result = subprocess.run([exe, "analyze", str(FORMS / "forms_app.live.metrics.csv")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "9 launch(es)" in result.stdout
    assert "Not evaluated" in result.stdout  # a --metrics capture lacks most sections


def test_text_numbers_launches_uniquely_across_files(capsys):
    """ncu's IDs restart in every file: two files' launches are numbered 0..n-1, not 0,1,0,1."""
    lineinfo = ROOT / "sample_reports" / "demos_lineinfo"
    code = main(["analyze", str(lineinfo / "coalescing.details.csv"),
                 str(lineinfo / "bank-conflicts.details.csv")])
    out = capsys.readouterr().out
    assert code == 0
    table = out[out.index("   #  "):].splitlines()[1:5]
    assert sorted(int(line.split()[0]) for line in table) == [0, 1, 2, 3]


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_not_a_program_to_profile(flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ncu-advise ") and out.split()[1][0].isdigit()
    assert not (tmp_path / "ncu-advise-report").exists()
    assert main([flag, "x"]) == 2


def test_a_failed_profile_leaves_no_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NCU", str(tmp_path / "no-ncu-here"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["./app"]) == 2
    assert "ncu" in capsys.readouterr().err
    assert not (tmp_path / "ncu-advise-report").exists()


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_advice_is_wrapped_never_cut(width):
    """Every finding's fix reaches the terminal whole, at any width, with its launch IDs."""
    from ncu_advisor import analyze, read_report
    from ncu_advisor.render.text import render_text

    doc = analyze(read_report(FORMS / "forms_app.ncu-rep.gz")).to_dict()
    out = render_text(doc, width=width)
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Top findings"))
    body = " ".join(ln.strip() for ln in lines[start:])
    for f in doc["findings"][:10]:
        assert " ".join(f["advice"].split()) in body, f["rule"]
    fixes = [ln for ln in lines if ln.lstrip().startswith("fix:")]
    assert fixes and not any(ln.endswith("…") for ln in fixes)
    assert all(len(ln) <= width for ln in lines[start:] if not ln.lstrip().startswith("at "))
    assert "#8 tiny_reduce" in out


def test_the_library_face_shows_its_names_and_short_reprs():
    import ncu_advisor
    from ncu_advisor import analyze, read_report

    assert {"read_report", "analyze", "Report", "Analysis", "ReportParseError"} <= set(
        dir(ncu_advisor))
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_report("no-such-report.csv")
    text = repr(analyze(read_report(FORMS / "forms_app.ncu-rep.gz")))
    assert text.startswith("Analysis(9 launch(es)") and len(text) < 300


def test_profile_takes_wide_and_color_like_analyze(tmp_path, monkeypatch, capsys):
    """Issue 26: `profile` lacked --color and --wide."""
    app = tmp_path / "app"
    shutil.copy("/bin/true", app)
    monkeypatch.setenv("NCU", str(FAKE_NCU))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["--color", "always", "--wide", "./app"], capsys)
    assert code == 0, err
    assert "\x1b[" in out  # severities coloured although stdout is captured
    assert "launches as" not in out and "more (--wide" not in out  # every launch listed
    code, out, err = run(["--color", "never", "./app"], capsys)
    assert code == 0 and "\x1b[" not in out
