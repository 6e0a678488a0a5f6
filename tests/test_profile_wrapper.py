"""The profiling wrapper as issue 13 asks: the advisor set, the short form, unknown commands,
progress, Ctrl-C, multi-process and -k, against tests/fake_ncu/ncu (a test double, no GPU)."""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import ncu_calls, ncu_profile_call, use_fake_ncu

from ncu_advisor.cli.app import main, route
from ncu_advisor.derive.quantities import BY_NAME, QUANTITIES, known, metrics_of, routes_of
from ncu_advisor.errors import NcuAdviseError
from ncu_advisor.profiling import sections as collect
from ncu_advisor.profiling.run import build_ncu_command, run_profile
from ncu_advisor.profiling.session import LiveDisplay, _NcuOutput
from ncu_advisor.rules_engine.loader import load_rules

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
METRIC = re.compile(r"^[a-z][a-z0-9]*__[a-z0-9_]+(\.[a-z0-9_]+)*$")


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return use_fake_ncu(monkeypatch, tmp_path)


# --------------------------------------------------------------------------- the advisor set


def test_committed_section_file_is_current():
    shipped = collect.section_folder() / f"{collect.ADVISOR_SECTION}.section"
    assert shipped.read_text() == collect.section_text(), (
        "run: python -m ncu_advisor.profiling.sections --write")


def test_every_rule_input_is_collected():
    collected = set(collect.advisor_metrics())
    for rule in load_rules(None):
        names = set(rule.requires) | set(getattr(rule, "evidence", []) or [])
        for name in names:
            assert known(name), (rule.id, name)
            if name in BY_NAME and not BY_NAME[name].sources:
                continue  # stated by ncu's rule messages only (a details-page fallback)
            assert set(metrics_of(name)) <= collected | set(collect.NOT_COLLECTED), (rule.id,
                                                                                      name)


def _computable(name: str, collected: set[str]) -> bool:
    """Whether some source of the quantity (recursively for derived ones) is all collected."""
    if name in BY_NAME:
        quantity = BY_NAME[name]
        return not quantity.sources or any(set(s.metrics) <= collected for s in quantity.sources)
    return any(all(_computable(dep, collected) for dep in route) for route in routes_of(name))


def test_left_out_metrics_cost_no_rule_its_condition_or_estimate():
    """What the set leaves out to save passes only ever removes evidence, never a verdict."""
    collected = set(collect.advisor_metrics())
    for rule in load_rules(None):
        for name in rule.verdict_quantities():
            assert _computable(name, collected), (rule.id, name)
    for name in ("l1_pct", "flops_tensor", "sm_pct", "mem_pct", "dram_bytes", "duration_ns"):
        assert _computable(name, collected), name  # the roofline and bound read these
    left_out = set(collect.LEFT_OUT_FOR_PASSES)
    assert left_out and not left_out & collected


def test_every_quantity_source_is_collected():
    collected = set(collect.advisor_metrics()) | set(collect.NOT_COLLECTED)
    for quantity in QUANTITIES:
        for source in quantity.sources:
            assert set(source.metrics) <= collected, quantity.name


def _metric_literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and METRIC.match(node.value)}


def test_every_metric_named_in_the_code_is_collected_or_excused():
    """A module that starts reading a metric must add it to the set (collect.metric_readers)."""
    collected = set(collect.advisor_metrics()) | set(collect.NOT_COLLECTED)
    missing = {}
    for path in (ROOT / "ncu_advisor").rglob("*.py"):
        if path.name == "sections.py" and path.parent.name == "profiling":
            continue
        names = _metric_literals(path) - collected
        # Prefixes and f-string pieces are not metrics of their own.
        names = {n for n in names if not n.endswith("_")}
        if names:
            missing[str(path.relative_to(ROOT))] = sorted(names)
    assert missing == {}


def test_derived_metrics_are_defined_from_collected_ones():
    text = collect.section_text()
    metrics = set(collect.advisor_metrics())
    for name, (expression, _) in collect.DERIVED.items():
        if name in metrics:
            assert f'Name: "{name}"\n    Expression: "{expression}"' in text
            assert set(collect._operands(expression)) <= metrics


