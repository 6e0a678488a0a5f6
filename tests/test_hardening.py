"""Regression cases of the second hardening round: each input once gave an internal error
(exit 70) or a hang; each now gives its result or one line and exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
DETAILS = ROOT / "sample_reports" / "demos" / "coalescing.details.csv"
OCC_REP = ROOT / "sample_reports" / "occupancy" / "occ_sweep.ncu-rep"


def _one_line_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ncu-advise: error:"), err
    return err


def _rule_problem(argv, capsys) -> str:
    """``rules --check`` found a problem: one line for it, one summary line, exit 1."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.endswith("ncu-advise: error: 1 problem(s) in rule "
                                                 "files\n"), err
    return err


def test_diff_of_a_report_without_durations_with_itself(capsys):
    assert main(["diff", str(OCC_REP), str(OCC_REP)]) == 0
    assert "no change" in capsys.readouterr().out


@pytest.mark.parametrize("text, says", [
    (b"patterns = 5\n", "unknown key"),
    (b'[[origin]]\nid = "x"\nlabel = "x"\npatterns = 5\n', "list of strings"),
    (b'[origin]\nid = "x"\n', "array of tables"),
    (b'[[origin]]\nid = "x"\npatterns = ["^x"]\ncolour = "red"\n', "unknown field"),
    (b"\xff\xfe\x00bad", "UTF-8"),
    (b'[[origin]]\nid = "x"\npatterns = ["^(a+)+$"]\n', "exponential"),
])
def test_a_bad_origins_file_is_one_line(tmp_path, capsys, text, says):
    origins = tmp_path / "origins.toml"
    origins.write_bytes(text)
    assert says in _one_line_error(["analyze", str(DETAILS), "--origins", str(origins)], capsys)


