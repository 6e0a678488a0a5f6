"""The Report: every reader produces these plain pandas tables; nothing downstream sees forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

# One row per profiled launch (or per kernel name for a per-kernel summary export).
LAUNCH_COLUMNS = [
    "launch", "source", "form", "id", "process_id", "process", "host", "name", "short_name",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "device", "cc", "context",
    "stream", "nvtx", "duration_ns", "invocations",
]
# Long table of metric values, base units.
METRIC_COLUMNS = ["launch", "section", "metric", "label", "unit", "value", "text"]
# Nsight Compute's own guided-analysis results.
RULE_COLUMNS = [
    "launch", "section", "rule", "type", "title", "description", "speedup_type", "speedup",
]


@dataclass
class Report:
    """A profile read from one or more Nsight Compute exports.

    Attributes:
        launches: one row per profiled launch, columns ``LAUNCH_COLUMNS``; ``launch`` is the
            row's key used by the other tables, ``id`` is ncu's own ID within its file.
        metrics: long table, columns ``METRIC_COLUMNS`` (plus ``minimum``/``maximum`` for
            per-kernel summaries); ``metric`` is the ncu metric name (NaN when only a label
            was exported and it could not be resolved), ``value`` is a float in ``unit``
            (base units), ``text`` the value as exported.
        ncu_rules: ncu's own rule results, columns ``RULE_COLUMNS``.
        session: device and tool facts found in the inputs (GPU, SM count, clocks, ...).
        sources: the files read.
        warnings: what was skipped or looked suspicious while reading, one line each.
        source_lines: source-level counters, one row per (launch, CUDA line, SASS
            instruction), columns ``SOURCE_LINE_COLUMNS`` of ``readers/source_page.py`` plus
            one ``stall_*`` column per stall reason; empty unless the input holds them (a
            ``.ncu-rep`` of a ``-lineinfo`` build, or a ``--page source`` export read with
            the details or raw export of the same capture).

    """

    launches: pd.DataFrame
    metrics: pd.DataFrame
    ncu_rules: pd.DataFrame
    session: dict = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source_lines: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["launch", "file", "line", "address", "sass"]))

    @cached_property
    def _wide(self) -> pd.DataFrame:
        return _wide_view(self.metrics, self.launches["launch"])

    def wide(self) -> pd.DataFrame:
        """Return a launch x metric view of ``value`` (base units), indexed by ``launch``."""
        return self._wide

    def set_wide(self, wide: pd.DataFrame) -> None:
        """Give the wide view a reader already holds (a raw page is launch x metric).

        It must be what :meth:`wide` would build from ``metrics``: one row per launch in
        order, the used metric names in category order (``tests/test_readers.py`` checks).
        """
        self.__dict__["_wide"] = wide

    def units(self) -> dict[str, str]:
        """Return the base unit of each metric name."""
        named = self.metrics.dropna(subset=["metric"]).drop_duplicates("metric")
        return dict(zip(named["metric"], named["unit"], strict=True))

    def body_only_launches(self) -> pd.Series:
        """Per launch (index ``launch``): whether its metrics come from section bodies only.

        A details page, ncu's plain-text output and a per-kernel summary print each section's
        body: the raw counters no section shows are absent from them even when the capture
        holds them. A raw page and a ``.ncu-rep`` list every metric outside any section, so a
        launch read from one of those too (details + raw of one capture) is not body-only.
        Where a metric such a launch lacks is: the raw page of the same capture, first.
        """
        # Plain arrays: a .loc over the long table copied it (~150 MB at 1 GB of export).
        sections = self.metrics["section"]
        no_section = (sections.cat.codes.to_numpy() < 0
                      if isinstance(sections.dtype, pd.CategoricalDtype)
                      else sections.isna().to_numpy())
        launch_of = self.metrics["launch"].to_numpy()
        sectionless = np.unique(np.concatenate(
            [np.unique(launch_of[i:i + _WIDE_SLICE][no_section[i:i + _WIDE_SLICE]])
             for i in range(0, len(launch_of), _WIDE_SLICE)] or [launch_of[:0]]))
        launches = self.launches["launch"]
        return pd.Series(~launches.isin(sectionless).to_numpy(), index=launches.to_numpy())

    @property
    def details_only(self) -> bool:
        """Every launch was read from section bodies only (see :meth:`body_only_launches`)."""
        return bool(self.body_only_launches().all())

    def text(self, launch: int, metric: str) -> str | None:
        """Return a metric's exported text (for string metrics such as the GPU name)."""
        rows = np.flatnonzero(((self.metrics["launch"] == launch)
                               & (self.metrics["metric"] == metric)).to_numpy())
        return None if not len(rows) else str(self.texts(rows[:1])[0])

    def metric_rows(self, names, columns=("launch", "metric", "value", "text")) -> pd.DataFrame:
        """The rows of ``metrics`` for some metric names (file order, index by position).

        Read by position, the texts chunk by chunk (see :meth:`texts`): a boolean mask over
        the whole table copied every text.
        """
        rows = np.flatnonzero(self.metrics["metric"].isin(list(names)).to_numpy())
        # Rows taken before converting: a categorical column as a whole array was ~50 MB.
        return pd.DataFrame({c: (self.texts(rows) if c == "text"
                                 else self.metrics[c].iloc[rows].to_numpy()) for c in columns},
                            index=rows)

    def texts(self, rows: np.ndarray) -> list:
        """The exported texts of some rows of ``metrics`` (positions, ascending).

        An Arrow-backed text column is read chunk by chunk: selecting rows through pandas
        joined all its chunks first (~75 MB at 1 GB of raw export, for any number of rows).
        """
        column = self.metrics["text"].array
        if not isinstance(column, pd.arrays.ArrowExtensionArray):
            return column[rows].tolist()
        out, start = [], 0
        for chunk in column.__arrow_array__().chunks:
            end = start + len(chunk)
            lo, hi = np.searchsorted(rows, [start, end])
            if hi > lo:
                out.extend(chunk.take(pa.array(rows[lo:hi] - start)).to_pylist())
            start = end
        return out

    @property
    def total_duration_ns(self) -> float:
        """Sum of GPU time over all launches (invocations counted for summaries).

        A census-weighted profile adds the census time of the shapes it did not deep-profile
        (``session["unprofiled_time_ns"]``), so that shares are of the whole run.
        """
        d = self.launches["duration_ns"] * self.launches["invocations"].fillna(1)
        return float(np.nansum(d)) + float(self.session.get("unprofiled_time_ns") or 0.0)

    def __repr__(self) -> str:
        return (f"Report({len(self.launches)} launches, {len(self.metrics)} metric values, "
                f"{len(self.ncu_rules)} ncu rule results, sources={self.sources!r})")