def test_section_file_shape():
    text = collect.section_text()
    assert 'Identifier: "NcuAdvise"' in text and 'Identifier: "advise"' in text
    metrics_block = text.split("\nMetricDefinitions {")[0]
    names = re.findall(r'^    Name: "([^"]+)"$', metrics_block, flags=re.M)
    assert len(names) == len(set(names))
    assert set(collect.advisor_metrics()) <= set(names)
    assert text.count("{") == text.count("}")
    # A third of full's ~2,200 metrics would already be generous.
    assert 80 <= len(collect.advisor_metrics()) <= 200


def test_stock_section_folder_is_found_next_to_ncu(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    install = tmp_path / "opt" / "nsight-compute" / "2025.3.1"
    (install / "sections").mkdir(parents=True)
    (install / "sections" / "SpeedOfLight.section").write_text("Identifier: \"x\"\n")
    ncu = install / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    link = tmp_path / "bin" / "ncu"
    link.parent.mkdir()
    link.symlink_to(ncu)
    assert collect.stock_section_folder(link) == install / "sections"
    args, warnings = collect.advisor_ncu_args(link)
    assert args[:4] == ["--section-folder", str(install / "sections"), "--section-folder",
                        str(collect.section_folder())]
    assert args[4:6] == ["--section", "NcuAdvise"]
    assert [args[i + 1] for i in range(6, len(args), 2)] == list(collect.RULE_SECTIONS)
    assert warnings == []


def test_stock_folder_of_a_cuda_toolkit_launcher_script(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cuda = tmp_path / "cuda-13.0"
    (cuda / "nsight-compute-2025.3.1" / "sections").mkdir(parents=True)
    (cuda / "nsight-compute-2025.3.1" / "sections" / "Occupancy.section").write_text("x")
    (cuda / "bin").mkdir()
    (cuda / "bin" / "ncu").write_text("#!/bin/sh\nexec \"$(dirname $0)/../nsight-compute-2025.3.1"
                                      "/ncu\" \"$@\"\n")
    assert collect.stock_section_folder(cuda / "bin" / "ncu") == (
        cuda / "nsight-compute-2025.3.1" / "sections")


@pytest.mark.parametrize("script", [
    'exec {opt}/2025.3.1/ncu "$@"',                          # the install's absolute path
    'NCU_HOME={opt}\nexec "$NCU_HOME/2025.3.1/ncu" "$@"',   # only the folder above the version
])
def test_fresh_toolkit_machine_finds_the_stock_sections(tmp_path, monkeypatch, script):
    """A fresh GPU machine: ncu under /usr/local/cuda/bin is a launcher of an install
    elsewhere, and ncu has not made its documents folder yet (HOME is empty)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    opt = tmp_path / "opt" / "nvidia" / "nsight-compute"
    for version in ("2024.1.0", "2025.3.1"):
        (opt / version / "sections").mkdir(parents=True)
        (opt / version / "sections" / "SpeedOfLight.section").write_text("x")
    launcher = tmp_path / "usr" / "local" / "cuda-13.0" / "bin" / "ncu"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/sh\n" + script.format(opt=opt) + "\n")
    assert collect.stock_section_folder(launcher) == opt / "2025.3.1" / "sections"
    args, warnings = collect.advisor_ncu_args(launcher)
    assert args[:2] == ["--section-folder", str(opt / "2025.3.1" / "sections")]
    assert warnings == [] and "SpeedOfLight" in args


def test_without_stock_sections_only_ours_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    args, warnings = collect.advisor_ncu_args(tmp_path / "nowhere" / "ncu")
    assert args == ["--section-folder", str(collect.section_folder()), "--section", "NcuAdvise"]
    assert len(warnings) == 1 and "--set full" in warnings[0]


def test_section_folder_override(monkeypatch, tmp_path):
    monkeypatch.setenv("NCU_ADVISE_SECTIONS", str(tmp_path))
    assert collect.section_folder() == tmp_path


def test_full_set_is_one_flag_away():
    cmd = build_ncu_command("/x/ncu", "./app", [], rep_path="r", section_set="full")
    assert "--set" in cmd and "NcuAdvise" not in cmd


# --------------------------------------------------------------------------- the short form


@pytest.mark.parametrize("argv, routed", [
    (["-o", "DIR", "-c", "20", "./app", "a"], ["profile", "-o", "DIR", "-c", "20", "./app", "a"]),
    (["--set=full", "-k", "regex:gemm", "/abs/app"],
     ["profile", "--set=full", "-k", "regex:gemm", "/abs/app"]),
    (["build/app", "-o", "x"], ["profile", "build/app", "-o", "x"]),
    (["--", "python3", "train.py"], ["profile", "--", "python3", "train.py"]),
    (["-c", "3", "--", "python3", "-c", "1"], ["profile", "-c", "3", "--", "python3", "-c", "1"]),
    (["analyze", "x.csv"], ["analyze", "x.csv"]),
    (["diff", "a", "b"], ["diff", "a", "b"]),  # a command registered by its own module
    (["profile", "python3", "t.py"], ["profile", "python3", "t.py"]),
    (["--help"], ["--help"]),
])
def test_routing(argv, routed):
    assert route(argv) == routed


def test_a_saved_report_or_folder_first_is_analyzed(tmp_path, monkeypatch, capsys):
    """`ncu-advise run.csv` and `ncu-advise reports/` analyze; an executable file is profiled."""
    monkeypatch.chdir(tmp_path)
    report = ROOT / "sample_reports" / "corpus" / "cuda_nbody.raw.csv.xz"
    (tmp_path / "run.csv.xz").write_bytes(report.read_bytes())
    (tmp_path / "reports").mkdir()
    (tmp_path / "notes.txt").write_text("not ncu output\n")
    app = tmp_path / "app.csv"
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    assert route(["run.csv.xz", "-f", "json"]) == ["analyze", "run.csv.xz", "-f", "json"]
    assert route(["reports"]) == ["analyze", "reports"]
    assert route(["-", "-f", "json"]) == ["analyze", "-", "-f", "json"]  # standard input
    assert route(["./app.csv"]) == ["profile", "./app.csv"]  # a program, whatever its name
    with pytest.raises(NcuAdviseError, match="unknown command 'notes.txt'"):
        route(["notes.txt"])
    assert main(["run.csv.xz", "--top", "1"]) == 0
    assert "nbody" in capsys.readouterr().out
    assert main(["gone.ncu-rep"]) == 2  # a report's name that is not there: not a command
    assert "gone.ncu-rep: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("word, suggestion", [("grep", None), ("analyse", "analyze"),
                                              ("rule", "rules"), ("python3", None)])
def test_unknown_first_word_is_not_profiled(word, suggestion, tmp_path, capsys):
    code = main([word, "a", "b"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"unknown command '{word}'" in err and f"-- {word}" in err
    if suggestion:
        assert f"did you mean '{suggestion}'?" in err
    assert not (tmp_path / "ncu_calls.jsonl").exists()  # ncu was never started


def test_unknown_word_that_is_a_file_here_suggests_its_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myapp").write_text("")
    assert main(["myapp"]) == 2
    assert "ncu-advise ./myapp" in capsys.readouterr().err


def test_short_form_takes_its_options_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "app.py"
    script.write_text("import sys; print('args', sys.argv[1:])\n")
    code = main(["-o", "out", "-c", "2", "-k", "regex:saxpy", "--", PY, str(script), "x", "-o",
                 "y"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "args ['x', '-o', 'y']" in captured.out
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["command"] == [PY, str(script), "x", "-o", "y"]
    profile_call = ncu_profile_call(tmp_path)
    assert profile_call[profile_call.index("-k") + 1] == "regex:saxpy"
    assert profile_call[profile_call.index("-c") + 1] == "2"
    assert "NcuAdvise" in profile_call  # the advisor set by default
    assert data["session"]["section_set"] == "advise"
    assert set(data["session"]["timings_s"]) >= {"ncu", "read", "analyze", "render"}
    assert "38 passes each" in captured.err


@pytest.mark.slow
def test_arguments_after_a_second_dash_dash_go_to_ncu(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["--set", "full", "--", PY, "-c", "pass", "--", "--cache-control", "none"])
    assert code == 0, capsys.readouterr().err
    census, *depth = [c for c in ncu_calls(tmp_path) if "--version" not in c
                      and "--import" not in c]
    call = depth[0]  # the census collects the duration alone; the depth run takes the set
    assert call[call.index("--set") + 1] == "full" and "NcuAdvise" not in call
    assert "--set" not in census and "--metrics" in census
    for run in (census, call):
        assert run[run.index("--cache-control") + 1] == "none"
        assert run[-2:] == ["-c", "pass"]


# --------------------------------------------------------------------------- running


def test_program_output_is_passed_through_not_parsed(tmp_path, capfd):
    # A program that prints lines looking like ncu's must not fool the wrapper.
    code = ("import sys; print('==PROF== Profiling \"fake\" - 0: 0%....100% - 99 passes'); "
            "print('==ERROR== not from ncu', file=sys.stderr); print('plain out')")
    result = run_profile(PY, ["-c", code], out_dir=tmp_path, progress=False, all_launches=True)
    captured = capfd.readouterr()
    assert "plain out" in captured.out and "==PROF== Profiling \"fake\"" in captured.out
    assert "==ERROR== not from ncu" in captured.err  # stderr stays stderr
    assert 99 not in result.passes and result.passes == [38] * 9
    assert not any("not from ncu" in w for w in result.warnings)
    assert "--log-file" in result.command and result.log_path.is_file()


def test_status_line_counts_kernels_passes_and_time_left():
    display = LiveDisplay(enabled=False, total=10)
    out = _NcuOutput(total=10)
    assert display.status(out) == "running the program under ncu"
    for i in range(4):
        out.add(f'==PROF== Profiling "k" - {i}: 0%....50%....100% - 12 passes')
    display.first_kernel_at = display.started - 8.0  # 4 kernels in 8 s
    line = display.status(out)
    assert "4/10 kernels done, 12 passes each" in line
    assert "2.0 s/kernel" in line and "about 12 s left" in line
    current = re.match(r'^Profiling "(?P<name>.*)"(?: - (?P<id>\d+))?(?: \((?P<n>\d+)/'
                       r'(?P<total>\d+)\))?:(?P<rest>.*)$', 'Profiling "gemm" - 4: 0%....50%')
    assert display.status(out, current).startswith("profiling kernel 4: gemm 50%")


def test_ctrl_c_stops_ncu_and_keeps_what_was_profiled(tmp_path, monkeypatch, ctrl_c):
    monkeypatch.setenv("FAKE_NCU_DELAY", "0.1")  # each kernel takes about 0.3 s
    # Ctrl-C after the second kernel, from the fake: a timer raced the start-up under load.
    monkeypatch.setenv("FAKE_NCU_SIGINT_PARENT", "2")
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False,
                         all_launches=True)
    assert result.interrupted
    assert 1 <= len(result.passes) < 9
    assert result.rep_path.is_file()
    assert any(w.startswith("interrupted (Ctrl-C)") for w in result.warnings)


@pytest.mark.slow
def test_ctrl_c_in_the_cli_writes_the_report_and_exits_130(tmp_path, monkeypatch, capsys,
                                                           ctrl_c):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAKE_NCU_DELAY", "0.1")
    monkeypatch.setenv("FAKE_NCU_SIGINT_PARENT", "2")
    code = main(["-o", "out", "--all-launches", "--", PY, "-c", "pass"])
    err = capsys.readouterr().err
    assert code == 130, err
    assert (tmp_path / "out" / "report.json").is_file() and "interrupted" in err


def test_multi_process_is_the_default_and_can_be_changed(tmp_path):
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False)
    assert result.command[result.command.index("--target-processes") + 1] == "all"
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False,
                         extra=["--target-processes", "application-only"])
    assert result.command.count("--target-processes") == 1
    assert "application-only" in result.command


def test_kernel_regex_filter(tmp_path):
    # The fake ncu's CSV export is a fixed capture: count from its log, the .ncu-rep path.
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False,
                         kernel_name="regex:^s", export_csv=False)
    # copy_strided does not start with s; scale_vec x2, saxpy x3 do.
    assert len(result.passes) == 5 and result.kernels_profiled == 5


@pytest.mark.slow
def test_dash_dash_after_an_explicit_program_goes_to_ncu(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    app = tmp_path / "app"
    app.write_text("#!/bin/sh\necho \"app got: $*\"\n")
    app.chmod(0o755)
    code = main(["-c", "1", "./app", "x", "--", "--cache-control", "none"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "app got: x" in captured.out
    call = ncu_profile_call(tmp_path)
    assert call[call.index("--cache-control") + 1] == "none" and call[-2:] == ["./app", "x"]


def test_the_command_line_starts_without_pandas():
    """`ncu-advise ./app` starts ncu first: importing the CLI loads no analysis stack."""
    import subprocess

    code = ("import sys, ncu_advisor.cli.app, ncu_advisor.profiling.run; "
            "print(sorted(m for m in ('pandas', 'numpy', 'pyarrow', 'matplotlib', 'jinja2') "
            "if m in sys.modules))")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_empty_details_page_does_not_lose_the_run(tmp_path, monkeypatch, capsys):
    """A fresh machine's first run gave a details page of its header alone: the report is
    written from the raw page, with a warning naming what was left out (it was exit 2)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAKE_NCU_MODE", "emptydetails")
    code = main(["-o", "out", "--", PY, "-c", "pass"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(data["kernels"]) == 9
    assert any("details.csv could not be read and was left out" in w for w in data["warnings"])
    assert "left out" in captured.err


# --------------------------------------------------------------------------- fixed cost (issue 24)


def test_no_html_writes_no_page_and_loads_no_html_renderer(tmp_path):
    """--no-html: report.json and the text only; neither jinja2 nor matplotlib is imported."""
    import subprocess

    code = ("import sys; from ncu_advisor.cli.app import main; "
            "code = main(['-o', 'out', '--all-launches', '--no-html', '--', sys.executable, "
            "'-c', 'pass']); "
            "print('LOADED', sorted(m for m in ('jinja2', 'matplotlib', 'ncu_advisor.render.html') "
            "if m in sys.modules)); sys.exit(code)")
    proc = subprocess.run([PY, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stdout
    out = tmp_path / "out"
    assert not (out / "report.html").exists()
    data = json.loads((out / "report.json").read_text())
    assert len(data["kernels"]) == 9
    assert "render" not in data["session"]["timings_s"]
    assert "text" in data["session"]["timings_s"]
    assert "wrote out/report.json\n" in proc.stderr


def test_the_default_still_writes_the_page(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["-o", "out", "--all-launches", "--", PY, "-c", "pass"]) == 0
    assert (tmp_path / "out" / "report.html").read_text().startswith("<!DOCTYPE html>")
    timings = json.loads((tmp_path / "out" / "report.json").read_text())["session"]["timings_s"]
    assert {"export", "read", "analyze", "render", "text"} <= set(timings)


def test_the_warm_up_pays_the_first_read_and_page_costs_during_ncu():
    """What runs beside ncu: the rules, the lean read's metric names, every page template."""
    from ncu_advisor.analysis import metric_use
    from ncu_advisor.cli.profile import _load_analysis
    from ncu_advisor.render import html

    metric_use.analysis_metrics.cache_clear()
    html.environment.cache_clear()
    rules = _load_analysis(None, True)
    assert rules and metric_use.analysis_metrics.cache_info().currsize == 1
    env = html.environment()
    compiled = set(env.cache)  # jinja2's own cache of compiled templates
    assert len(compiled) == len(env.list_templates())
    from ncu_advisor import analyze, read_report

    data = analyze(read_report(ROOT / "sample_reports" / "forms"
                               / "forms_app.import.raw.base.csv")).to_dict()
    html.render_html(data)
    assert set(env.cache) == compiled  # rendering the page compiled nothing more


def test_the_environment_is_built_once():
    from ncu_advisor.render.html import environment

    assert environment() is environment()
