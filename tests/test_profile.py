"""Tests of the profiling wrapper, against tests/fake_ncu/ncu (a test double: no GPU, no ncu)."""

import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import FAKE_NCU, ncu_calls, use_fake_ncu

from ncu_advisor.errors import NcuAdviseError, NcuNotFoundError, ProfilingError
from ncu_advisor.profiling import install as ncu_install
from ncu_advisor.profiling import run as profile
from ncu_advisor.profiling import sections as collect
from ncu_advisor.profiling import session as ncu_session
from ncu_advisor.profiling.run import (
    ProfileResult,
    build_import_command,
    build_ncu_command,
    find_ncu,
    ncu_version,
    run_profile,
    version_warnings,
)

PY = sys.executable


def app(code: str) -> list[str]:
    """A program and its arguments: this Python running `code`."""
    return [PY, "-c", code]


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return use_fake_ncu(monkeypatch, tmp_path)


def make_exe(path: Path, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert "\n" not in message and message
    return message


# --------------------------------------------------------------------------- command lines


def test_command_order_and_defaults():
    cmd = build_ncu_command("/x/ncu", "./app", ["--n", "5"], rep_path="out/app.ncu-rep",
                            section_set="full")
    assert cmd == ["/x/ncu", "--clock-control", "none", "--target-processes", "all",
                   "--set", "full", "-o", "out/app.ncu-rep", "-f", "./app", "--n", "5"]
    assert all(isinstance(part, str) for part in cmd)


def test_default_set_is_the_advisor_set(tmp_path):
    # /x/ncu has no stock sections next to it: only ours is collected.
    cmd = build_ncu_command("/x/ncu", "./app", [], rep_path="r", log_file=tmp_path / "l")
    folder = str(collect.section_folder())
    assert cmd[:5] == ["/x/ncu", "--clock-control", "none", "--target-processes", "all"]
    assert cmd[5:9] == ["--section-folder", folder, "--section", "NcuAdvise"]
    assert "--set" not in cmd
    assert cmd[-6:] == ["--log-file", str(tmp_path / "l"), "-o", "r", "-f", "./app"]


def test_command_filters_and_extra_pass_through():
    cmd = build_ncu_command(
        Path("/x/ncu"), "python3", ["train.py", "-c", "1; rm -rf /"], rep_path=Path("r"),
        section_set="detailed", kernel_name="regex:softmax", launch_count=12, nvtx=True,
        extra=["--section", "Occupancy", "--cache-control", "none"],
    )
    assert cmd == ["/x/ncu", "--clock-control", "none", "--target-processes", "all",
                   "--set", "detailed",
                   "-k", "regex:softmax", "-c", "12", "--nvtx",
                   "--section", "Occupancy", "--cache-control", "none",
                   "-o", "r", "-f", "python3", "train.py", "-c", "1; rm -rf /"]


@pytest.mark.parametrize("extra", [["--clock-control", "base"], ["--clock-control=base"]])
def test_user_clock_control_replaces_the_default(extra):
    cmd = build_ncu_command("ncu", "./app", [], rep_path="r", extra=extra)
    assert "none" not in cmd
    start = cmd.index(extra[0])
    assert cmd[start:start + len(extra)] == extra


def test_user_set_and_no_set():
    assert "--set" not in build_ncu_command("ncu", "./a", [], rep_path="r", section_set=None)
    cmd = build_ncu_command("ncu", "./a", [], rep_path="r", extra=["--set=basic"])
    assert "full" not in cmd and "--set=basic" in cmd


@pytest.mark.parametrize("extra", [["-o", "x"], ["--export=x"], ["--csv"], ["--import", "a"]])
def test_options_owned_by_the_wrapper_are_refused(extra):
    with pytest.raises(ProfilingError, match="set by ncu-advise") as exc:
        build_ncu_command("ncu", "./a", [], rep_path="r", extra=extra)
    one_line(exc)


def test_launch_count_must_be_positive():
    with pytest.raises(ProfilingError, match="at least 1"):
        build_ncu_command("ncu", "./a", [], rep_path="r", launch_count=0)


def test_import_commands():
    assert build_import_command("ncu", "o/a.ncu-rep", page="raw") == [
        "ncu", "--import", "o/a.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"]
    assert build_import_command("ncu", "o/a.ncu-rep") == [
        "ncu", "--import", "o/a.ncu-rep", "--csv", "--print-units", "base"]


# --------------------------------------------------------------------------- find_ncu


def test_find_ncu_prefers_the_environment(monkeypatch, tmp_path):
    on_path = make_exe(tmp_path / "bin" / "ncu")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_ncu() == FAKE_NCU


def test_find_ncu_accepts_a_folder_in_the_environment(monkeypatch, tmp_path):
    exe = make_exe(tmp_path / "nsight-compute" / "2025.3.1" / "ncu")
    monkeypatch.setenv("NCU", str(exe.parent))
    assert find_ncu() == exe


def test_find_ncu_bad_environment_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("NCU", str(tmp_path / "nope"))
    with pytest.raises(NcuNotFoundError, match="NCU=.*nope is not an executable") as exc:
        find_ncu()
    one_line(exc)


def test_find_ncu_then_path(monkeypatch, tmp_path):
    exe = make_exe(tmp_path / "bin" / "ncu")
    monkeypatch.delenv("NCU")
    monkeypatch.setenv("PATH", str(exe.parent))
    assert find_ncu() == exe


def test_find_ncu_then_install_folders_newest_first(monkeypatch, tmp_path):
    monkeypatch.delenv("NCU")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("12.4", "13.0", "12.10"):
        make_exe(tmp_path / f"cuda-{version}" / "bin" / "ncu")
    make_exe(tmp_path / "cuda" / "bin" / "ncu")
    (tmp_path / "cuda-13.1" / "bin").mkdir(parents=True)  # a folder without ncu is skipped
    monkeypatch.setattr(ncu_install, "INSTALL_GLOBS", (str(tmp_path / "cuda*" / "bin" / "ncu"),))
    assert find_ncu() == tmp_path / "cuda-13.0" / "bin" / "ncu"


def test_find_ncu_not_found_says_where_and_how(monkeypatch, tmp_path):
    monkeypatch.delenv("NCU")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu_install, "INSTALL_GLOBS", (str(tmp_path / "cuda*/bin/ncu"),))
    with pytest.raises(NcuNotFoundError) as exc:
        find_ncu()
    message = one_line(exc)
    assert "$NCU" in message and "PATH" in message and "cuda*" in message
    assert "install Nsight Compute (part of the CUDA toolkit) or set NCU=/path/to/ncu" in message
    assert isinstance(exc.value, NcuAdviseError) and exc.value.exit_code == 2


