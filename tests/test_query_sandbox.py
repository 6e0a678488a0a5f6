"""`query` reads the store and nothing else: no file outside it is read or written, no
extension is installed, nothing is written inside it either, unless --allow-write."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncu_advisor import store as store_api
from ncu_advisor.cli import main
from ncu_advisor.errors import StoreError

RAW = Path(__file__).resolve().parent.parent / "sample_reports" / "demos" / "coalescing.raw.csv"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("sandbox") / "store"
    store_api.ingest(root, [RAW])
    return root


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO '{outside}/evil.csv'",
    "COPY (SELECT 1) TO '{store}/evil.csv'",
    "EXPORT DATABASE '{outside}/dump'",
    "ATTACH '{outside}/x.db' AS x",
    "CREATE TABLE t AS SELECT 1",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/proc/self/environ')",
    "SELECT * FROM glob('/root/*')",
    "INSTALL httpfs",
    "SELECT * FROM read_csv('https://example.invalid/x.csv')",
    "SET enable_external_access = true",
])
def test_a_query_cannot_reach_outside_the_store(store, tmp_path, sql):
    statement = sql.format(outside=tmp_path, store=store)
    with pytest.raises(StoreError):
        store_api.query(store, statement)
    assert not list(tmp_path.iterdir()) and not (store / "evil.csv").exists()


def test_reading_the_store_still_works(store):
    assert store_api.query(store, "SELECT count(*) AS n FROM launches").to_pylist()[0]["n"] > 0
    assert store_api.run_named(store, "top-kernels", {}).num_rows > 0


def test_allow_write_lifts_it(store, tmp_path, capsys):
    target = tmp_path / "out.csv"
    sql = f"COPY (SELECT 1 AS a) TO '{target}'"
    assert main(["query", "--store", str(store), sql]) == 2
    assert "read-only" in capsys.readouterr().err and not target.exists()
    assert main(["query", "--store", str(store), "--allow-write", sql]) == 0
    assert target.read_text().strip().splitlines() == ["a", "1"]
