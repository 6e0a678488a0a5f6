"""Many runs: one hive-partitioned Parquet dataset, queried with DuckDB.

The layout (``docs/store.md``)::

    STORE/
      ncu-advise-store.json           format marker and schema_version
      reports/report_id=r.../part-0.parquet      one row per report: source, hashes, GPU, labels
      launches/report_id=r.../part-0.parquet     Report.launches
      metrics/report_id=r.../part-0.parquet      Report.metrics (long: one row per metric value)
      ncu_rules/report_id=r.../part-0.parquet    Report.ncu_rules
      quantities/report_id=r.../part-0.parquet   key derived quantities and bound, per launch
      findings/report_id=r.../part-0.parquet     the analysis' findings

``report_id`` lives in the folder name only (as Spark, pyarrow and Dask write hive partitions)
and joins every table; within a report, ``launch`` joins launches, metrics, ncu_rules,
quantities and findings. A report's ``reports`` partition is written last: a report exists
when its ``reports`` partition does. Writes are atomic per ingest (``layout``); the modules:
``layout`` (folder, lock, commit), ``tables`` (a report as typed tables), ``ingest``,
``query`` (SQL, named queries, trends) and ``load`` (a stored report back).
"""

from .ingest import IngestedReport, IngestResult, add_report, file_hash, ingest, parse_labels
from .layout import (
                     DATA_TABLES,
                     GROUP_MODES,
                     INDEX,
                     JOURNAL,
                     MARKER,
                     PART,
                     TABLES,
                     create_store,
                     open_store,
                     report_ids,
)
from .load import load_report
from .query import TREND_QUANTITIES, NamedQuery, connect, named_queries, query, run_named, trend
from .tables import SCHEMAS, STORE_SCHEMA_VERSION, report_id_for, report_tables

__all__ = ["DATA_TABLES", "GROUP_MODES", "INDEX", "JOURNAL", "MARKER", "PART", "SCHEMAS",
           "STORE_SCHEMA_VERSION", "TABLES", "TREND_QUANTITIES", "IngestResult",
           "IngestedReport", "NamedQuery", "add_report", "connect", "create_store", "file_hash",
           "ingest", "load_report", "named_queries", "open_store", "parse_labels", "query",
           "report_id_for", "report_ids", "report_tables", "run_named", "trend"]