# --------------------------------------------------------------------------- version


def test_version_is_parsed():
    assert ncu_version(FAKE_NCU) == "2025.3.1.0"


@pytest.mark.parametrize(("version", "warns"), [
    ("2025.3.1.0", False), ("2023.1.0.0", False), ("2022.4.1.6", True), ("2019.5", True),
    ("unknown", True),
])
def test_version_warnings(version, warns):
    warnings = version_warnings(version)
    assert bool(warnings) is warns
    assert all("\n" not in w for w in warnings)


def test_old_version_is_a_warning_of_the_run(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NCU_VERSION", "2022.4.1.6")
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False)
    assert result.ncu_version == "2022.4.1.6"
    assert any("older than 2023.1" in w for w in result.warnings)


def test_version_unknown_and_failing(tmp_path):
    silent = make_exe(tmp_path / "silent" / "ncu", "#!/bin/sh\necho hello\n")
    assert ncu_version(silent) == "unknown"
    broken = make_exe(tmp_path / "broken" / "ncu",
                      "#!/bin/sh\necho 'libfoo.so: missing' >&2\nexit 127\n")
    with pytest.raises(NcuNotFoundError, match="libfoo.so: missing") as exc:
        ncu_version(broken)
    one_line(exc)
    with pytest.raises(NcuNotFoundError, match="cannot run"):
        ncu_version(tmp_path / "absent" / "ncu")


