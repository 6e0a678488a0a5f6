"""``analyze`` (saved reports to text, JSON or HTML) and ``export`` (the tidy tables)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..errors import OutputError
from .common import (
    HTML_METRICS_LIMIT,
    ExportFormat,
    GroupBy,
    OutputFormat,
    file_progress,
    render,
    warn,
    write_atomic,
)
from .output import check_output_file, check_output_folder, rule_files_kept, write_files


def analyze(
    paths: Annotated[list[Path], typer.Argument(
        help="Reports: .ncu-rep files, CSVs written by ncu --csv / ncu --import --csv, or "
             "folders of them.", show_default=False)],
    format: Annotated[OutputFormat, typer.Option(
        "--format", "-f", help="text (terminal), json (machine contract) or html (report).",
        case_sensitive=False)] = OutputFormat.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout.")] = None,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="Folder of extra rule files (repeatable).")] = None,
    top: Annotated[int, typer.Option(help="How many findings the text output lists.")] = 10,
    include_metrics: Annotated[bool | None, typer.Option(
        "--include-metrics/--no-metrics", help="Add every raw metric of every kernel (JSON, "
        "HTML appendix). Default: on for HTML reports of up to 20 launches.",
        show_default=False)] = None,
    peak_bandwidth: Annotated[float | None, typer.Option(
        "--measured-bandwidth", help="A measured DRAM roof in GB/s, shown beside the "
        "datasheet peak (e.g. a device-to-device copy).")] = None,
    group_by: Annotated[GroupBy | None, typer.Option(
        "--group-by", help="HTML: group the findings list by nvtx range, kernel or origin.",
        case_sensitive=False)] = None,
    origins: Annotated[Path | None, typer.Option(
        "--origins", help="A TOML file of extra kernel origins (your own libraries), tried "
        "before the built-in table (format: ncu_advisor/data/origins.toml).")] = None,
) -> None:
    """Analyze saved reports: launches ranked by GPU time, and the top findings."""
    from ..analysis.metric_use import lean_reading
    from ..analysis.pipeline import analyze as run_analysis
    from ..readers import read_report
    from ..rules_engine.loader import load_rules

    if output is not None:  # before any work: never overwrite what this command reads
        check_output_file(output, paths,
                          kept=[*rule_files_kept(rules), *([origins] if origins else [])])
    loaded = load_rules(rules)  # a bad rule file fails before a large report is read
    if origins is not None:  # so does a bad origins table
        from ..derive.origin import origin_table
        origin_table(str(origins))
    # Without the raw-metric listing, read only the metrics the analysis uses (lean).
    lean = include_metrics is False or (include_metrics is None
                                        and format is not OutputFormat.html)
    with file_progress() as progress:
        report = read_report(paths, progress=progress, **(lean_reading() if lean else {}))
    result = run_analysis(report, rules=loaded,
                          measured_bandwidth=peak_bandwidth * 1e9 if peak_bandwidth else None,
                          origins=str(origins) if origins else None)
    include = include_metrics
    if include is None:
        # Raw metrics are ~2,000 per kernel of a full-set capture (about 1 MB of HTML each).
        include = format is OutputFormat.html and len(report.launches) <= HTML_METRICS_LIMIT
        if format is OutputFormat.html and not include:
            report.warnings.append(f"raw-metric appendix left out ({len(report.launches)} "
                                   f"launches > {HTML_METRICS_LIMIT}); add --include-metrics")
    if format is OutputFormat.json:
        # Streamed kernel by kernel: the JSON of a large report never sits in memory whole.
        def write(fh) -> None:
            result.write_json(fh, include_metrics=include)

        if output is None:
            sys.stdout.flush()
            write(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            write_files([(output, write)])
    else:
        from ..render.text import KERNEL_FIELDS

        fields = KERNEL_FIELDS if format is OutputFormat.text else None
        text = render(result.to_dict(include_metrics=include, kernel_fields=fields), format, top,
                      group_by=group_by.value if group_by else None)
        if output is None:
            typer.echo(text, nl=False)
        else:
            write_atomic(output, text)
    warn(report.warnings)
    if output is not None:
        typer.echo(f"wrote {output}", err=True)


def export(
    path: Annotated[list[Path], typer.Argument(help="Reports or folders to read.")],
    to: Annotated[ExportFormat, typer.Option("--to", help="Table format.")] = ExportFormat.parquet,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the tables.")] = Path(
        "ncu-tables"),
) -> None:
    """Write the tidy tables (launches, metrics, ncu_rules, quantities) as Parquet or CSV."""
    from ..analysis.pipeline import analyze as run_analysis
    from ..readers import read_report

    names = ("launches", "metrics", "ncu_rules", "quantities")
    check_output_folder(output, path, [f"{n}.{to.value}" for n in names])
    report = read_report(path)
    quantities = run_analysis(report).quantities.reset_index(names="launch")
    tables = {"launches": report.launches, "metrics": report.metrics,
              "ncu_rules": report.ncu_rules, "quantities": quantities}
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{output}: cannot create folder ({exc.strerror or exc})") from None

    def writer(frame):
        if to is ExportFormat.parquet:
            return lambda fh: frame.to_parquet(fh, index=False)
        return lambda fh: fh.write(frame.to_csv(index=False).encode("utf-8"))

    # All four tables or none: each is staged, then all are renamed into place.
    write_files([(output / f"{name}.{to.value}", writer(frame))
                 for name, frame in tables.items()])
    warn(report.warnings)
    typer.echo("wrote " + ", ".join(f"{output / f'{name}.{to.value}'} ({len(frame)} rows)"
                                    for name, frame in tables.items()))
