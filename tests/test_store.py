"""The report store: ingest real captures, query them with SQL and Dask, trend, load back."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import ncu_advisor
from ncu_advisor import store
from ncu_advisor.cli import main
from ncu_advisor.errors import ReportParseError, StoreError

ROOT = Path(__file__).resolve().parent.parent
DEMOS = ROOT / "sample_reports" / "demos"
FORMS = ROOT / "sample_reports" / "forms"
# Four real captures of different demo programs, one per "build" (details pages: fast to read).
BUILDS = {1: "coalescing", 2: "divergence", 9: "fusion", 10: "tiling"}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and ".staging" not in p.parts and p.name != ".lock")


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> Path:
    """A store with one real capture per build label, ingested in an order other than 1..10."""
    root = tmp_path_factory.mktemp("labelled") / "store"
    for build in (10, 1, 9, 2):
        result = store.ingest(root, [DEMOS / f"{BUILDS[build]}.details.csv"],
                              labels={"build": str(build), "branch": "main"})
        assert len(result.added) == 1
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A folder of real exports: one capture as a raw + details pair, two details-only ones."""
    src = tmp_path_factory.mktemp("captures")
    for name in ("coalescing.raw.csv", "coalescing.details.csv", "divergence.details.csv",
                 "fusion.details.csv"):
        shutil.copy(DEMOS / name, src / name)
    (src / "notes.csv").write_text("not,an,ncu,export\n1,2,3,4\n")  # skipped with a warning
    return src


@pytest.fixture(scope="module")
def folder_store(tmp_path_factory, folder) -> tuple[Path, store.IngestResult,
                                                     store.IngestResult]:
    root = tmp_path_factory.mktemp("folder") / "store"
    first = store.ingest(root, [folder], labels={"commit": "abc123"})
    second = store.ingest(root, [folder], labels={"commit": "abc123"})
    return root, first, second


def test_folder_ingested_twice_gives_each_launch_once(folder_store, folder):
    root, first, second = folder_store
    assert [r.source.split("/")[-1] for r in first.added] == [
        "coalescing.raw.csv", "divergence.details.csv", "fusion.details.csv"]
    # The raw and details exports of one capture are one report, as analyze reads them.
    assert first.added[0].source.count(".csv") == 2
    assert any("notes.csv" in w for w in first.warnings)
    assert second.added == [] and len(second.already) == 4
    expected = sum(len(ncu_advisor.read_report(p).launches) for p in (
        [folder / "coalescing.raw.csv", folder / "coalescing.details.csv"],
        folder / "divergence.details.csv", folder / "fusion.details.csv"))
    rows = store.query(root, "SELECT report_id, launch, name FROM launches").to_pandas()
    assert len(rows) == expected == 2 + 2 + 4
    assert not rows.duplicated(["report_id", "launch"]).any()
    assert store.query(root, "SELECT count(*) AS n FROM reports").column("n")[0].as_py() == 3


def test_group_file_makes_one_report_per_file(tmp_path, folder):
    # Two exports of one capture (forms_app.ncu-rep): one report by default, two with "file".
    pair = [FORMS / "forms_app.import.details.csv", FORMS / "forms_app.import.details.name.csv"]
    assert len(store.ingest(tmp_path / "c", pair).added) == 1
    assert len(store.ingest(tmp_path / "s", pair, group="file").added) == 2
    with pytest.raises(StoreError, match="--group"):
        store.ingest(tmp_path / "s", [folder], group="run")


def test_reports_table_holds_source_hash_gpu_and_labels(folder_store, folder):
    root, first, _ = folder_store
    rows = store.query(root, "SELECT * FROM reports ORDER BY source").to_pylist()
    pair = rows[0]
    assert pair["source"] == f"{folder / 'coalescing.details.csv'}, {folder / 'coalescing.raw.csv'}"
    assert pair["gpu"] == "NVIDIA H200" and pair["cc"] == "9.0"
    assert pair["labels"] == [("commit", "abc123")]
    assert pair["schema_version"] == store.STORE_SCHEMA_VERSION
    assert len(pair["content_hash"]) == 64 and len(pair["file_hashes"]) == 2
    assert pair["report_id"] == store.report_id_for(pair["content_hash"])
    assert pair["captured_at"] is None  # CSV exports do not record it
    marker = json.loads((root / store.MARKER).read_text())
    assert marker["schema_version"] == store.STORE_SCHEMA_VERSION


