"""``analyze`` (saved reports to text, JSON or HTML) and ``export`` (the tidy tables)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..errors import NcuAdviseError, OutputError
from .common import (
    COLOR_HELP,
    HTML_METRICS_LIMIT,
    STDIO,
    ColorMode,
    ExportFormat,
    GroupBy,
    OutputFormat,
    file_progress,
    rename_sources,
    render,
    stage,
    stdin_inputs,
    to_stdout,
    use_color,
    warn,
    write_atomic,
)
from .output import check_output_file, check_output_folder, rule_files_kept, write_files

FORMAT_HELP = ("text (terminal), json (machine contract), html (report), markdown (a short "
               "report for a pull request or an agent) or sarif (code-scanning annotations).")


def _refuse_what_does_not_apply(format: OutputFormat, group_by, include_metrics, wide: bool,
                                color: ColorMode) -> None:
    """An option the chosen output ignores is an error, not silently dropped."""
    text_only = [name for name, given in (("--wide", wide),
                                          ("--color", color is not ColorMode.auto)) if given]
    if format is not OutputFormat.text and text_only:
        raise NcuAdviseError(f"{text_only[0]} applies to -f text only")
    if group_by is not None and format is not OutputFormat.html:
        raise NcuAdviseError("--group-by applies to -f html only")
    if include_metrics is not None and format not in (OutputFormat.json, OutputFormat.html):
        raise NcuAdviseError("--include-metrics/--no-metrics apply to -f json and -f html "
                             "only")


def analyze(
    paths: Annotated[list[Path], typer.Argument(
        help="Reports: .ncu-rep files, CSVs written by ncu --csv / ncu --import --csv, or "
             "folders of them; - reads one from standard input.", show_default=False)],
    format: Annotated[OutputFormat, typer.Option(
        "--format", "-f", help=FORMAT_HELP, case_sensitive=False)] = OutputFormat.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout (- is stdout).")] = None,
    kernel: Annotated[str | None, typer.Option(
        "--kernel", "-k", metavar="ID|REGEX", help="Only this launch (its ID: text shows it "
        "in full) or the kernels whose name matches REGEX.")] = None,
    nvtx: Annotated[str | None, typer.Option(
        "--nvtx", metavar="RANGE", help="Only the launches inside this NVTX range (a/b for "
        "a nested one).")] = None,
    top: Annotated[int | None, typer.Option(
        help="How many findings text and markdown list [default: 10].", min=1,
        show_default=False)] = None,
    wide: Annotated[bool, typer.Option(
        "--wide", help="Text: no wrapping, full kernel names, every launch.")] = False,
    color: Annotated[ColorMode, typer.Option(
        "--color", help=COLOR_HELP, case_sensitive=False)] = ColorMode.auto,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="Extra rule files or folders of them (repeatable).")] = None,
    include_metrics: Annotated[bool | None, typer.Option(
        "--include-metrics/--no-metrics", help="Add every raw metric of every kernel (JSON, "
        "HTML appendix). Default: on for HTML reports of up to 20 launches.",
        show_default=False)] = None,
    peak_bandwidth: Annotated[float | None, typer.Option(
        "--measured-bandwidth", metavar="GB/S", help="A measured DRAM roof in GB/s, shown "
        "beside the datasheet peak (e.g. a device-to-device copy).", min=0.0)] = None,
    group_by: Annotated[GroupBy | None, typer.Option(
        "--group-by", help="HTML: group the findings list by nvtx range, kernel or origin.",
        case_sensitive=False)] = None,
    origins: Annotated[Path | None, typer.Option(
        "--origins", help="A TOML file of extra kernel origins (your own libraries), tried "
        "before the built-in table (format: ncu_advisor/data/origins.toml).")] = None,
) -> None:
    """Analyze saved reports: what to change first, launches ranked by GPU time, findings."""
    _refuse_what_does_not_apply(format, group_by, include_metrics, wide, color)
    if top is not None and format not in (OutputFormat.text, OutputFormat.markdown):
        raise NcuAdviseError("--top applies to -f text and -f markdown only")
    top = 10 if top is None else top
    output = to_stdout(output)
    given = [p for p in paths if str(p) != STDIO]
    if output is not None:  # before any work: never overwrite what this command reads
        check_output_file(output, given,
                          kept=[*rule_files_kept(rules), *([origins] if origins else [])])
    with stdin_inputs(paths) as (paths, names):
        _analyze(paths, names, format, output, kernel, nvtx, top, wide, color, rules,
                 include_metrics, peak_bandwidth, group_by, origins)


def _analyze(paths, names, format, output, kernel, nvtx, top, wide, color, rules,
             include_metrics, peak_bandwidth, group_by, origins) -> None:
    from ..analysis.metric_use import lean_reading
    from ..analysis.pipeline import analyze as run_analysis
    from ..readers import read_report
    from ..rules_engine.loader import load_rules

    loaded = load_rules(rules)  # a bad rule file fails before a large report is read
    if origins is not None:  # so does a bad origins table
        from ..derive.origin import origin_table
        origin_table(str(origins))
    # Without the raw-metric listing, read only the metrics the analysis uses (lean).
    # HTML lists them for a few launches only: a large input is read lean, and read again
    # whole if it holds that few (a 1 GB raw page read whole for HTML took 4.9 GB).
    may_list = include_metrics is None and format is OutputFormat.html
    lean = include_metrics is False or (include_metrics is None and (
        format is not OutputFormat.html or _input_bytes(paths) > HTML_WHOLE_READ_BYTES))
    with file_progress() as progress:
        report = read_report(paths, progress=progress, **(lean_reading() if lean else {}))
    if lean and may_list and len(report.launches) <= HTML_METRICS_LIMIT:
        with file_progress() as progress:
            report = read_report(paths, progress=progress)
    rename_sources(report, names)
    with stage(f"analyzing {len(report.launches):,} launch(es)"):
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
    chosen, selection = _selection(result, kernel, nvtx)
    if format is OutputFormat.json and chosen is None:
        # Streamed kernel by kernel: the JSON of a large report never sits in memory whole.
        def write(fh) -> None:
            result.write_json(fh, include_metrics=include)

        _write_stream(write, output)
    else:
        from ..render.text import KERNEL_FIELDS, render_kernel_text, render_text

        if format is OutputFormat.html:
            from ..render.html import page_document

            document = page_document(result, include_metrics=include, launches=chosen)
        else:
            fields = KERNEL_FIELDS if format is OutputFormat.text else None
            document = result.to_dict(include_metrics=include, kernel_fields=fields)
        if chosen is not None:
            from ..analysis.contract import select

            document = select(document, chosen)
        to_terminal = output is None and sys.stdout.isatty()
        colour = use_color(color, to_terminal) and format is OutputFormat.text
        if format is OutputFormat.text and kernel is not None and kernel.strip().isdigit():
            launch = chosen[0]
            (entry,) = result.iter_kernels(include_metrics=False, launches=[launch])
            text = render_kernel_text(entry, document, wide=wide, color=colour)
        elif format is OutputFormat.text:
            text = render_text(document, top=top, wide=wide, color=colour, selection=selection)
        elif format is OutputFormat.json:
            from .. import json_text

            text = json_text.dumps_text(document)
        else:
            text = render(document, format, top, group_by=group_by.value if group_by else None)
        if output is None:
            # color=: click's echo would strip the escapes when stdout is not a terminal.
            typer.echo(text, nl=False, color=colour)
        else:
            write_atomic(output, text)
    warn(report.warnings)
    if output is not None:
        typer.echo(f"wrote {output}", err=True)


# Inputs up to this size are read whole for HTML (its raw-metric listing, up to
# HTML_METRICS_LIMIT launches); larger ones lean first.
HTML_WHOLE_READ_BYTES = 64 << 20


def _input_bytes(paths) -> int:
    """The size of the inputs on disk (files, and the files of folders), for the HTML read."""
    total = 0
    for path in paths:
        path = Path(path)
        try:
            files = [path] if not path.is_dir() else list(path.rglob("*"))
            total += sum(p.stat().st_size for p in files if p.is_file())
        except OSError:
            continue  # the reader names the problem
    return total


def _selection(result, kernel: str | None, nvtx: str | None):
    """The launches ``--kernel``/``--nvtx`` keep, and a line saying so (None: all of them)."""
    if kernel is None and nvtx is None:
        return None, None
    from ..analysis.contract import matching_launches

    entries = list(result.iter_kernels(fields=("id", "launch", "source", "name", "short_name",
                                               "op", "nvtx")))
    chosen = matching_launches(entries, kernel=kernel, nvtx=nvtx)
    what = " and ".join(x for x in (f"--kernel {kernel}" if kernel is not None else "",
                                    f"--nvtx {nvtx}" if nvtx is not None else "") if x)
    if not chosen:
        hint = ("the text output's ID column lists launch IDs" if kernel is not None
                else "the text output lists the NVTX ranges")
        raise NcuAdviseError(f"{what} matches none of the {len(entries)} launch(es); {hint}")
    return chosen, f"{len(chosen)} of {len(entries)} launch(es), {what}"


def _write_stream(write, output: Path | None) -> None:
    """A binary writer to stdout, or to a file all at once."""
    if output is None:
        sys.stdout.flush()
        write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        write_files([(output, write)])


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
