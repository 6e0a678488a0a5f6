"""The ``ncu-advise`` command line: declares options, calls the library, prints.

Every user-facing failure is an :class:`~ncu_advisor.errors.NcuAdviseError`; ``main`` prints
its one line and exits with code 2 (usage/input). No traceback reaches the user.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import json
import os
import re
import shutil
import sys
import textwrap
import time
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .errors import NcuAdviseError, OutputError
from .output import check_output_file, check_output_folder, write_files, write_text

app = typer.Typer(
    name="ncu-advise",
    help="Ranked, evidence-backed optimization advice from Nsight Compute profiles.\n\n"
         "Profile a program: ncu-advise ./app [args]   (same as: ncu-advise profile ./app)",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


HTML_METRICS_LIMIT = 20


class OutputFormat(StrEnum):
    """Output formats of ``analyze``."""

    text = "text"
    json = "json"
    html = "html"


class GroupBy(StrEnum):
    """How the HTML report groups its findings list (``--group-by``)."""

    nvtx = "nvtx"
    kernel = "kernel"
    origin = "origin"


class ExportFormat(StrEnum):
    """Table formats of ``export``."""

    parquet = "parquet"
    csv = "csv"


def write_atomic(path: Path, text: str) -> None:
    """Write a file all at once: a failure never leaves a half-written output behind."""
    write_text(path, text)


def _warn(lines: list[str]) -> None:
    from .render.text import safe_text

    for line in lines:
        typer.echo(f"ncu-advise: warning: {safe_text(line)}", err=True)


@contextlib.contextmanager
def _file_progress():
    """A progress bar on stderr while many files are read (only on a terminal)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("reading {task.description}"), BarColumn(), MofNCompleteColumn(),
                  transient=True, console=rich_console(stderr=True)) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, path: Path) -> None:
            if total > 3:  # a bar for one or two files is noise
                bar.update(task, completed=done, total=total, description=path.name[-40:])

        yield update


def rich_console(stderr: bool):
    """A rich console (imported lazily: rich is only needed on a terminal)."""
    from rich.console import Console

    return Console(stderr=stderr)


def render(result: dict, fmt: OutputFormat, top: int, group_by: str | None = None) -> str:
    """Format one analysis result."""
    if fmt is OutputFormat.json:
        from . import json_text

        return json_text.dumps_text(result)
    if fmt is OutputFormat.html:
        from .render.html import render_html

        return render_html(result, group_by=group_by)
    from .render.text import render_text

    return render_text(result, top=top)


@app.command()
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
    from .analysis import analyze as run_analysis
    from .metric_use import lean_reading
    from .readers import read_report
    from .rules_engine.loader import load_rules

    if output is not None:
        check_output_file(output, paths)  # before any work: never overwrite an input
    loaded = load_rules(rules)  # a bad rule file fails before a large report is read
    if origins is not None:  # so does a bad origins table
        from .derive.origin import origin_table
        origin_table(str(origins))
    # Without the raw-metric listing, read only the metrics the analysis uses (lean).
    lean = include_metrics is False or (include_metrics is None
                                        and format is not OutputFormat.html)
    with _file_progress() as progress:
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
        from .render.text import KERNEL_FIELDS

        fields = KERNEL_FIELDS if format is OutputFormat.text else None
        text = render(result.to_dict(include_metrics=include, kernel_fields=fields), format, top,
                      group_by=group_by.value if group_by else None)
        if output is None:
            typer.echo(text, nl=False)
        else:
            write_atomic(output, text)
    _warn(report.warnings)
    if output is not None:
        typer.echo(f"wrote {output}", err=True)


@app.command()
def export(
    path: Annotated[list[Path], typer.Argument(help="Reports or folders to read.")],
    to: Annotated[ExportFormat, typer.Option("--to", help="Table format.")] = ExportFormat.parquet,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the tables.")] = Path(
        "ncu-tables"),
) -> None:
    """Write the tidy tables (launches, metrics, ncu_rules, quantities) as Parquet or CSV."""
    from .analysis import analyze as run_analysis
    from .readers import read_report

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
    _warn(report.warnings)
    typer.echo("wrote " + ", ".join(f"{output / f'{name}.{to.value}'} ({len(frame)} rows)"
                                    for name, frame in tables.items()))