# --------------------------------------------------------------------------- run_profile


def test_success(tmp_path, capfd):
    out = tmp_path / "reports"
    result = run_profile(*_split(app("print('hello from the app')")), out_dir=out, name="forms",
                         progress=False, export_csv=True, section_set="full",
                         all_launches=True)
    assert isinstance(result, ProfileResult)
    assert result.rep_path == out / "forms.ncu-rep"
    assert result.raw_csv == out / "forms.raw.csv"
    assert result.details_csv == out / "forms.details.csv"
    for path in (result.rep_path, result.raw_csv, result.details_csv):
        assert path.is_file() and path.stat().st_size > 0
    assert result.kernels_profiled == 9
    assert result.program_exit_code == 0
    assert result.ncu_version == "2025.3.1.0"
    assert (result.section_set, result.clock_control) == ("full", "none")
    assert result.warnings == []
    assert sum(line.startswith('==PROF== Profiling "') for line in result.log) == 9
    assert result.command[:7] == [str(FAKE_NCU), "--clock-control", "none",
                                  "--target-processes", "all", "--set", "full"]
    assert result.passes == [38] * 9
    assert result.log_path.read_text().count("==PROF== Profiling") == 9
    assert result.command[-3:] == [PY, "-c", "print('hello from the app')"]
    facts = result.session_facts()
    assert facts["ncu_version"] == "2025.3.1.0" and facts["clock_control"] == "none"

    # The program's output reaches stdout; ncu's own lines do not.
    stdout = capfd.readouterr().out
    assert "hello from the app" in stdout and "==PROF==" not in stdout

    calls = ncu_calls(tmp_path)
    # `ncu --version` runs beside the profiling run: either may log first.
    assert sorted(calls[:2]) == sorted([["--version"], result.command[1:]])
    # The two exports run side by side: either may log first.
    assert sorted(calls[2:]) == sorted([build_import_command("ncu", result.rep_path,
                                                             page="raw")[1:],
                                        build_import_command("ncu", result.rep_path)[1:]])


def test_results_are_readable(tmp_path):
    from ncu_advisor.readers import read_report

    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False, export_csv=True)
    assert result.report_files == [result.raw_csv, result.details_csv]
    assert len(read_report(result.raw_csv).launches) == result.kernels_profiled
    assert len(read_report(result.details_csv).launches) == result.kernels_profiled


def test_arguments_reach_the_program_unchanged(tmp_path, capfd):
    weird = ["a b", "$HOME", "; echo no", "'q'", "-o", "x"]
    run_profile(PY, ["-c", "import sys; print(sys.argv[1:])", *weird], out_dir=tmp_path,
                progress=False)
    assert repr(weird) in capfd.readouterr().out


def test_default_names(tmp_path):
    script = tmp_path / "train_mlp.py"
    script.write_text("print('training')\n")
    result = run_profile("python3", [str(script)], out_dir=tmp_path, progress=False)
    assert result.rep_path.name == "train_mlp.ncu-rep"
    assert result.command[-2:] == ["python3", str(script)]
    exe = make_exe(tmp_path / "bin" / "my app", "#!/bin/sh\necho hi\n")
    assert run_profile(exe, out_dir=tmp_path, progress=False).rep_path.name == "my_app.ncu-rep"


