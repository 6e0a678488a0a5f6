"""Issue 26: the habits of its users (CLI conventions, text that is not cut, outputs for CI
and agents, rule tooling, the store and the library face). Each test failed before."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "sample_reports" / "forms"
DEMOS = ROOT / "sample_reports" / "demos"
APP = FORMS / "forms_app.ncu-rep.gz"  # hand-written CUDA, with source lines
DECODER = ROOT / "sample_reports" / "corpus" / "torch_decoder_train.details.csv.xz"
NVTX = FORMS / "torch_mlp.live.nvtx.csv.gz"
EXAMPLE_RULE = ROOT / "docs" / "examples" / "rules" / "cache.l2-misses.toml"
COMMANDS = ["analyze", "export", "rules", "profile", "demo", "occupancy", "diff", "ingest",
            "query", "trend"]


def run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def cli(args: list[str], stdin: bytes | None = None, cwd: Path | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed command as a shell runs it (standard input and output are real)."""
    return subprocess.run([sys.executable, "-m", "ncu_advisor.cli", *args], input=stdin,
                          capture_output=True, cwd=cwd, timeout=300,
                          env={**os.environ, **(env or {})})


# --- 8. Conventions -----------------------------------------------------------------------

@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_fits_100_columns_and_names_no_python_types(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: help still stops at 100
    code, out, _ = run([*([command] if command else []), "--help"], capsys)
    assert code == 0 and "Usage: ncu-advise" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    for python in ("list[", "<bool>", "<int>", "<str>", "<float>", "{paths}", "<Path>"):
        assert python not in out, python


def test_shell_completion_is_typers():
    # From a bash process, as a user types it: typer finds the shell among the parent
    # processes (shellingham), and an xdist worker's parents need not include one. The
    # second command keeps bash the parent (bash -c execs a lone command in its place).
    shown = subprocess.run(["bash", "-c", f"'{sys.executable}' -m ncu_advisor.cli "
                            "--show-completion bash; exit $?"], capture_output=True,
                           timeout=300)
    assert shown.returncode == 0 and "_NCU_ADVISE_COMPLETE" in shown.stdout.decode()
    done = cli([], env={"_NCU_ADVISE_COMPLETE": "complete_bash", "COMP_WORDS": "ncu-advise an",
                        "COMP_CWORD": "1"})
    assert done.returncode == 0 and done.stdout.decode().split() == ["analyze"]


def test_version_is_not_a_program_and_leaves_no_folder(tmp_path):
    done = cli(["--version"], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.decode().startswith("ncu-advise ")
    assert list(tmp_path.iterdir()) == []


# ~21 s over its three inputs: a CLI process per form.
@pytest.mark.slow
@pytest.mark.parametrize("path", [DEMOS / "coalescing.details.csv", DECODER, APP])
def test_dash_reads_standard_input_in_any_form(path):
    """A plain CSV, an xz-compressed CSV and a gzipped .ncu-rep, piped in: the same report."""
    piped = cli(["analyze", "-", "-f", "json"], stdin=path.read_bytes())
    named = cli(["analyze", str(path), "-f", "json"])
    assert piped.returncode == 0, piped.stderr
    a, b = json.loads(piped.stdout), json.loads(named.stdout)
    assert a["sources"] == ["-"] and {k["source"] for k in a["kernels"]} == {"-"}
    assert [f["rule"] for f in a["findings"]] == [f["rule"] for f in b["findings"]]
    assert a["summary"]["total_duration_ns"] == b["summary"]["total_duration_ns"]


def test_dash_errors_name_standard_input():
    done = cli(["analyze", "-"], stdin=b"")
    assert done.returncode == 2 and done.stderr.decode() == \
        "ncu-advise: error: -: standard input is empty\n"
    done = cli(["analyze", "-"], stdin=gzip.compress(b"not a report at all\n"))
    err = done.stderr.decode()
    assert done.returncode == 2 and err.startswith("ncu-advise: error: -") and "/tmp" not in err


# ~12 s: two CLI processes.
@pytest.mark.slow
@pytest.mark.parametrize("command", [["analyze", str(APP), "-f", "json"],
                                     ["diff", str(APP), str(APP)]])
def test_dash_as_output_is_standard_output(tmp_path, command):
    done = cli([*command, "-o", "-"], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout and not (tmp_path / "-").exists()
    assert b"wrote" not in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["analyze", str(APP), "--group-by", "kernel"], "--group-by applies to -f html only"),
    (["analyze", str(APP), "--top", "-3"], "'--top': Input should be greater than or equal"),
    (["analyze", str(APP), "-f", "json", "--top", "3"], "--top applies to -f text and"),
    (["analyze", str(APP), "-f", "json", "--wide"], "--wide applies to -f text only"),
    (["analyze", str(APP), "-f", "html", "--color", "always"], "--color applies to -f text"),
    (["analyze", str(APP), "--include-metrics"], "--include-metrics/--no-metrics apply to"),
    (["rules", "-f", "html"], "'html' is not one of 'text', 'json'"),
    (["diff", str(APP), str(APP), "-f", "json", "--top", "3"], "--top applies to -f text"),
    (["demo", "coalescing", "--repeats", "0"], "'--repeats': Input should be greater than"),
    (["trend", "--store", "s", "--label", "build"], "to order by a label use --order-by build"),
])
def test_options_that_do_not_apply_are_refused_in_one_line(args, message, capsys):
    code, out, err = run(args, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_occupancy_takes_f(capsys):
    code, out, _ = run(["occupancy", "--cc", "9.0", "--block-size", "256", "--registers", "32",
                        "-f", "json"], capsys)
    assert code == 0 and json.loads(out)["theoretical_pct"] == 100.0


def test_one_kernel_flag_across_commands(capsys):
    """--kernel / -k: analyze's filter, trend's and profile's (ncu -k) all spell it so."""
    for command in ("analyze", "trend", "profile"):
        _, out, _ = run([command, "--help"], capsys)
        assert re.search(r"--kernel\b", out) and re.search(r"\s-k\s", out), command


# --- 3. Text: wrapped, never cut; 80 columns; --wide; colour ----------------------------

def test_80_columns_fit_and_nothing_is_cut():
    from ncu_advisor import analyze, read_report
    from ncu_advisor.render.text import render_text

    doc = analyze(read_report(DECODER)).to_dict()
    lines = render_text(doc, width=80).splitlines()
    assert max(len(ln) for ln in lines) <= 80
    # Only the launch table shortens names (to fit its column); everything else wraps.
    table = range(next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ID ")),
                  next(i for i, ln in enumerate(lines) if ln.startswith("Top findings")))
    assert not [ln for i, ln in enumerate(lines) if ln.endswith("…") and i not in table]
    assert lines[0] == "ncu-advise: 109 launch(es) of 34 kernel(s), 2.42 ms GPU time, " \
                       "unknown GPU"
    # Two launches of one generic kernel are told apart by the operation they run.
    assert any(re.search(r"  masked_fill in elementwise_", ln) for ln in lines)


def test_diff_rows_fit_80_columns():
    from ncu_advisor import analyze, read_report
    from ncu_advisor.diff.compare import diff_runs
    from ncu_advisor.render.diff_text import render_diff_text

    runs = [analyze(read_report(DEMOS / f"{n}.raw.csv")) for n in ("coalescing", "fusion")]
    text = render_diff_text(diff_runs(*runs).to_dict(), width=80)
    assert max(len(ln) for ln in text.splitlines()) <= 80
    assert "±1.95% (default)" in text  # the summary wraps between words, not in a number


def test_wide_shows_full_names_and_every_launch(capsys):
    code, out, _ = run(["analyze", str(DECODER), "--wide"], capsys)
    assert code == 0 and "more (--wide" not in out
    assert "void native::vectorized_elementwise_kernel<8, native::bfloat16_copy_kernel_cuda" in out
    ids = [ln.split()[0] for ln in out.splitlines() if re.match(r"^\s+\d+\s+\S+ (ms|us|ns)", ln)]
    assert len(ids) == 109


def test_colour_by_severity_honours_no_color(capsys, monkeypatch):
    code, out, _ = run(["analyze", str(APP), "--color", "always"], capsys)
    assert code == 0 and "\x1b[1;31m[HIGH]\x1b[0m" in out and "\x1b[2m[info]\x1b[0m" in out
    from ncu_advisor.cli.common import ColorMode, use_color

    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(ColorMode.auto, to_terminal=True)
    assert use_color(ColorMode.always, to_terminal=False)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "xterm")
    assert use_color(ColorMode.auto, to_terminal=True)
    assert not use_color(ColorMode.auto, to_terminal=False)
    code, out, _ = run(["analyze", str(APP)], capsys)  # not a terminal: no escapes
    assert "\x1b[" not in out