def test_sql_totals_match_the_reports(labelled):
    report = ncu_advisor.read_report(DEMOS / "tiling.details.csv")
    total = store.query(labelled, "SELECT sum(l.duration_ns * l.invocations) AS t FROM launches "
                                  "l JOIN report_labels USING (report_id) WHERE key = 'build' "
                                  "AND value = '10'").column("t")[0].as_py()
    assert total == pytest.approx(report.total_duration_ns)
    findings = store.query(labelled, "SELECT count(*) AS n FROM findings JOIN reports "
                                     "USING (report_id) WHERE labels['build'] = '10'")
    assert findings.column("n")[0].as_py() == len(ncu_advisor.analyze(report).findings) > 0


def test_named_query_kernel_time_orders_by_label_numerically(labelled):
    rows = store.run_named(labelled, "kernel-time", {"kernel": ".", "label": "build"}).to_pylist()
    assert [r["label_value"] for r in rows] == ["1", "2", "9", "10"]  # not "1", "10", "2", "9"
    tiling = store.run_named(labelled, "kernel-time", {"kernel": "tiling_naive"}).to_pylist()
    assert len(tiling) == 1 and tiling[0]["launches"] == 1


def test_named_query_top_kernels_and_new_findings(labelled):
    top = store.run_named(labelled, "top-kernels", {"limit": 2}).to_pylist()
    everything = store.query(labelled, "SELECT short_name, duration_ns FROM launches").to_pandas()
    assert top[0]["kernel"] == everything.sort_values("duration_ns").iloc[-1]["short_name"]
    assert len(top) == 2
    # Ingested first: build 10 (tiling). Everything the later builds found is new since.
    first = store.query(labelled, "SELECT report_id FROM reports ORDER BY ingested_at LIMIT 1")
    since = first.column("report_id")[0].as_py()
    new = store.run_named(labelled, "new-findings", {"since": since}).to_pandas()
    assert len(new) > 0 and not new["kernel"].str.startswith("tiling").any()
    assert set(new["first_report"]) <= set(store.report_ids(labelled)) - {since}
    with pytest.raises(StoreError, match="needs --param since"):
        store.run_named(labelled, "new-findings")
    with pytest.raises(StoreError, match="no named query"):
        store.run_named(labelled, "nope")


def test_trend_of_the_run_and_of_one_kernel(labelled):
    run = store.trend(labelled, label="build")
    assert list(run["label_value"]) == ["1", "2", "9", "10"]
    for build, row in zip(BUILDS, run.itertuples(), strict=True):
        report = ncu_advisor.read_report(DEMOS / f"{BUILDS[build]}.details.csv")
        assert row.total_ns == pytest.approx(report.total_duration_ns)
        assert row.launches == len(report.launches)
    assert run["change_pct"].iloc[1] == pytest.approx(
        100 * (run["total_ns"].iloc[1] / run["total_ns"].iloc[0] - 1))
    one = store.trend(labelled, kernel="coalescing_strided")
    assert len(one) == 1 and one["kernels"].iloc[0] == 1
    assert 0 < one["dram_pct"].iloc[0] <= 100
    with pytest.raises(StoreError, match="regular expression"):
        store.trend(labelled, kernel="(")


def test_load_report_rebuilds_what_analyze_needs(folder_store, folder):
    root, _, _ = folder_store
    stored = store.load_report(root, report_id=store.report_ids(root)[0])
    pair = [Path(s) for s in stored.sources]
    original = ncu_advisor.read_report(pair)
    a = ncu_advisor.analyze(stored).to_dict()
    b = ncu_advisor.analyze(original).to_dict()
    for key in ("findings", "kernels", "summary", "session"):
        assert a[key] == b[key], key