def test_filters_reach_ncu(tmp_path):
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, kernel_name="saxpy",
                         launch_count=2, nvtx=True, progress=False, export_csv=True)
    profiled = [line for line in result.log if line.startswith("==PROF== Profiling")]
    assert profiled == [  # as ncu 2025.3 prints them under -k: no launch ID, no (n/N)
        '==PROF== Profiling "saxpy": 0%....50%....100% - 38 passes',
        '==PROF== Profiling "saxpy": 0%....50%....100% - 38 passes',
    ]
    cut = result.command.index("-k")
    assert ["-k", "saxpy", "-c", "2", "--nvtx"] == result.command[cut:cut + 5]
    # ncu refuses --nvtx on import; the NVTX columns come without it.
    assert all("--nvtx" not in call for call in ncu_calls(tmp_path) if "--import" in call)


def test_export_failure_is_one_line(tmp_path):
    with pytest.raises(ProfilingError, match="could not export.*Failed to open file") as exc:
        profile.export_csvs(FAKE_NCU, tmp_path / "missing.ncu-rep")
    one_line(exc)
    assert list(tmp_path.glob("*.csv")) == []  # no half-written exports are left


def test_user_options_are_recorded(tmp_path):
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False,
                         extra=["--clock-control", "base", "--set", "basic"])
    assert (result.clock_control, result.section_set) == ("base", "basic")
    assert "none" not in result.command and "full" not in result.command


def test_permission_error(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    with pytest.raises(ProfilingError) as exc:
        run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False)
    message = one_line(exc)
    for part in ("ERR_NVGPUCTRPERM", "admin", "sudo", "NVreg_RestrictProfilingToAdminUsers=0",
                 "/etc/modprobe.d", "https://developer.nvidia.com/ERR_NVGPUCTRPERM"):
        assert part in message


def test_nothing_profiled(monkeypatch, tmp_path):
    stale = tmp_path / "old.ncu-rep"
    stale.write_bytes(b"an earlier run")
    monkeypatch.setenv("FAKE_NCU_MODE", "nothing")
    with pytest.raises(ProfilingError) as exc:
        run_profile(PY, ["-c", "pass"], out_dir=tmp_path, name="old", progress=False)
    message = one_line(exc)
    assert message.startswith("nothing was profiled:")
    assert "-k/-c" in message and "CUDA kernels" in message
    assert not stale.exists()  # an earlier report is never mistaken for this run's


def test_kernel_filter_matching_nothing(tmp_path, capfd):
    with pytest.raises(ProfilingError) as exc:
        run_profile(PY, ["-c", "pass"], out_dir=tmp_path, kernel_name="softmax", progress=False)
    message = one_line(exc)
    assert message.startswith("nothing was profiled:") and "-k softmax" in message
    # ncu's list of the kernels it saw ends up in the message, not on stdout.
    assert message.endswith("the program launched: apply_pair, copy_coalesced, copy_strided, "
                            "saxpy, scale_vec, tiny_reduce")
    assert "Available" not in capfd.readouterr().out


def test_program_failing_after_some_kernels(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NCU_MODE", "appfail")
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False, export_csv=True)
    assert result.program_exit_code == 3
    assert result.rep_path.is_file() and result.raw_csv.is_file()
    # The fake's report is always the 9-launch capture, though it announced 4.
    assert any(w.startswith("the program exited with status 3; the report covers the 9 kernels")
               for w in result.warnings)


def test_program_own_exit_status(tmp_path):
    result = run_profile(PY, ["-c", "import sys; sys.exit(5)"], out_dir=tmp_path, progress=False)
    assert result.program_exit_code == 5
    assert any("exited with status 5" in w for w in result.warnings)


def test_program_not_found(tmp_path):
    with pytest.raises(ProfilingError, match="program not found") as exc:
        run_profile(tmp_path / "no_such_app", out_dir=tmp_path, progress=False)
    one_line(exc)
    with pytest.raises(ProfilingError, match="program not found"):
        run_profile("no-such-command-ncu-advise", out_dir=tmp_path, progress=False)