def test_kernel_id_shows_one_launch_in_full(capsys):
    code, out, _ = run(["analyze", str(APP), "--kernel", "8"], capsys)
    assert code == 0 and out.startswith("#8 tiny_reduce\n")
    for part in ("grid 4x1x1, block 128x1x1", "Quantities:", "achieved occupancy",
                 "Findings (2):", "launch-config.small-grid", "fix: Launch at least one block",
                 "Nsight Compute's rules:"):
        assert part in out, part


def test_kernel_regex_and_nvtx_filter(capsys):
    code, out, _ = run(["analyze", str(APP), "-k", "saxpy"], capsys)
    assert code == 0 and "showing 3 of 9 launch(es), --kernel saxpy" in out
    table = [ln for ln in out.splitlines() if re.match(r"^\s+\d+\s+\S+ (ms|us|ns)", ln)]
    assert len(table) == 3 and all(ln.endswith("saxpy") for ln in table)
    assert "tiny_reduce" not in out.split("Top findings")[1]
    code, out, _ = run(["analyze", str(NVTX), "--nvtx", "loss", "-f", "json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["kernels"] and {k["nvtx"] for k in doc["kernels"]} == {"loss"}
    code, _, err = run(["analyze", str(NVTX), "--nvtx", "nope"], capsys)
    assert code == 2 and "--nvtx nope matches none of the" in err


# --- -f markdown and -f sarif -----------------------------------------------------------

def test_markdown_leads_with_the_actions_and_stays_short(capsys):
    from ncu_advisor.render.markdown import MAX_CHARS, render_markdown

    code, out, _ = run(["analyze", str(DECODER), "-f", "markdown"], capsys)
    assert code == 0 and out.startswith("## ncu-advise: what to change first")
    assert out.index("### Start here") < out.index("### Top findings") < out.index("### Launch")
    assert "1. **HIGH: Compile the eager ops into fused kernels**" in out
    assert len(out) <= MAX_CHARS
    # Any number of findings asked for: still bounded.
    from ncu_advisor import analyze, read_report

    doc = analyze(read_report(DECODER)).to_dict()
    assert len(render_markdown(doc, top=10_000)) <= MAX_CHARS
    # Names are C++ templates: no raw HTML reaches the page.
    doc["findings"][0]["kernel"] = "f<int, <script>alert(1)</script>>"
    doc["actions"][0]["title"] = "a <img src=x> *b* | c"
    page = render_markdown(doc)
    assert "<script>" not in page.replace("`f<int, <script>alert(1)</script>>`", "")
    assert r"a \<img src=x\> \*b\* \| c" in page


def test_sarif_validates_and_points_at_source_lines(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "tests" / "data" / "sarif-2.1.0-subset.schema.json").read_text())
    code, out, _ = run(["analyze", str(APP), "-f", "sarif"], capsys)
    log = json.loads(out)
    assert code == 0
    jsonschema.Draft7Validator(schema).validate(log)
    run_ = log["runs"][0]
    results = run_["results"]
    loads = next(r for r in results if r["ruleId"] == "coalescing.global-loads")
    location = loads["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("forms_app.cu")
    assert location["region"]["startLine"] == 22 and loads["level"] == "error"
    rule_ids = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    assert all(rule_ids[r["ruleIndex"]] == r["ruleId"] for r in results)
    # Findings without a source line are notifications of the run, not located results.
    notes = run_["invocations"][0]["toolExecutionNotifications"]
    assert notes and all(r["locations"] for r in results)


# --- 7. Rule tooling --------------------------------------------------------------------

def _rule_folder(tmp_path: Path, cases: str) -> Path:
    text = EXAMPLE_RULE.read_text()
    (tmp_path / "cache.l2-misses.toml").write_text(text + (
        '\n[estimate]\nmethod = "shortfall"\nquantity = "achieved_occupancy_pct"\n'
        'target = "theoretical_occupancy_pct"\n'))
    (tmp_path / "cache.l2-misses.cases.toml").write_text(cases)
    return tmp_path


CASE = ('[[case]]\nname = "half the warps"\nexpect = "fires"\n{extra}'
        'values = {{ sm_pct = 20, mem_pct = 85, l2_hit_pct = 5, achieved_occupancy_pct = 40, '
        'theoretical_occupancy_pct = 80 }}\n')


def test_a_case_asserts_estimate_and_title_and_target_names_a_quantity(tmp_path, capsys):
    folder = _rule_folder(tmp_path, CASE.format(
        extra='estimate = 50\ntitle = "L2 hit rate of 5%"\n'))
    code, out, err = run(["rules", "--test", str(folder)], capsys)
    assert code == 0 and "[half the warps]: ok" in out, out + err
    (folder / "cache.l2-misses.cases.toml").write_text(CASE.format(
        extra='estimate = { min = 60 }\ntitle = "nope"\n'))
    code, out, _ = run(["rules", "--test", str(folder)], capsys)
    assert code == 1 and "expected a title containing 'nope'" in out


def test_a_misspelled_case_key_is_a_failure(tmp_path, capsys):
    folder = _rule_folder(tmp_path, CASE.format(extra='severty = "high"\n'))
    code, out, err = run(["rules", "--test", str(folder)], capsys)
    assert code == 1
    assert "unknown key 'severty' (did you mean 'severity'?" in out
    assert err.endswith("ncu-advise: error: 1 rule case(s) failed\n")


def test_rules_option_takes_a_file(tmp_path, capsys):
    rule = tmp_path / "cache.l2-misses.toml"
    rule.write_text(EXAMPLE_RULE.read_text())
    code, out, err = run(["analyze", str(APP), "--rules", str(rule), "-f", "json"], capsys)
    assert code == 0, err
    code, out, _ = run(["rules", "--rules", str(rule)], capsys)
    assert code == 0 and "cache.l2-misses" in out
    code, out, _ = run(["rules", "--check", str(rule)], capsys)
    assert code == 0 and "1 rule file(s) OK" in out


def test_time_share_pct_is_in_the_writing_rules_guide():
    assert "time_share_pct" in (ROOT / "docs" / "writing-rules.md").read_text()


# --- 9. Store ---------------------------------------------------------------------------

def test_ingest_of_nothing_readable_fails_and_leaves_no_store(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "x.csv").write_text("a,b\n1,2\n")
    code, _, err = run(["ingest", str(folder), "--store", str(tmp_path / "s")], capsys)
    assert code == 2 and "nothing to ingest" in err
    assert not (tmp_path / "s").exists()


def test_reingest_with_a_new_label_warns_and_counts_agree(tmp_path, capsys):
    store = str(tmp_path / "s")
    code, out, _ = run(["ingest", str(APP), "--store", store, "--label", "build=1"], capsys)
    added = int(re.search(r"(\d+) finding\(s\)", out).group(1))
    code, out, err = run(["ingest", str(APP), "--store", store, "--label", "build=2"], capsys)
    assert code == 0 and "with label(s) build=1; build=2 not applied" in err
    code, out, _ = run(["trend", "--store", store, "-f", "json"], capsys)
    assert json.loads(out)[0]["findings"] == added  # application-level findings counted too


def test_query_text_is_a_table_not_pandas(tmp_path, capsys):
    store = str(tmp_path / "s")
    run(["ingest", str(APP), "--store", store], capsys)
    code, out, _ = run(["query", "--store", store, "SELECT * FROM reports"], capsys)
    assert code == 0 and out.endswith("(1 rows)\n")
    assert not re.search(r"\bNaN\b|\bNaT\b|\bNone\b", out)
    header = out.splitlines()[0].split()
    assert header[0] == "report_id" and "captured_at" in header
    cells = re.split(r"\s{2,}", out.splitlines()[1])
    assert max(len(c) for c in cells) <= 40


# --- 10. Library ------------------------------------------------------------------------

def test_findings_as_a_data_frame():
    from ncu_advisor import analyze, read_report

    analysis = analyze(read_report(APP))
    frame = analysis.findings_frame()
    assert len(frame) == len(analysis.findings)
    assert frame.iloc[0][["rule", "kernel", "severity"]].tolist() == [
        "launch-config.small-grid", "tiny_reduce", "high"]
    assert str(frame["launch"].dtype) == "Int64"
    assert list(analysis.actions_frame()["title"])[0].startswith("tiny_reduce:")


# --- 11. Teaching without a GPU ---------------------------------------------------------

def test_demo_offline_walks_the_lesson_from_the_capture(capsys):
    code, out, err = run(["demo", "coalescing", "--offline"], capsys)
    assert code == 0, err
    assert "bad (strided)" in out and "good (contiguous)" in out
    assert "38.99x faster after the fix" in out
    removed = out.split("What the fix removes (3):")[1].split("Still there")[0]
    assert "coalescing.global-loads" in removed and "coalescing.global-stores" in removed
    assert "Fix: Make adjacent threads touch adjacent addresses" in out


# ~23 s: every demo analyzed offline, one CLI run each (CI runs it with -m slow).
@pytest.mark.slow
def test_every_demo_offline_removes_its_own_category(capsys):
    code, out, _ = run(["demo", "all", "--offline", "-f", "json"], capsys)
    lessons = json.loads(out)
    assert code == 0 and len(lessons) == 14
    for lesson in lessons:
        if lesson["name"] == "roofline":  # a contrast of two placements, not a fix
            continue
        assert lesson["speedup"] > 1, lesson["name"]
        assert any(f["rule"].startswith(lesson["name"] + ".") for f in lesson["resolved"]), \
            lesson["name"]
