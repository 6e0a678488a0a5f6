"""``ncu-advise demo``: the teaching labs on the command line (list, time, profile a pair).

Registered by the main CLI as ``app.command("demo")(demo_command)``; the library is
:mod:`ncu_advisor.demos`. Errors are :class:`~ncu_advisor.errors.NcuAdviseError` (one line, exit
code 2 there).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class DemoFormat(StrEnum):
    """Output formats of ``demo``."""

    text = "text"
    json = "json"


def demo_command(
    name: Annotated[str | None, typer.Argument(help="Demo name (a checklist id) or 'all'.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the demos (no GPU needed).")] = False,
    profile: Annotated[bool, typer.Option(
        "--profile", help="Run the pair under ncu and analyze it.")] = False,
    format: Annotated[DemoFormat, typer.Option(
        "--format", "-f", help="text or json.", case_sensitive=False)] = DemoFormat.text,
    repeats: Annotated[int, typer.Option(help="Timed runs per variant.", min=1)] = 50,
) -> None:
    """Teaching labs: list, time or profile the bad/good kernel pairs."""
    from .. import demos

    if list_ or name is None:
        items = demos.list_demos()
        if format is DemoFormat.json:
            typer.echo(json.dumps([dataclasses.asdict(d) for d in items], indent=2, default=str))
            return
        width = min(shutil.get_terminal_size((100, 24)).columns, 100)
        for d in items:
            typer.echo(f"{d.name} [{d.category}]: {d.title}")
            typer.echo(textwrap.fill(
                f"bad: {', '.join(d.bad.kernels)}; good: {', '.join(d.good.kernels)}", width,
                initial_indent="  ", subsequent_indent="    "))
            first = " ".join(d.lesson.what.split()).split(". ")[0].rstrip(".") + "."
            typer.echo(textwrap.fill(f"lesson: {first}", width, initial_indent="  ",
                                     subsequent_indent="    "))
        typer.echo("\nFull lessons (what, why, fix, measured): kernels/NAME/demo.toml or "
                   "--format json.\nRun a pair: ncu-advise demo NAME (GPU and CuPy); "
                   "profile it: --profile")
        return
    if profile:
        _profile_demo(name)
        return
    if name != "all":
        demos.get_demo(name)  # unknown names fail before any GPU work
    names = None if name == "all" else [name]
    demos.require_gpu()  # no CuPy or no GPU: one line, before any output
    if format is DemoFormat.json:
        report = demos.time_all(names, repeats)
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        typer.echo(demos.TABLE_HEADER)
        report = demos.time_all(names, repeats, log=typer.echo)
    if report["errors"]:
        # Some pair computed a wrong result or failed to run: the lab is not trustworthy.
        raise typer.Exit(1)


def _profile_demo(name: str) -> None:
    """Profile the pair under ncu (only its profiled range) and print the analysis."""
    from .. import demos
    from ..analysis.pipeline import analyze as run_analysis
    from ..profiling.run import read_profiled, run_profile
    from ..render.text import render_text
    from .common import warn

    demos.get_demo(name)
    out_dir = Path(tempfile.mkdtemp(prefix=f"ncu-advise-demo-{name}-"))
    result = run_profile(sys.executable, ["-m", "ncu_advisor.demos", "once", name],
                         out_dir=out_dir, extra=("--profile-from-start", "off"))
    warn(result.warnings)
    report = read_profiled(result)
    typer.echo(render_text(run_analysis(report).to_dict()))
    typer.echo(f"report kept in {out_dir}", err=True)
