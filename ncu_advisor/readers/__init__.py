"""Readers: any Nsight Compute export in, one :class:`~ncu_advisor.report.Report` out."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, Report
from .common import base_suffix
from .csv_export import read_csv_export
from .ncu_rep import read_ncu_rep

REPORT_SUFFIXES = (".csv", ".ncu-rep", ".txt")
# Facts about the device and the session, taken from the first launch that has them.
_SESSION_METRICS = {
    "gpu": "device__attribute_display_name",
    "sm_count": "device__attribute_multiprocessor_count",
    "sm_clock_hz": "smsp__cycles_elapsed.avg.per_second",
    "dram_clock_hz": "dram__cycles_elapsed.avg.per_second",
    "l2_bytes": "device__attribute_l2_cache_size",
    "memory_bus_width_bits": "device__attribute_global_memory_bus_width",
}


def _walk(folder: Path, problems: list[str] | None) -> list[Path]:
    """Every file under a folder; folders that cannot be listed are named in ``problems``."""
    def unreadable(exc: OSError) -> None:
        if problems is not None:
            problems.append(f"skipped {exc.filename}: cannot list folder "
                            f"({exc.strerror or exc})")

    found = []
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        dirs.sort()
        found.extend(Path(root, n) for n in names)
    return found


def _expand(paths: Iterable[str | os.PathLike],
            problems: list[str] | None = None) -> list[tuple[Path, bool]]:
    """List the files to read; the flag says whether the file was found in a directory."""
    files: list[tuple[Path, bool]] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in _walk(path, problems) if f.is_file()
                           and base_suffix(f) in (".csv", ".ncu-rep"))
            if not found:
                raise ReportParseError(f"{path}: directory holds no .csv or .ncu-rep reports")
            files.extend((f, True) for f in found)
        elif path.exists():
            files.append((path, False))
        else:
            raise ReportParseError(f"{path}: no such file or directory")
    if not files:
        raise ReportParseError("no input given")
    return files


# Readers that can keep only some metrics (``metrics=`` names), for lean reading.
_LEAN_READERS = (read_ncu_rep, read_csv_export)


def read_one(path: Path, metrics: Iterable[str] | None = None) -> Report:
    """Read one file: ``.ncu-rep`` through ncu_report, anything else as a CSV export.

    Each reader checks its own content (empty file, report header, CSV header). ``metrics``
    asks readers that can to keep only those metric names (launch facts are always read).
    """
    if not path.is_file():
        raise ReportParseError(f"{path}: not a regular file")
    reader = read_ncu_rep if path.suffix.lower() == ".ncu-rep" else read_csv_export
    lean = {"metrics": metrics} if metrics is not None and reader in _LEAN_READERS else {}
    try:
        return reader(path, **lean)
    except OSError as exc:  # permissions, I/O errors: a user's problem, one line
        raise ReportParseError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _session(report: Report) -> dict:
    wide = report.wide()
    facts = dict(report.session)
    for key, metric in _SESSION_METRICS.items():
        if key == "gpu":
            names = report.metrics.loc[report.metrics["metric"] == metric, "text"]
            if len(names):
                facts[key] = str(names.iloc[0])
        elif metric in wide.columns and wide[metric].notna().any():
            facts[key] = float(wide[metric].dropna().iloc[0])
    ccs = report.launches["cc"].dropna().astype(str).unique().tolist()
    if ccs:
        facts["cc"] = ccs[0] if len(ccs) == 1 else ccs
    return facts


_SAME_LAUNCH = ["process_id", "id", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z"]


def _merge_same_launches(report: Report) -> Report:
    """Treat one launch exported in several files (details + raw of one capture) as one.

    Two rows are the same launch when process ID, ncu ID, kernel name and shape agree: the
    process ID changes with every run, so separate runs never merge. Metrics of all copies
    are kept (the first copy's value wins in ``wide()``).
    """
    launches = report.launches
    keyed = launches.dropna(subset=["process_id", "id"])
    if keyed.empty or not keyed.duplicated(_SAME_LAUNCH).any():
        return report
    first = keyed.groupby(_SAME_LAUNCH, dropna=False, sort=False)["launch"].transform("min")
    remap = dict(zip(keyed["launch"], first, strict=True))
    keep = launches[~launches["launch"].isin([k for k, v in remap.items() if k != v])]
    # Fill what the first copy lacked (a raw export has no NVTX; a details one may).
    for col in ("duration_ns", "nvtx"):
        donors = launches.assign(target=launches["launch"].map(remap)).dropna(subset=[col])
        fill = donors.drop_duplicates("target").set_index("target")[col]
        keep = keep.assign(**{col: keep[col].fillna(keep["launch"].map(fill))})
    metrics = report.metrics.assign(launch=report.metrics["launch"].replace(remap))
    rules = report.ncu_rules.assign(launch=report.ncu_rules["launch"].replace(remap))
    rules = rules.drop_duplicates(subset=["launch", "rule", "type", "description"])
    # Renumber so launch numbers stay 0..n-1.
    order = {old: new for new, old in enumerate(keep["launch"])}
    return Report(
        launches=keep.assign(launch=keep["launch"].map(order)).reset_index(drop=True),
        metrics=metrics.assign(launch=metrics["launch"].map(order)).reset_index(drop=True),
        ncu_rules=rules.assign(launch=rules["launch"].map(order)).reset_index(drop=True),
        session=report.session, sources=report.sources, warnings=report.warnings,
    )


def read_report(paths: str | os.PathLike | Iterable[str | os.PathLike],
                progress: Callable[[int, int, Path], None] | None = None,
                metrics: Iterable[str] | None = None) -> Report:
    """Read one or more exports (files or directories) into one Report.

    Args:
        paths: a path or a list of paths: ``.ncu-rep`` files, any CSV written by ``ncu --csv``
            or ``ncu --import ... --csv``, or directories holding them.
        progress: called as ``progress(done, total, path)`` before each file is read.
        metrics: keep only these metric names (None: all). ``ncu_advisor.metric_use.
            analysis_metrics()`` is what the analysis reads; a raw export of tens of
            thousands of launches then needs a fraction of the memory.

    Returns:
        The combined Report; ``launch`` numbers run over all inputs in order.

    Raises:
        ReportParseError: an input is missing, empty, or not an Nsight Compute export.

    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    parts, skipped = [], []
    files = _expand(paths, skipped)
    metrics = None if metrics is None else frozenset(metrics)
    for done, (path, from_dir) in enumerate(files):
        if progress is not None:
            progress(done, len(files), path)
        try:
            parts.append(read_one(path, metrics))
        except ReportParseError as exc:
            if not from_dir:
                raise
            # Folders may hold other CSVs: skip what is not a report, and say so.
            skipped.append(f"skipped {exc}")
    if not parts:
        raise ReportParseError(f"no readable Nsight Compute report among the inputs ({skipped[0]})")
    launches, metrics, rules, warnings, session = [], [], [], list(skipped), {}
    offset = 0
    for part in parts:
        launches.append(part.launches.assign(launch=part.launches["launch"] + offset))
        metrics.append(part.metrics.assign(launch=part.metrics["launch"] + offset))
        rules.append(part.ncu_rules.assign(launch=part.ncu_rules["launch"] + offset))
        warnings.extend(part.warnings)
        for k, v in part.session.items():
            session.setdefault(k, v)
        offset += len(part.launches)
    nonempty = [r for r in rules if not r.empty]
    report = Report(
        launches=pd.concat(launches, ignore_index=True)[LAUNCH_COLUMNS],
        metrics=pd.concat(metrics, ignore_index=True),
        ncu_rules=pd.concat(nonempty, ignore_index=True) if nonempty else parts[0].ncu_rules,
        session=session,
        sources=[s for p in parts for s in p.sources],
        warnings=warnings,
    )
    report = _merge_same_launches(report)
    report.session.update(_session(report))
    report.launches["duration_ns"] = report.launches["duration_ns"].astype("float64")
    report.launches["invocations"] = (
        pd.to_numeric(report.launches["invocations"]).fillna(1).astype(np.int64))
    return report