def test_load_report_by_label_takes_the_latest(labelled):
    report = store.load_report(labelled, "branch=main")  # all four match: the last ingested
    assert report.sources == [str(DEMOS / "divergence.details.csv")]
    assert store.load_report(labelled, {"build": "9"}).sources == [
        str(DEMOS / "fusion.details.csv")]
    assert store.load_report(labelled, ["branch=main", "build=1"]).sources == [
        str(DEMOS / "coalescing.details.csv")]
    with pytest.raises(StoreError, match="no report"):
        store.load_report(labelled, {"build": "3"})


def test_failed_ingest_leaves_the_store_as_it_was(tmp_path, folder):
    root = tmp_path / "s"
    store.ingest(root, [folder / "divergence.details.csv"])
    before = _files(root)
    broken = tmp_path / "generated_truncated.csv"
    broken.write_bytes((DEMOS / "tiling.details.csv").read_bytes()[:0])
    with pytest.raises(ReportParseError):
        store.ingest(root, [folder / "fusion.details.csv", broken])
    assert _files(root) == before
    assert not any((root / ".staging").iterdir())


def test_an_interrupted_commit_is_repaired_by_the_next_ingest(tmp_path, folder):
    root = tmp_path / "s"
    store.ingest(root, [folder / "divergence.details.csv"])
    # What a kill between renames leaves: the journal, and data partitions of a listed
    # report without its reports partition.
    orphan = root / "launches" / "report_id=r0000000000000000"
    shutil.copytree(next((root / "launches").iterdir()), orphan)
    (root / store.JOURNAL).write_text("r0000000000000000\n")
    # Queries never see the half-committed report, even before the repair (issue 25).
    assert store.query(root, "SELECT count(DISTINCT report_id) AS n FROM launches").column(
        "n")[0].as_py() == 1
    store.ingest(root, [folder / "fusion.details.csv"])
    assert not orphan.exists() and not (root / store.JOURNAL).exists()
    assert len(store.report_ids(root)) == 2


def _ingest_in_child(root: str, paths: list[str], label: str) -> int:
    return len(store.ingest(root, paths, labels={"who": label}).added)


@pytest.mark.slow
def test_two_ingests_at_once_do_not_corrupt_the_store(tmp_path, folder):
    root = tmp_path / "s"
    a = [str(folder / "divergence.details.csv"), str(folder / "fusion.details.csv")]
    b = [str(folder / "fusion.details.csv"), str(DEMOS / "tiling.details.csv")]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        added = pool.starmap(_ingest_in_child, [(str(root), a, "a"), (str(root), b, "b")])
    assert sum(added) == 3  # fusion was added by exactly one of them
    ids = store.report_ids(root)
    assert len(ids) == 3
    for table in store.TABLES:
        parts = sorted(p.name for p in (root / table).iterdir())
        assert parts == [f"report_id={i}" for i in ids], table
    n = store.query(root, "SELECT count(*) AS n FROM launches").column("n")[0].as_py()
    assert n == 2 + 4 + 2


def test_dask_reads_the_same_answer_as_query(labelled):
    dd = pytest.importorskip("dask.dataframe", reason="dask not installed: pip install "
                             "'ncu-advise[store-dask]' to test the store with a second engine")
    launches = dd.read_parquet(str(labelled / "launches"))
    # As docs/store.md reads it: the launches of complete reports only.
    reports = dd.read_parquet(str(labelled / "reports"), columns=["report_id", "complete"]
                              ).compute()
    done = reports.report_id[reports.complete.fillna(True).astype(bool)]
    launches = launches[launches.report_id.isin(list(done))]
    by_dask = (launches.assign(t=launches.duration_ns * launches.invocations)
               .groupby("short_name").t.sum().compute().sort_index())
    by_sql = store.query(labelled, "SELECT short_name, sum(duration_ns * invocations) AS t "
                                   "FROM launches GROUP BY 1 ORDER BY 1").to_pandas()
    assert list(by_dask.index) == list(by_sql["short_name"])
    assert by_dask.to_numpy() == pytest.approx(by_sql["t"].to_numpy())
    reports = dd.read_parquet(str(labelled / "reports"), columns=["source"]).compute()
    assert len(reports) == 4
    metrics = dd.read_parquet(str(labelled / "metrics"), columns=["report_id", "value"])
    counts = metrics.groupby("report_id", observed=True).value.count().compute()
    by_sql = store.query(labelled, "SELECT report_id, count(value) AS n FROM metrics "
                                   "GROUP BY 1").to_pandas().set_index("report_id")["n"]
    assert counts.astype(int).sort_index().to_dict() == by_sql.sort_index().to_dict()