@app.command("rules")
def rules_cmd(
    rule_id: Annotated[str | None, typer.Argument(help="Show one rule in full.")] = None,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="Folder of extra rule files (repeatable).")] = None,
    format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.text,
    check: Annotated[list[Path] | None, typer.Option(
        "--check", help="Validate a folder of rule files (repeatable): every problem at "
        "once, no report needed.")] = None,
    test: Annotated[list[Path] | None, typer.Option(
        "--test", help="Check a rule folder and run the RULE.cases.toml cases beside its "
        "rules (repeatable).")] = None,
    quantities: Annotated[bool, typer.Option(
        "--quantities", help="List the quantity names conditions and texts can use.")] = False,
) -> None:
    """List the rules with their docs, or show one; check and test your own rule folders."""
    from .derive.quantities import metrics_of
    from .rules_engine.loader import load_rules
    from .rules_engine.schema import describe

    if quantities or check or test:
        from .cli_rules import rules_tools

        rules_tools(check or [], test or [], quantities)
        return
    loaded = load_rules(rules)
    if rule_id is not None:
        match = [r for r in loaded if r.id == rule_id]
        if not match:
            raise NcuAdviseError(f"no rule {rule_id!r}; `ncu-advise rules` lists them")
        rule = match[0]
        if format is OutputFormat.json:
            typer.echo(json.dumps(rule.model_dump(mode="json", by_alias=True), indent=2))
            return
        metrics = sorted({m for q in rule.needs for m in metrics_of(q)})
        width = min(shutil.get_terminal_size((100, 24)).columns, 100)

        def block(title: str, text: str) -> None:
            typer.echo(f"\n{title}:")
            typer.echo(textwrap.fill(" ".join(text.split()), width, initial_indent="  ",
                                     subsequent_indent="  "))

        typer.echo(f"{rule.id}  [{rule.category}, confidence {rule.confidence}, "
                   f"{rule.scope} scope]")
        typer.echo(textwrap.fill(rule.title, width, initial_indent="  ", subsequent_indent="  "))
        block("Why", rule.explanation)
        block("Fix", rule.fix)
        if rule.when is not None:
            block("Fires when", describe(rule.when))
        if rule.function:
            block("Found by", f"ncu_advisor.rules_engine.functions.{rule.function}")
        steps = [f"{s.level} if {describe(s.when)}" if s.when else f"otherwise {s.level}"
                 for s in rule.severity]
        block("Severity", "; ".join(steps))
        if rule.confidence_steps:
            block("Confidence", "; ".join([f"{s.level} if {describe(s.when)}"
                                           for s in rule.confidence_steps]
                                          + [f"otherwise {rule.confidence}"]))
        if rule.estimate:
            e = rule.estimate
            block("Estimated saving", f"{e.method} of {e.quantity or e.value}"
                  + (f" against {e.target:g}" if e.target else "")
                  + (f", scaled by {e.scale}" if e.scale else "") + f", at most {e.cap:g}%")
        block("Needs", ", ".join(rule.needs) + " (metrics: " + ", ".join(metrics) + ")")
        typer.echo(f"\nDemo: ncu-advise demo {rule.demo}" if rule.demo else "")
        for ref in rule.references:
            typer.echo(f"Reference: {ref}")
        if rule.notes:
            block("Notes", rule.notes)
        return
    if format is OutputFormat.json:
        typer.echo(json.dumps([{"id": r.id, "category": r.category, "title": r.title,
                                "confidence": r.confidence, "demo": r.demo} for r in loaded],
                              indent=2))
        return
    width = max(len(r.id) for r in loaded)
    columns = shutil.get_terminal_size((100, 24)).columns
    typer.echo(f"{'rule':<{width}}  {'category':<14} what it finds")
    for r in sorted(loaded, key=lambda r: (r.category, r.id)):
        title = re.sub(r"\{[^{}]*\}", "N", r.title)
        line = f"{r.id:<{width}}  {r.category:<14} {title}"
        typer.echo(line if len(line) <= columns else line[: columns - 1] + "…")
    typer.echo(f"\n{len(loaded)} rules; `ncu-advise rules ID` shows one in full.")


def _load_analysis(rules: list[Path] | None) -> list:
    """Import the analysis and renderers and load the rules (run in a thread during ncu)."""
    from .analysis import analyze  # noqa: F401 - imported for its start-up cost
    from .render.html import render_html  # noqa: F401
    from .render.text import render_text  # noqa: F401
    from .rules_engine.loader import load_rules

    return load_rules(rules)


