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

from ..errors import NcuAdviseError


class DemoFormat(StrEnum):
    """Output formats of ``demo``."""

    text = "text"
    json = "json"


def demo_command(
    name: Annotated[str | None, typer.Argument(help="Demo name (a checklist id) or 'all'.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the demos (no GPU needed).")] = False,
    profile: Annotated[bool, typer.Option(
        "--profile", help="Run the pair under ncu and analyze it.")] = False,
    offline: Annotated[bool, typer.Option(
        "--offline", help="No GPU: walk the lesson from the pair's shipped H200 capture (the "
        "time of each variant, the findings the fix removes, keeps and brings).")] = False,
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
                   "--format json.\nWithout a GPU: ncu-advise demo NAME --offline (from its "
                   "capture).\nRun a pair: ncu-advise demo NAME (GPU and CuPy); profile it: "
                   "--profile")
        return
    if profile and offline:
        raise NcuAdviseError("--profile runs the pair on a GPU; --offline reads its capture: "
                             "give one")
    if offline:
        _offline_demo(name, format)
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


def _offline_demo(name: str, format: DemoFormat) -> None:
    """Print the lesson of one pair (or all) from the shipped captures."""
    from .. import demos
    from ..analysis.lessons import offline_lesson

    names = [d.name for d in demos.list_demos()] if name == "all" else [name]
    lessons = [offline_lesson(n) for n in names]
    if format is DemoFormat.json:
        data = [lesson.to_dict() for lesson in lessons]
        typer.echo(json.dumps(data if name == "all" else data[0], indent=2, allow_nan=False))
        return
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    typer.echo("\n\n".join(render_lesson(lesson, width) for lesson in lessons), nl=False)


def render_lesson(lesson, width: int = 100) -> str:
    """One offline lesson as text: both variants' time, the findings that change, the fix."""
    from ..render.formats import SEVERITY_TAGS, fmt_time, safe_text

    def para(label: str, text: str) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, initial_indent=label,
                             subsequent_indent="  ", break_on_hyphens=False)

    lines = [f"{lesson.name}: {lesson.title}",
             "  (from the pair's H200 capture: " + ", ".join(
                 Path(s).name for s in lesson.sources) + "; no GPU needed)", ""]
    for side in (lesson.bad, lesson.good):
        lines.extend(textwrap.wrap(
            f"{side.role + ' (' + side.label + ')':<22} {fmt_time(side.duration_ns):>9}  "
            + ", ".join(side.kernels), width, subsequent_indent=" " * 34))
    if lesson.speedup and lesson.speedup >= 1:
        lines.append(f"{'':<22} {lesson.speedup:.2f}x faster after the fix")
    elif lesson.speedup:  # the roofline pair contrasts two kernels; it does not fix one
        lines.append(f"{'':<22} {1 / lesson.speedup:.2f}x slower: a contrast, not a fix")
    lines += ["", *para("What: ", lesson.what), ""]
    for title, items in (("What the fix removes", lesson.resolved),
                         ("Still there after it", lesson.kept),
                         ("New on the fixed variant", lesson.new)):
        lines.append(f"{title} ({len(items)}):" if items else f"{title}: none")
        for f in items:
            lines.extend(textwrap.wrap(
                f"  [{SEVERITY_TAGS[f['severity']]}] {f['rule']}: {f['kernel']}: {f['title']}",
                width, subsequent_indent=" " * 9, break_on_hyphens=False))
    lines += ["", *para("Why: ", lesson.why), "", *para("Fix: ", lesson.fix), "",
              f"On a GPU: ncu-advise demo {lesson.name} (time both), "
              f"ncu-advise demo {lesson.name} --profile (profile and analyze)"]
    return "\n".join(safe_text(line) for line in lines) + "\n"


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
                         out_dir=out_dir, extra=("--profile-from-start", "off"), nvtx=True)
    warn(result.warnings)
    report = read_profiled(result)
    typer.echo(render_text(run_analysis(report).to_dict()))
    typer.echo(f"report kept in {out_dir}", err=True)