def test_program_not_executable(tmp_path):
    script = tmp_path / "model.py"
    script.write_text("print(1)\n")
    with pytest.raises(ProfilingError, match="not executable.*python3") as exc:
        run_profile(script, out_dir=tmp_path, progress=False)
    one_line(exc)
    with pytest.raises(ProfilingError, match="not executable"):
        run_profile(tmp_path, out_dir=tmp_path, progress=False)


def test_program_in_current_folder(tmp_path, monkeypatch):
    make_exe(tmp_path / "localapp", "#!/bin/sh\necho local\n")
    monkeypatch.chdir(tmp_path)
    result = run_profile("localapp", out_dir="out", progress=False)
    assert result.command[-1] == os.path.join(".", "localapp")


def test_live_progress_on_a_terminal(monkeypatch, tmp_path, capfd):
    # FORCE_COLOR makes rich treat the captured stderr as a terminal; the delay makes the
    # progress dots arrive before their line ends.
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("FAKE_NCU_DELAY", "0.01")
    result = run_profile(PY, ["-c", "print('app line')"], out_dir=tmp_path, launch_count=3,
                         export_csv=False)  # the fake export is a fixed 9-launch capture
    assert result.kernels_profiled == 3 and result.passes == [38, 38, 38]
    captured = capfd.readouterr()
    assert "app line" in captured.out
    assert "profiling kernel 0: copy_coalesced" in captured.err
    assert "3/3 kernels done, 38 passes each" in captured.err


def test_no_progress_when_not_a_terminal(tmp_path, capfd):
    run_profile(PY, ["-c", "pass"], out_dir=tmp_path)
    assert "kernel" not in capfd.readouterr().err


# --------------------------------------------------------------------------- output parsing


def test_output_parser():
    out = ncu_session._NcuOutput()
    assert out.add("some program output") is None
    kind, match = out.add('==PROF== Profiling "softmax_warp_forward" - 3 (4/12): 0%....50%....'
                          '100% - 38 passes')
    assert kind == "PROF" and match["id"] == "3" and out.total == 12
    out.add("==ERROR== The application returned an error code (7).")
    out.add("==WARNING== Unable to access the following 6 metrics: " + "x, " * 100)
    out.add("==ERROR== Unknown Error on device 0.")
    out.add("==PROF== Report: /tmp/a b/r.ncu-rep")
    assert out.kernels == ["softmax_warp_forward"]
    assert out.app_exit_code == 7
    assert out.errors == ["Unknown Error on device 0."]
    assert out.report == "/tmp/a b/r.ncu-rep"
    assert out.warnings == ["ncu could not collect 6 metrics (x, x, ...); they read n/a"]
    out.add("==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, "
            "profiling results may be inconsistent.")  # expected: we chose --clock-control none
    out.add("==WARNING== " + "something new " * 30)
    assert len(out.warnings) == 2 and len(out.warnings[1]) <= 210
    assert len(out.log) == 7


@pytest.mark.parametrize(("line", "launch", "total"), [
    ('Profiling "copy_coalesced" - 0: 0%....50%....100% - 10 passes', "0", None),
    ('Profiling "scale_vec" - 2 (3/3): 0%....50%....100% - 10 passes', "2", "3"),
    ('Profiling "saxpy": 0%....50%....100% - 10 passes', None, None),  # real, under -k
    ('Profiling "saxpy" (1/2): 0%....', None, "2"),
])
def test_profiling_line_forms(line, launch, total):
    match = ncu_session._PROFILING.match(line)
    assert match and (match["id"], match["total"]) == (launch, total)


def test_embedded_messages_are_split():
    line = '==PROF== Profiling "k" - 0: 0%....==ERROR== Failed to profile "k" in process 12'
    assert ncu_session._split_ncu_messages(line) == [
        '==PROF== Profiling "k" - 0: 0%....', '==ERROR== Failed to profile "k" in process 12']
    assert ncu_session._split_ncu_messages("plain") == ["plain"]


def _split(argv: list[str]) -> tuple[str, list[str]]:
    return argv[0], argv[1:]
