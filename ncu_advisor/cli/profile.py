"""``profile``: run a program under ncu, then analyse and report what it profiled."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ..errors import NcuAdviseError, OutputError
from .common import (
    COLOR_HELP,
    HTML_METRICS_LIMIT,
    ColorMode,
    use_color,
    warn,
    write_atomic,
)


def _load_analysis(rules: list[Path] | None, html: bool) -> list:
    """Import the analysis and renderers and load the rules (run in a thread during ncu).

    Also the one-time costs of the first read and page: the metric names a lean read keeps
    (found by parsing the analysis modules, 0.17 s) and the page's templates. The HTML
    renderer and matplotlib are not loaded when no page is written.
    """
    from ..analysis.metric_use import lean_reading
    from ..analysis.pipeline import analyze  # noqa: F401 - imported for its start-up cost
    from ..render.text import render_text  # noqa: F401
    from ..rules_engine.loader import load_rules

    loaded = load_rules(rules)
    lean_reading()
    if html:
        from ..render.html import warm_up

        warm_up()
    return loaded


def profile_cmd(
    ctx: typer.Context,
    program: Annotated[str, typer.Argument(help="The program to profile, then its arguments. "
                                                "Arguments after a standalone -- go to ncu.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for report.html, "
                                         "report.json, the .ncu-rep and ncu's log.")] = Path(
        "ncu-advise-report"),
    section_set: Annotated[str, typer.Option(
        "--set", help="What ncu collects: 'advise' (only what ncu-advise reads, a fraction of "
        "full's replay passes) or an ncu set such as 'full'.")] = "advise",
    kernel_name: Annotated[str | None, typer.Option(
        "--kernel", "-k", "--kernel-name", help="Only kernels matching this name (ncu -k; "
        "regex:PATTERN for a pattern).")] = None,
    launch_count: Annotated[int | None, typer.Option(
        "--launch-count", "-c", help="Profile at most this many launches (ncu -c).")] = None,
    nvtx: Annotated[bool, typer.Option("--nvtx", help="Record NVTX ranges.")] = False,
    all_launches: Annotated[bool, typer.Option(
        "--all-launches", help="Profile every launch with the section set. Default: a census "
        "of every launch (its duration alone), then one launch per kernel shape among those "
        "holding --coverage of the GPU time, weighted by the census.")] = False,
    coverage: Annotated[float, typer.Option(
        "--coverage", min=1.0, max=100.0, metavar="PCT", help="Share of the census's GPU time "
        "the deep-profiled kernel shapes must hold.")] = 98.0,
    html: Annotated[bool, typer.Option(
        "--html/--no-html", help="Write report.html (the default) or not: the page and its "
        "roofline chart are the slowest part of the report.")] = True,
    csv: Annotated[bool, typer.Option(
        "--csv/--no-csv", help="Read the report through its CSV export (the default: faster) "
        "or, with --no-csv, read the .ncu-rep directly through NVIDIA's ncu_report.")] = True,
    rules: Annotated[list[Path] | None, typer.Option("--rules", help="Extra rule folder.")] = None,
    wide: Annotated[bool, typer.Option(
        "--wide", help="Text: no wrapping, full kernel names, every launch.")] = False,
    color: Annotated[ColorMode, typer.Option(
        "--color", help=COLOR_HELP, case_sensitive=False)] = ColorMode.auto,
    include_metrics: Annotated[bool | None, typer.Option(
        "--include-metrics/--no-metrics", help="Add every collected metric of every kernel "
        "(JSON, HTML appendix). Default: on for up to 20 launches; the .ncu-rep has them all.",
        show_default=False)] = None,
) -> None:
    """Profile a program with ncu and write report.html + report.json."""
    from ..profiling.run import attach_run_facts, in_background, read_profiled, run_profile

    # The analysis, its rules and the renderers load while the program runs under ncu, so
    # that their start-up is not added to the run (a bad rule file still fails: below).
    warm_up = in_background(_load_analysis, rules, html)
    args = list(ctx.args)
    extra: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, extra = args[:cut], args[cut + 1:]
    created = not output.exists()
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{output}: cannot create folder ({exc.strerror or exc})") from None
    try:
        result = run_profile(program, args, out_dir=output, section_set=section_set,
                             kernel_name=kernel_name, launch_count=launch_count, nvtx=nvtx,
                             extra=tuple(extra), export_csv=csv, all_launches=all_launches,
                             coverage=coverage / 100, on_plan=lambda line: typer.echo(
                                 f"ncu-advise: {line}", err=True))
    except NcuAdviseError:
        # ncu not found, the program not found: leave no empty folder behind.
        if created and output.is_dir() and not any(output.iterdir()):
            output.rmdir()
        raise
    timings = dict(result.timings)
    started = time.monotonic()
    loaded_rules = warm_up.result()
    from .. import json_text
    from ..analysis.pipeline import analyze as run_analysis
    from ..render.text import render_text

    timings["load"] = time.monotonic() - started  # what of the loading ncu's run did not hide
    started = time.monotonic()
    include = include_metrics if include_metrics is not None else (
        result.kernels_profiled <= HTML_METRICS_LIMIT)
    report = read_profiled(result, lean=not include)
    attach_run_facts(report, result)
    timings["read"] = time.monotonic() - started
    if "export" in result.timings and "export" not in timings:  # the .ncu-rep reader failed
        timings["export"] = result.timings["export"]
        timings["read"] -= timings["export"]
    started = time.monotonic()
    analysis = run_analysis(report, rules=loaded_rules, command=[program, *args],
                            session=result.session_facts())
    data = analysis.to_dict(include_metrics=include)
    timings["analyze"] = time.monotonic() - started
    page = None
    if html:
        from ..render.html import render_html

        started = time.monotonic()
        page = render_html(data)
        timings["render"] = time.monotonic() - started
    started = time.monotonic()
    colour = use_color(color, sys.stdout.isatty())
    text = render_text(data, wide=wide, color=colour)
    timings["text"] = time.monotonic() - started
    # report.json's own writing is the one step it cannot time; the next run's report does.
    data["session"]["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
    started = time.monotonic()
    write_atomic(output / "report.json", json_text.dumps_text(data))
    if page is not None:
        write_atomic(output / "report.html", page)
    write_s = time.monotonic() - started
    # color=: click's echo would strip the escapes when stdout is not a terminal.
    typer.echo(text, color=colour)
    warn(report.warnings)
    own = sum(v for k, v in timings.items() if k != "ncu") + write_s
    passes = f", {max(result.passes)} passes each" if result.passes else ""
    census = (f" after a {timings['census']:.1f} s census"
              if "census" in timings else "")
    own -= timings.get("census", 0.0)
    typer.echo(f"profiled {len(report.launches)} kernel(s) in {timings['ncu']:.1f} s"
               f"{passes}{census}; export, analysis and report took {own:.1f} s", err=True)
    written = [output / "report.html"] if page is not None else []
    typer.echo(f"wrote {' and '.join(str(p) for p in [*written, output / 'report.json'])}",
               err=True)
    if result.interrupted:
        raise typer.Exit(130)
