"""What the commands share: output formats, atomic writes, warnings, progress, rendering."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from enum import StrEnum
from pathlib import Path

import typer

from ..errors import NcuAdviseError, ReportParseError
from .output import write_text

STDIO = "-"  # as an input: standard input; as -o: standard output

HTML_METRICS_LIMIT = 20


class OutputFormat(StrEnum):
    """Output formats of ``analyze``."""

    text = "text"
    json = "json"
    html = "html"
    markdown = "markdown"
    sarif = "sarif"


class ListFormat(StrEnum):
    """Output formats of the listing commands (``rules``, ``demo``, ``occupancy``)."""

    text = "text"
    json = "json"


class ColorMode(StrEnum):
    """``--color``: severity colours on a terminal (auto), always, or never."""

    auto = "auto"
    always = "always"
    never = "never"


COLOR_HELP = ("Colour severities: auto (on a terminal, unless NO_COLOR is set), always or "
              "never.")


def use_color(mode: ColorMode, to_terminal: bool) -> bool:
    """Whether text output gets ANSI colours (https://no-color.org: NO_COLOR turns auto off)."""
    if mode is ColorMode.always:
        return True
    if mode is ColorMode.never or os.environ.get("NO_COLOR"):
        return False
    return to_terminal and os.environ.get("TERM") != "dumb"


def to_stdout(output: Path | None) -> Path | None:
    """``-o -`` means standard output, as no ``-o`` does (None)."""
    return None if output is not None and str(output) == STDIO else output


@contextlib.contextmanager
def stdin_inputs(paths: list[Path]):
    """Paths with ``-`` replaced by a temporary copy of standard input; yield (paths, names).

    ``names`` maps the copy's path to ``-``, so the report and its errors name the input as
    the user gave it. A gzip or xz stream is known by its magic bytes; the form by content.

    Raises:
        NcuAdviseError: ``-`` given twice, or standard input is a terminal or empty.

    """
    given = [str(p) for p in paths]
    if STDIO not in given:
        yield paths, {}
        return
    if given.count(STDIO) > 1:
        raise NcuAdviseError("- (standard input) can be given once")
    if sys.stdin is None or sys.stdin.isatty():
        raise NcuAdviseError("-: reads a report from standard input; pipe one in "
                             "(ncu --csv ./app | ncu-advise analyze -)")
    folder = tempfile.mkdtemp(prefix="ncu-advise-stdin-")
    try:
        source = sys.stdin.buffer
        head = source.read(6)
        if not head:
            raise ReportParseError("-: standard input is empty")
        suffix = ".gz" if head.startswith(b"\x1f\x8b") else \
            ".xz" if head == b"\xfd7zXZ\x00" else ""
        copy = Path(folder, "stdin" + suffix)
        with open(copy, "wb") as fh:
            fh.write(head)
            shutil.copyfileobj(source, fh, 1 << 20)
        names = {str(copy): STDIO}
        try:
            yield [copy if str(p) == STDIO else p for p in paths], names
        except NcuAdviseError as exc:  # name the input as given, not the temporary copy
            text = str(exc).replace(str(copy), STDIO)
            if text == str(exc):
                raise
            raise type(exc)(text) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def rename_sources(report, names: dict[str, str]) -> None:
    """Name inputs in a Report as the user gave them (``-``, not a temporary copy)."""
    if not names:
        return
    report.sources = [names.get(s, s) for s in report.sources]
    report.launches["source"] = report.launches["source"].map(lambda s: names.get(s, s))
    for old, new in names.items():
        report.warnings[:] = [w.replace(old, new) for w in report.warnings]


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


def warn(lines: list[str]) -> None:
    """Print warnings on stderr, one line each, control characters escaped."""
    from ..render.formats import safe_text

    for line in lines:
        typer.echo(f"ncu-advise: warning: {safe_text(line)}", err=True)


@contextlib.contextmanager
def file_progress():
    """What is being read, on stderr (only on a terminal): a bar over many files, else the name.

    One big file showed a bar at ``reading 0/?`` for its whole read; it shows its name and
    size with a spinner now.
    """
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("reading {task.description}"),
                  BarColumn(bar_width=None), MofNCompleteColumn(), transient=True,
                  console=rich_console(stderr=True)) as bar:
        task = bar.add_task("", total=None, visible=False)

        def update(done: int, total: int, path: Path) -> None:
            if total > 3:  # a bar for one or two files is noise
                bar.update(task, completed=done, total=total, description=path.name[-40:],
                           visible=True)
            else:
                bar.columns = (SpinnerColumn(), TextColumn("reading {task.description}"))
                bar.update(task, description=f"{path.name[-50:]} ({_size(path)})",
                           visible=True)

        yield update


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "?"
    return f"{size / 1e6:.0f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


@contextlib.contextmanager
def stage(what: str):
    """A spinner with what is being done, on stderr while it runs (only on a terminal)."""
    if not sys.stderr.isatty():
        yield
        return
    with rich_console(stderr=True).status(what, spinner="dots"):
        yield


def rich_console(stderr: bool):
    """A rich console (imported lazily: rich is only needed on a terminal)."""
    from rich.console import Console

    return Console(stderr=stderr)


def render(result: dict, fmt: OutputFormat, top: int, group_by: str | None = None) -> str:
    """Format one analysis result (JSON, HTML, Markdown, SARIF or plain text)."""
    if fmt is OutputFormat.markdown:
        from ..render.markdown import render_markdown

        return render_markdown(result, top=top)
    if fmt is OutputFormat.sarif:
        from ..render.sarif import render_sarif

        return render_sarif(result)
    if fmt is OutputFormat.json:
        from .. import json_text

        return json_text.dumps_text(result)
    if fmt is OutputFormat.html:
        from ..render.html import render_html

        return render_html(result, group_by=group_by)
    from ..render.text import render_text

    return render_text(result, top=top)