def _run(args, cwd, timeout=60):
    return subprocess.run([sys.executable, "-m", "ncu_advisor.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_never_blocks(tmp_path):
    os.mkfifo(tmp_path / "x.csv")
    done = _run(["analyze", "x.csv"], tmp_path)
    assert done.returncode == 2 and "not a regular file" in done.stderr
    rules = tmp_path / "rules"
    rules.mkdir()
    os.mkfifo(rules / "x.toml")
    assert _run(["analyze", str(DETAILS), "--rules", str(rules)], tmp_path).returncode == 0


def test_a_file_name_that_is_not_utf8(tmp_path):
    name = os.fsdecode(b"bad\xffname.csv")
    shutil.copyfile(DETAILS, tmp_path / name)
    done = _run(["analyze", name, "-f", "json", "-o", "out.json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bad\ufffdname.csv" in (tmp_path / "out.json").read_text(encoding="utf-8")


def _rule_text(when: str, title: str = "t") -> str:
    return (f'id = "coalescing.made-here"\ncategory = "coalescing"\ntitle = "{title}"\n'
            'confidence = "low"\nexplanation = "e"\nfix = "f"\nrequires = ["mem_pct"]\n'
            f'when = {when}\n[[severity]]\nlevel = "low"\n')


@pytest.mark.parametrize("depth", [40, 400])
def test_a_condition_nested_too_deep_is_a_rule_problem(tmp_path, capsys, depth):
    cond = '{ q = "mem_pct", ge = 1 }'
    for _ in range(depth):
        cond = "{ all = [" + cond + "] }"
    (tmp_path / "coalescing.made-here.toml").write_text(_rule_text(cond))
    assert "levels deep" in _rule_problem(["rules", "--check", str(tmp_path)], capsys)


def test_a_format_width_bomb_is_refused_before_it_runs(tmp_path, capsys):
    (tmp_path / "coalescing.made-here.toml").write_text(
        _rule_text('{ all = [{ q = "mem_pct", ge = 0 }] }', title="x {mem_pct:>999999999}"))
    assert "more than 64" in _rule_problem(["rules", "--check", str(tmp_path)], capsys)
    assert "more than 64" in _one_line_error(
        ["analyze", str(DETAILS), "--rules", str(tmp_path)], capsys)


def test_a_negative_duration_is_not_a_time(tmp_path, capsys):
    """A details page whose first launch lasts -49 us (edited here): no negative total, no
    negative saving, and a warning naming the launch."""
    text = DETAILS.read_text()
    row = next(ln for ln in text.splitlines() if '"Duration"' in ln)
    value = row.rsplit('","', 2)[-1].rstrip('",')
    edited = text.replace(row, row.replace(f'"{value}"', f'"-{value}"'), 1)
    path = tmp_path / "negative-duration.details.csv"
    path.write_text(edited)
    import json

    assert main(["analyze", str(path), "-f", "json", "-o", str(tmp_path / "out.json")]) == 0
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["summary"]["total_duration_ns"] >= 0
    assert any("negative duration" in w for w in doc["warnings"])
    assert all((f.get("estimated_saving_ns") or 0) >= 0 for f in doc["findings"])


RAW = ROOT / "sample_reports" / "demos" / "coalescing.raw.csv"
LINEINFO = ROOT / "sample_reports" / "demos_lineinfo"
SESSION = ROOT / "sample_reports" / "foreign" / "torch_ops.session.csv"


def _json(argv, tmp_path) -> dict:
    import json

    out = tmp_path / "out.json"
    assert main([*argv, "-f", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("preamble", [b"program says caf\xe9\n",
                                      b'"Kernel Name" is a word this program prints\n'])
def test_a_live_captures_own_output_never_rejects_it(tmp_path, preamble):
    path = tmp_path / "live.csv"
    path.write_bytes(preamble + DETAILS.read_bytes())
    doc = _json(["analyze", str(path)], tmp_path)
    assert len(doc["kernels"]) == 2


@pytest.mark.parametrize("codec", ["gz", "xz"])
@pytest.mark.parametrize("src", [DETAILS, RAW], ids=["details", "raw"])
def test_a_compressed_file_cut_at_99_percent_is_read_in_part(tmp_path, src, codec):
    import gzip
    import lzma

    data = (gzip.compress if codec == "gz" else lzma.compress)(src.read_bytes())
    path = tmp_path / f"cut.{src.name}.{codec}"
    path.write_bytes(data[: int(len(data) * 0.99)])
    doc = _json(["analyze", str(path)], tmp_path)
    assert doc["kernels"] and any("ends early" in w for w in doc["warnings"])


def test_an_xz_export_reads_as_its_plain_copy_and_a_broken_one_is_one_line(tmp_path, capsys):
    import lzma

    # Concatenated streams with stream padding between them, as `xz` may write them.
    data = DETAILS.read_bytes()
    packed = tmp_path / "two.details.csv.xz"
    packed.write_bytes(lzma.compress(data[:3000]) + b"\0" * 8 + lzma.compress(data[3000:]))
    def advice(path):
        doc = _json(["analyze", str(path)], tmp_path)
        return [(f["rule"], f["severity"], f["launch_ids"]) for f in doc["findings"]]
    assert advice(packed) == advice(DETAILS) != []
    capsys.readouterr()
    broken = tmp_path / "broken.details.csv.xz"
    broken.write_bytes(b"not xz at all\n" * 10)
    assert "broken xz file" in _one_line_error(["analyze", str(broken)], capsys)


def test_a_gzip_bomb_and_an_endless_line_stop_early(tmp_path, capsys, monkeypatch):
    import zlib

    from ncu_advisor.readers import common

    # The bounds scaled down 64x (256 MiB -> 4 MiB of output, 64 MiB -> 1 MiB in a line): the
    # same checks, without inflating and parsing hundreds of MB in the quick run.
    monkeypatch.setattr(common, "BOMB_FLOOR", 4 << 20)
    monkeypatch.setattr(common, "MAX_LINE", 1 << 20)
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    with (tmp_path / "bomb.details.csv.gz").open("wb") as fh:
        fh.write(bomb.compress(DETAILS.read_bytes()))
        for _ in range(8):
            fh.write(bomb.compress(b"1,2\n" * (1 << 18)))
        fh.write(bomb.flush())
    assert "bomb" in _one_line_error(["analyze", str(tmp_path / "bomb.details.csv.gz")], capsys)
    endless = tmp_path / "endless.details.csv"
    with endless.open("wb") as fh:
        fh.write(DETAILS.read_bytes().splitlines(keepends=True)[0])
        fh.write(b'"0",' + b"a" * (2 << 20))
    assert "endless line" in _one_line_error(["analyze", str(endless)], capsys)


def test_a_session_field_of_a_megabyte(tmp_path):
    page = tmp_path / "big.session.csv"
    page.write_text(SESSION.read_text().replace("--set full", "--set full " + "A" * 1_000_000))
    doc = _json(["analyze", str(DETAILS), str(page)], tmp_path)
    assert doc["kernels"]
    # Its options are still read (split on white space past 64 KiB: shlex took 19 s here).
    assert doc["session"]["section_set"] == "full" and doc["session"]["clock_control"] == "none"


def test_a_source_line_number_of_20_digits(tmp_path):
    lines = (LINEINFO / "bank-conflicts.source.csv").read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln[:2] in {f'"{d}' for d in "123456789"})
    lines[i] = '"' + "9" * 20 + lines[i][lines[i].index('"', 1):]
    page = tmp_path / "x.source.csv"
    page.write_text("\n".join(lines) + "\n")
    assert _json(["analyze", str(LINEINFO / "bank-conflicts.details.csv"), str(page)],
                 tmp_path)["kernels"]


def test_a_damaged_store_partition_is_one_line(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["ingest", str(RAW), "--store", str(store)]) == 0
    part = next(store.glob("metrics/*/part-0.parquet"))
    part.write_bytes(part.read_bytes()[:100])
    capsys.readouterr()
    assert "cannot be read" in _one_line_error(
        ["query", "--store", str(store), "select count(*) from metrics"], capsys)


def test_a_bad_option_value_is_escaped(capsys):
    assert main(["analyze", str(DETAILS), "-f", "\x1b[31mx\u202e"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and err.count("\n") == 1


def test_a_store_never_lands_on_or_among_its_inputs(tmp_path, capsys):
    folder = tmp_path / "reports"
    folder.mkdir()
    shutil.copyfile(DETAILS, folder / "a.details.csv")
    before = (folder / "a.details.csv").read_bytes()
    for store in (folder, folder / "store", folder / "a.details.csv"):
        _one_line_error(["ingest", str(folder), "--store", str(store)], capsys)
    assert (folder / "a.details.csv").read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["a.details.csv"]


def test_query_output_through_a_link_writes_its_target(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["ingest", str(RAW), "--store", str(store)]) == 0
    target = tmp_path / "target.csv"
    target.write_text("old")
    (tmp_path / "link.csv").symlink_to(target)
    assert main(["query", "--store", str(store), "select 1 as a", "-f", "csv", "-o",
                 str(tmp_path / "link.csv")]) == 0
    assert (tmp_path / "link.csv").is_symlink() and target.read_text() == "a\n1\n"


def test_a_killed_ingests_staging_is_removed_by_the_next(tmp_path):
    from ncu_advisor.store.layout import remove_stale_staging

    store = tmp_path / "store"
    assert main(["ingest", str(RAW), "--store", str(store)]) == 0
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = store / ".staging" / f"ingest-{dead.stdout.strip()}-abc"
    (stale / "launches.report_id=x").mkdir(parents=True)
    live = store / ".staging" / f"ingest-{os.getppid()}-def"
    live.mkdir()
    assert main(["ingest", str(DETAILS), "--store", str(store)]) == 0
    assert not stale.exists() and live.exists()
    assert remove_stale_staging(store) == []


def _fake_child(tmp_path, body: str) -> Path:
    child = tmp_path / "child.py"
    child.write_text(body)
    return child


def test_a_reader_child_killed_from_outside_is_not_a_damaged_file(tmp_path, monkeypatch):
    from ncu_advisor.errors import ReportParseError
    from ncu_advisor.readers import ncu_rep

    monkeypatch.setattr(ncu_rep, "_CHILD", _fake_child(
        tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"))
    with pytest.raises(ReportParseError, match="SIGKILL, from outside") as info:
        list(ncu_rep._records(OCC_REP, None))
    assert "damaged" not in str(info.value)
    monkeypatch.setattr(ncu_rep, "_CHILD", _fake_child(
        tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"))
    with pytest.raises(ReportParseError, match="damaged or truncated"):
        list(ncu_rep._records(OCC_REP, None))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_reader_child_dies_with_its_parent(tmp_path):
    import time

    child = _fake_child(tmp_path, "import os, time\nprint(os.getpid(), flush=True)\n"
                                  "open(os.environ['PIDFILE'], 'w').write(str(os.getpid()))\n"
                                  "time.sleep(60)\n")
    pidfile = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom pathlib import Path\nfrom ncu_advisor.readers import ncu_rep\n"
        f"ncu_rep._CHILD = Path({str(child)!r})\n"
        f"list(ncu_rep._records(Path({str(OCC_REP)!r}), None))\n")],
        env={**os.environ, "PIDFILE": str(pidfile)})
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    parent.kill()
    parent.wait()
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the reader child outlived its parent")


def test_a_half_committed_report_is_not_seen_by_queries(tmp_path):
    """Data partitions renamed in, the reports one not yet (an ingest killed mid-commit)."""
    from ncu_advisor import store as store_api

    store = tmp_path / "store"
    store_api.ingest(store, [RAW])
    count = store_api.query(store, "SELECT count(*) AS n FROM launches").to_pylist()[0]["n"]
    for table in ("launches", "metrics"):
        part = next((store / table).glob("report_id=*"))
        shutil.copytree(part, store / table / "report_id=rhalfwritten")
    got = store_api.query(store, "SELECT count(*) AS n FROM launches").to_pylist()[0]["n"]
    assert got == count
    assert store_api.query(store, "SELECT count(DISTINCT report_id) AS n FROM metrics"
                           ).to_pylist()[0]["n"] == 1


def test_a_killed_writer_leaves_no_temporary_behind_the_next_write(tmp_path):
    """Issue 25: SIGKILL during `export` left .launches.parquet.*.tmp that nothing removed."""
    import os
    import subprocess
    import sys

    from ncu_advisor.cli.output import write_text

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = tmp_path / f".report.json.{dead.stdout.strip()}.abc123.tmp"
    stale.write_text("half")
    live = tmp_path / f".report.json.{os.getppid()}.def456.tmp"  # a writer still running
    live.write_text("half")
    other = tmp_path / f".other.json.{dead.stdout.strip()}.x.tmp"  # another output's
    other.write_text("half")
    write_text(tmp_path / "report.json", "{}")
    assert (tmp_path / "report.json").read_text() == "{}"
    assert not stale.exists() and live.exists() and other.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report.json.")
                and p != live]


def test_a_reader_child_that_hangs_is_stopped_at_its_time_bound(tmp_path, monkeypatch,
                                                                capsys):
    import time

    from ncu_advisor.errors import ReportParseError
    from ncu_advisor.readers import ncu_rep

    pidfile = tmp_path / "pid"
    monkeypatch.setattr(ncu_rep, "_CHILD", _fake_child(
        tmp_path, "import os, time\n"
                  f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"))
    monkeypatch.setenv(ncu_rep.TIMEOUT_ENV, "1.5")
    started = time.monotonic()
    with pytest.raises(ReportParseError, match=r"took longer than 2 s and was stopped"):
        list(ncu_rep._records(OCC_REP, None))
    assert time.monotonic() - started < 30
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pidfile.read_text()), 0)
    # On the command line: one line, exit 2, no output file.
    out = tmp_path / "r.json"
    assert main(["analyze", str(OCC_REP), "-f", "json", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "took longer than" in err[0] and not out.exists()


@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf", "nan"])
def test_a_bad_reader_time_bound_is_one_line(value, monkeypatch, capsys):
    from ncu_advisor.readers import ncu_rep

    monkeypatch.setenv(ncu_rep.TIMEOUT_ENV, value)
    assert main(["analyze", str(OCC_REP)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a positive number of seconds" in err[0]


def test_the_default_reader_time_bound_grows_with_the_report(tmp_path, monkeypatch):
    from ncu_advisor.readers import ncu_rep

    monkeypatch.delenv(ncu_rep.TIMEOUT_ENV, raising=False)
    small, big = tmp_path / "s.ncu-rep", tmp_path / "b.ncu-rep"
    small.write_bytes(b"x")
    with big.open("wb") as fh:
        fh.truncate(512 << 20)  # sparse: 512 MiB on paper
    assert 300 <= ncu_rep.reader_time_bound(small) < ncu_rep.reader_time_bound(big)
    assert ncu_rep.reader_time_bound(big) >= 1000