def test_stored_files_carry_one_schema_per_table(labelled):
    for table in store.TABLES:
        schemas = {pq.read_schema(p).remove_metadata()
                   for p in (labelled / table).glob("report_id=*/*.parquet")}
        assert len(schemas) == 1, table
        assert schemas.pop().names == store.SCHEMAS[table].names, table


def test_not_a_store_and_newer_schema_are_one_line_errors(tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    with pytest.raises(StoreError, match="not empty and not an ncu-advise store"):
        store.ingest(tmp_path / "other", [DEMOS / "tiling.details.csv"])
    with pytest.raises(StoreError, match="no such store"):
        store.query(tmp_path / "missing", "SELECT 1")
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / store.MARKER).write_text(json.dumps(
        {"format": "ncu-advise report store", "schema_version": 99}))
    with pytest.raises(StoreError, match="newer"):
        store.query(newer, "SELECT 1")


def test_an_empty_store_answers_queries(tmp_path):
    store.create_store(tmp_path / "s")
    assert store.query(tmp_path / "s", "SELECT count(*) AS n FROM findings").column(
        "n")[0].as_py() == 0
    assert store.trend(tmp_path / "s").empty


# --- the command line ------------------------------------------------------------------------


def run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_ingest_query_and_trend(tmp_path, capsys):
    root = tmp_path / "s"
    for build in (10, 2):  # ordered numerically: 2 before 10
        name = BUILDS[build]
        code, out, err = run(["ingest", str(DEMOS / f"{name}.details.csv"), "--store", str(root),
                              "--label", f"build={build}"], capsys)
        assert code == 0 and out.startswith("added r"), err
    code, out, _ = run(["ingest", str(DEMOS / "tiling.details.csv"), "--store", str(root)],
                       capsys)
    assert code == 0 and out.startswith("already in store as r")
    code, out, _ = run(["query", "--store", str(root), "-f", "json",
                        "SELECT report_id, labels, ingested_at FROM reports ORDER BY 1"], capsys)
    rows = json.loads(out)
    assert code == 0 and len(rows) == 2 and isinstance(rows[0], dict)
    assert {r["labels"]["build"] for r in rows} == {"2", "10"}
    code, out, _ = run(["query", "--store", str(root), "--kernel-time", ".", "--order-by",
                        "build", "-f", "csv"], capsys)
    frame = pd.read_csv(pd.io.common.StringIO(out))
    assert code == 0 and list(frame["label_value"]) == [2, 10]
    code, out, _ = run(["query", "--store", str(root), "--top-kernels", "-p", "limit=1"], capsys)
    assert code == 0 and "tiling_naive_matmul" in out and "(1 rows)" in out
    code, out, _ = run(["trend", "--store", str(root), "--order-by", "build"], capsys)
    assert code == 0 and out.splitlines()[1].split()[:2] == ["report", "build"]
    assert [ln.split()[1] for ln in out.splitlines()[2:]] == ["2", "10"]
    html = tmp_path / "trend.html"
    code, _, err = run(["trend", "--store", str(root), "-k", "<script>|tiling", "-f", "html",
                        "-o", str(html)], capsys)
    page = html.read_text()
    assert code == 0 and "<svg" in page and "<script" not in page
    assert "&lt;script&gt;|tiling" in page
    assert "src=" not in page and "href=\"http" not in page


