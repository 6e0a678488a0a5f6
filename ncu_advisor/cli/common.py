"""What the commands share: output formats, atomic writes, warnings, progress, rendering."""

from __future__ import annotations

import contextlib
import sys
from enum import StrEnum
from pathlib import Path

import typer

from .output import write_text

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


def warn(lines: list[str]) -> None:
    """Print warnings on stderr, one line each, control characters escaped."""
    from ..render.formats import safe_text

    for line in lines:
        typer.echo(f"ncu-advise: warning: {safe_text(line)}", err=True)


@contextlib.contextmanager
def file_progress():
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
        from .. import json_text

        return json_text.dumps_text(result)
    if fmt is OutputFormat.html:
        from ..render.html import render_html

        return render_html(result, group_by=group_by)
    from ..render.text import render_text

    return render_text(result, top=top)