_WIDE_SLICE = 1 << 20  # long-table rows turned into cells at a time


def _wide_view(metrics: pd.DataFrame, launches: pd.Series) -> pd.DataFrame:
    """Launch x metric values: each value written into its cell of one float array.

    A pivot copied the long table several times (sorting, duplicates, unstacking): at 1 GB
    of raw export that was several hundred MB beside a table of ~200 MB. Columns come in
    the order a pivot gave (category order for a categorical, else sorted); the same metric
    in several sections (or forms) of one launch: the first row wins.
    """
    names = metrics["metric"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.codes.to_numpy()
        categories = names.cat.categories
        used = np.zeros(len(categories), dtype=bool)
        used[codes[codes >= 0]] = True
        columns = categories[used].astype(object)
        column_of = np.cumsum(used) - 1  # category code -> column, for used categories
    else:
        codes, columns = pd.factorize(names, sort=True)
        column_of = np.arange(len(columns))
    index = pd.Index(launches, name="launch")
    positions = None
    if not (len(index) and index.equals(pd.RangeIndex(len(index)))):
        positions = index  # launch numbers that are not 0..n-1 (a view's)
    launch_of = metrics["launch"].to_numpy()
    values = metrics["value"].to_numpy()
    table = np.full((len(index), len(columns)), np.nan)
    flat = table.reshape(-1)
    filled = np.zeros(flat.size, dtype=bool)  # where a cell was written: the first row wins
    # In slices: whole-table temporaries (row, column, cell, mask) were ~4 arrays of 8 bytes
    # a value, several hundred MB at 1 GB of export.
    for start in range(0, len(metrics), _WIDE_SLICE):
        part = slice(start, start + _WIDE_SLICE)
        row_of = launch_of[part] if positions is None else positions.get_indexer(launch_of[part])
        code = codes[part]
        keep = (code >= 0) & (row_of >= 0) & (row_of < len(index))
        cell = row_of[keep].astype(np.int64) * len(columns)
        cell += column_of[code[keep]]
        value = np.asarray(values[part][keep], dtype="float64")
        if not (cell[1:] > cell[:-1]).all():  # repeats, or rows out of order
            cell, first = np.unique(cell, return_index=True)
            value = value[first]
        new = ~filled[cell]
        flat[cell[new]] = value[new]
        filled[cell[new]] = True
    return pd.DataFrame(table, index=index,
                        columns=pd.Index(list(columns), dtype=object, name="metric"))


def subset(report: Report, launches: list[int]) -> Report:
    """Return a Report restricted to some launches (renumbered 0..n-1, order kept)."""
    keep = [int(x) for x in launches]
    order = {old: new for new, old in enumerate(keep)}
    lmask = report.launches["launch"].isin(keep)
    mmask = report.metrics["launch"].isin(keep)
    rmask = report.ncu_rules["launch"].isin(keep)
    smask = report.source_lines["launch"].isin(keep)
    return Report(
        launches=report.launches[lmask].assign(
            launch=report.launches.loc[lmask, "launch"].map(order)).reset_index(drop=True),
        metrics=report.metrics[mmask].assign(
            launch=report.metrics.loc[mmask, "launch"].map(order)).reset_index(drop=True),
        ncu_rules=report.ncu_rules[rmask].assign(
            launch=report.ncu_rules.loc[rmask, "launch"].map(order)).reset_index(drop=True),
        session=dict(report.session), sources=list(report.sources),
        warnings=list(report.warnings),
        source_lines=report.source_lines[smask].assign(
            launch=report.source_lines.loc[smask, "launch"].map(order)).reset_index(drop=True),
    )