@pytest.mark.parametrize("args, message", [
    (["ingest", str(DEMOS / "tiling.details.csv"), "--label", "oops"], "not KEY=VALUE"),
    (["query", "SELECT nope"], "query failed: Binder Error"),
    (["query", "--top-kernels", "SELECT 1"], "give one of"),
    (["query", "--new-findings-since", "rdeadbeef"], "no report 'rdeadbeef'"),
    (["trend", "-k", "("], "not a regular expression"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, labelled, args, message):
    where = str(tmp_path / "s") if args[0] == "ingest" else str(labelled)
    code, out, err = run([*args, "--store", where], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


# Sample values for the parameters a named query requires (those without a default).
REQUIRED = {"kernel": "tiling", "since": None}


@pytest.mark.parametrize("name", sorted(store.named_queries()))
def test_every_shipped_query_is_documented_and_runs(labelled, name):
    q = store.named_queries()[name]
    assert q.description and all(q.param_docs[p] for p in q.params)
    params = {p: REQUIRED[p] or store.report_ids(labelled)[0]
              for p, default in q.params.items() if default is None}
    table = store.run_named(labelled, name, params)
    assert table.num_columns >= 3
    if name in ("reports", "trend", "top-kernels"):
        assert table.num_rows > 0


def test_cli_lists_the_named_queries(capsys, labelled):
    code, out, _ = run(["query", "--store", str(labelled), "--list-queries"], capsys)
    assert code == 0
    assert {ln.split(":")[0] for ln in out.splitlines() if not ln.startswith(" ")} == set(
        store.named_queries())


def test_a_store_written_by_two_schemas_is_read_by_name(tmp_path, folder):
    root = tmp_path / "s"
    store.ingest(root, [folder / "divergence.details.csv"])
    marker = json.loads((root / store.MARKER).read_text())
    assert "mixed_columns" not in marker  # one schema: DuckDB reads the first file's only
    # A store begun by a version that wrote fewer launch columns (one more appeared since).
    marker["columns"]["launches"] = marker["columns"]["launches"][:-1]
    (root / store.MARKER).write_text(json.dumps(marker))
    store.ingest(root, [folder / "fusion.details.csv"])
    assert json.loads((root / store.MARKER).read_text())["mixed_columns"] is True
    assert store.query(root, "SELECT count(invocations) AS n FROM launches").column(
        "n")[0].as_py() == 2 + 4


def test_diff_takes_its_baseline_from_the_store(tmp_path, capsys):
    """`diff --baseline-store DIR --baseline-label K=V AFTER`: the stored run is BEFORE."""
    from ncu_advisor.cli.app import main as cli_main

    foreign = Path(__file__).resolve().parent.parent / "sample_reports" / "foreign"
    store = tmp_path / "store"
    assert cli_main(["ingest", str(foreign / "torch_tf32_off.raw.csv.gz"), "--store", str(store),
                     "--label", "commit=base"]) == 0
    capsys.readouterr()
    code = cli_main(["diff", "--baseline-store", str(store), "--baseline-label", "commit=base",
                     str(foreign / "torch_tf32_on.raw.csv.gz"), "-f", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["speedup"] > 5  # TF32 on: 6.84 ms -> 1.07 ms
    assert cli_main(["diff", "--baseline-store", str(store), "a", "b"]) == 2


def test_the_trend_chart_says_what_its_x_axis_is(labelled):
    from ncu_advisor.render.trend import X_LABEL_BY_TIME, X_LABEL_BY_VALUE, trend_svg

    by_build = trend_svg(store.trend(labelled, label="build"), "builds")
    assert X_LABEL_BY_VALUE.replace("'", "&#x27;") in by_build or X_LABEL_BY_VALUE in by_build
    by_time = trend_svg(store.trend(labelled), "all")
    assert "by when it was captured" in by_time
    assert X_LABEL_BY_TIME.split(",")[0] in by_time