def _read_profiled(result, lean: bool = False):
    """Read what a profiling run produced: its CSV pages, else the .ncu-rep itself.

    A .ncu-rep the installed ``ncu_report`` module cannot read (a newer format, or a module
    that crashes on it: the reader runs in a child process) is exported as CSV instead.
    """
    from .metric_use import lean_reading
    from .profile import export_csvs
    from .readers import read_report

    reading = lean_reading() if lean else {}
    try:
        return read_report(result.report_files, **reading)
    except NcuAdviseError as exc:
        if result.raw_csv is not None or result.ncu is None:
            raise
        why = str(exc)
    started = time.monotonic()
    result.raw_csv, result.details_csv = export_csvs(result.ncu, result.rep_path)
    result.timings["export"] = time.monotonic() - started
    result.warnings.append(f"read the CSV export: the .ncu-rep reader failed ({why})")
    return read_report(result.report_files, **reading)


@app.command(
    "profile",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                      "allow_interspersed_args": False},
)
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
        "--kernel-name", "-k", help="Only kernels matching this name (ncu -k; "
        "regex:PATTERN for a pattern).")] = None,
    launch_count: Annotated[int | None, typer.Option(
        "--launch-count", "-c", help="Profile at most this many launches (ncu -c).")] = None,
    nvtx: Annotated[bool, typer.Option("--nvtx", help="Record NVTX ranges.")] = False,
    csv: Annotated[bool, typer.Option(
        "--csv/--no-csv", help="Read the report through its CSV export (the default: faster) "
        "or, with --no-csv, read the .ncu-rep directly through NVIDIA's ncu_report.")] = True,
    rules: Annotated[list[Path] | None, typer.Option("--rules", help="Extra rule folder.")] = None,
    include_metrics: Annotated[bool | None, typer.Option(
        "--include-metrics/--no-metrics", help="Add every collected metric of every kernel "
        "(JSON, HTML appendix). Default: on for up to 20 launches; the .ncu-rep has them all.",
        show_default=False)] = None,
) -> None:
    """Profile a program with ncu and write report.html + report.json."""
    from .profile import in_background, run_profile

    # The analysis, its rules and the renderers load while the program runs under ncu, so
    # that their start-up is not added to the run (a bad rule file still fails: below).
    warm_up = in_background(_load_analysis, rules)
    args = list(ctx.args)
    extra: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, extra = args[:cut], args[cut + 1:]
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{output}: cannot create folder ({exc.strerror or exc})") from None
    result = run_profile(program, args, out_dir=output, section_set=section_set,
                         kernel_name=kernel_name, launch_count=launch_count, nvtx=nvtx,
                         extra=tuple(extra), export_csv=csv)
    timings = dict(result.timings)
    started = time.monotonic()
    loaded_rules = warm_up.result()
    from . import json_text
    from .analysis import analyze as run_analysis
    from .render.html import render_html
    from .render.text import render_text

    timings["load"] = time.monotonic() - started  # what of the loading ncu's run did not hide
    started = time.monotonic()
    include = include_metrics if include_metrics is not None else (
        result.kernels_profiled <= HTML_METRICS_LIMIT)
    report = _read_profiled(result, lean=not include)
    report.warnings[:0] = list(result.warnings)
    report.session["ncu_messages"] = list(result.log)  # its notes feed the validity lint
    timings["read"] = time.monotonic() - started
    if "export" in result.timings and "export" not in timings:  # the .ncu-rep reader failed
        timings["export"] = result.timings["export"]
        timings["read"] -= timings["export"]
    started = time.monotonic()
    analysis = run_analysis(report, rules=loaded_rules, command=[program, *args])
    analysis.extra_session.update(result.session_facts())
    analysis.extra_session["program_exit_code"] = result.program_exit_code
    data = analysis.to_dict(include_metrics=include)
    timings["analyze"] = time.monotonic() - started
    started = time.monotonic()
    html = render_html(data)
    timings["render"] = time.monotonic() - started
    data["session"]["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
    write_atomic(output / "report.json", json_text.dumps_text(data))
    write_atomic(output / "report.html", html)
    typer.echo(render_text(data))
    _warn(report.warnings)
    own = sum(v for k, v in timings.items() if k != "ncu")
    passes = f", {max(result.passes)} passes each" if result.passes else ""
    typer.echo(f"profiled {len(report.launches)} kernel(s) in {timings['ncu']:.1f} s"
               f"{passes}; export, analysis and report took {own:.1f} s", err=True)
    typer.echo(f"wrote {output / 'report.html'} and {output / 'report.json'}", err=True)
    if result.interrupted:
        raise typer.Exit(130)


def _register_commands() -> None:
    """Commands that live in their own modules (imported here, after ``app`` exists)."""
    from .cli_demo import demo_command
    from .cli_occupancy import occupancy_command

    app.command("demo")(demo_command)
    app.command("occupancy")(occupancy_command)
    from .cli_diff import diff_command
    from .cli_store import ingest_command, query_command, trend_command

    app.command("diff")(diff_command)
    app.command("ingest")(ingest_command)
    app.command("query")(query_command)
    app.command("trend")(trend_command)


_register_commands()
# Options of `profile` that take a value, so that `ncu-advise -o DIR -c 20 ./app` finds ./app.
_PROFILE_VALUE_OPTIONS = {"-o", "--output", "--set", "-k", "--kernel-name", "-c",
                          "--launch-count", "--rules"}


def command_names() -> set[str]:
    """The names of the registered commands (the first word that is not a program)."""
    return {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands
            if c.callback is not None}


def _is_explicit_program(word: str) -> bool:
    """./app, /usr/bin/app, build/app: a path, never mistaken for a command."""
    return os.sep in word or bool(os.altsep and os.altsep in word)


def route(argv: list[str]) -> list[str]:
    """Turn the short form into the ``profile`` command, or refuse an unknown first word.

    ``ncu-advise ./app args`` and ``ncu-advise -o DIR -c 20 ./app args`` are ``profile``; a
    program on PATH is named after ``--`` (``ncu-advise -- python3 train.py``) or with the
    command (``ncu-advise profile python3 train.py``). A first word that is neither a command
    nor such a program is an unknown command, not a program that happens to share its name.

    Raises:
        NcuAdviseError: The first word is not a command, and not explicitly a program.

    """
    if not argv or argv[0] in ("-h", "--help"):
        return argv
    commands = command_names()
    if argv[0] in commands:
        return argv
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        i += 2 if argv[i] in _PROFILE_VALUE_OPTIONS else 1
    if i < len(argv) and argv[i] == "--":
        return ["profile", *argv]  # what follows -- is the program, whatever its name
    if i >= len(argv) or _is_explicit_program(argv[i]):
        return ["profile", *argv]  # no program: profile's own usage error says so
    word = argv[i]
    close = difflib.get_close_matches(word, sorted(commands), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    spelled = f"./{word}" if Path(word).exists() else f"-- {word}"
    raise NcuAdviseError(
        f"unknown command '{word}'; {hint}commands: {', '.join(sorted(commands))}; to profile "
        f"a program give its path or put -- before it: ncu-advise {spelled} ...")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ncu-advise`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = route(argv)
    except NcuAdviseError as exc:
        typer.echo(f"ncu-advise: error: {exc}", err=True)
        return exc.exit_code
    click_error, abort = _click_exceptions()
    try:
        with warnings.catch_warnings():
            # numpy's "invalid value" warnings on odd inputs are not the user's business:
            # missing values are reported as such in the output.
            warnings.simplefilter("ignore", RuntimeWarning)
            code = app(args=argv, prog_name="ncu-advise", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except NcuAdviseError as exc:
        from .render.text import safe_text

        typer.echo(f"ncu-advise: error: {safe_text(_one_line(str(exc)))}", err=True)
        return exc.exit_code
    except click_error as exc:  # bad option value, missing argument: one line, not a box
        ctx = getattr(exc, "ctx", None)
        command = getattr(ctx, "info_name", None)
        hint = f" (see ncu-advise {command} --help)" if command not in (None, "ncu-advise") \
            else ""
        typer.echo(f"ncu-advise: error: {_one_line(exc.format_message())}{hint}", err=True)
        return getattr(exc, "exit_code", 2)
    except (KeyboardInterrupt, *abort):
        typer.echo("ncu-advise: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a filesystem problem is the user's to fix, not a bug
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"ncu-advise: error: {where}{exc.strerror or exc}", err=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug must still not dump a traceback on users
        if os.environ.get("NCU_ADVISE_DEBUG"):
            raise
        typer.echo(f"ncu-advise: internal error: {type(exc).__name__}: {exc} (a bug: please "
                   "report it; set NCU_ADVISE_DEBUG=1 to see the traceback)", err=True)
        return 70
    return 0


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Click's usage-error and abort types (typer vendors click from 0.16 on as typer._click)."""
    errors, aborts = [], []
    for name in ("click.exceptions", "typer._click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:  # not an error: typer brings one of the two, old or new layout
            continue
        errors.append(module.ClickException)
        if hasattr(module, "Abort"):
            aborts.append(module.Abort)
    aborts.append(typer.Abort)
    return tuple(errors), tuple(aborts)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
