"""A reader of the store's partitions never counts a half-written report (issue 25).

An ingest is killed (``os._exit``: no clean-up, as SIGKILL) after each step of its commit
(each rename of a partition into place, and the row that marks the report complete). Then
DuckDB and pyarrow read the Parquet partitions directly, as an outside engine does, keeping
the reports whose row says ``complete`` (and the data rows of those): they count the report
ingested before and nothing of the killed one, as ``query`` does; the next ingest removes
what the kill left.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from ncu_advisor import store

DEMOS = Path(__file__).resolve().parent.parent / "sample_reports" / "demos"
FIRST, KILLED = DEMOS / "divergence.details.csv", DEMOS / "fusion.details.csv"

# Kill the ingest at its n-th rename or replace (1..7: the reports partition, five data
# partitions, the complete row), with no clean-up.
_CHILD = textwrap.dedent("""
    import os, sys
    from ncu_advisor import store
    from ncu_advisor.store import layout
    n, calls = int(sys.argv[3]), [0]
    def step(real):
        def wrapped(*args):
            calls[0] += 1
            if calls[0] == n:
                os._exit(137)
            return real(*args)
        return wrapped
    class _Os:
        def __getattr__(self, name):
            return getattr(os, name)
    fake = _Os()
    fake.rename, fake.replace = step(os.rename), step(os.replace)
    layout.os = fake
    store.ingest(sys.argv[1], [sys.argv[2]])
""")


def _outside_counts(root: Path) -> tuple[int, int]:
    """(complete reports, launches of complete reports), read as DuckDB and pyarrow would."""
    import duckdb

    glob = lambda t: str(root / t / "report_id=*" / "*.parquet")  # noqa: E731
    reports = (f"read_parquet('{glob('reports')}', hive_partitioning = true, "
               "union_by_name = true)")
    launches = f"read_parquet('{glob('launches')}', hive_partitioning = true)"
    con = duckdb.connect()
    n_reports, n_launches = con.sql(
        f"SELECT (SELECT count(*) FROM {reports} WHERE complete), (SELECT count(*) FROM "
        f"{launches} l WHERE l.report_id IN (SELECT report_id FROM {reports} WHERE complete))"
    ).fetchall()[0]
    # pyarrow's datasets (Dask reads through them): the same filter.
    done = ds.dataset(root / "reports", partitioning="hive").to_table(
        filter=ds.field("complete"), columns=["report_id"]).column("report_id").to_pylist()
    rows = ds.dataset(root / "launches", partitioning="hive").to_table(
        columns=["report_id"]).column("report_id").to_pylist()
    assert (len(done), sum(r in done for r in rows)) == (n_reports, n_launches)
    return n_reports, n_launches


# The quick run kills the commit at its first, middle and last step; CI's slow phase at each.
@pytest.mark.parametrize("step", [s if s in (1, 4, 7) else pytest.param(s, marks=pytest.mark.slow)
                                  for s in range(1, 8)])
def test_a_commit_killed_at_any_step_is_never_counted(tmp_path, step):
    root = tmp_path / "s"
    store.ingest(root, [FIRST])
    before = _outside_counts(root)
    assert before[0] == 1 and before[1] > 0
    child = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(KILLED), str(step)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 137, child.stderr
    assert (root / store.JOURNAL).exists()  # killed mid-commit
    assert _outside_counts(root) == before
    assert store.query(root, "SELECT count(*) AS n FROM reports").column("n")[0].as_py() == 1
    assert store.query(root, "SELECT count(*) AS n FROM launches").column(
        "n")[0].as_py() == before[1]
    assert len(store.report_ids(root)) == 1
    # The next ingest repairs the store, and the killed report can be added again.
    assert len(store.ingest(root, [KILLED]).added) == 1
    assert not (root / store.JOURNAL).exists()
    assert _outside_counts(root)[0] == 2 and len(store.report_ids(root)) == 2
    for table in store.TABLES:
        assert len(list((root / table).iterdir())) == 2, table


def test_a_complete_commit_marks_its_report_complete(tmp_path):
    root = tmp_path / "s"
    store.ingest(root, [FIRST])
    assert _outside_counts(root)[0] == 1
    assert not list((root / ".staging").glob("*/*"))  # the complete row was moved in
