"""``ncu-advise diff BEFORE AFTER``: what changed between two runs, and a gate for CI.

Registered by the main CLI as ``app.command("diff")(diff_command)``. Input errors are
:class:`~ncu_advisor.errors.NcuAdviseError` (one line, exit code 2 there); a failed gate prints
one line on stderr and exits 1, after the report has been written; runs captured differently
(another GPU, ncu version, clock or cache control, sections) are inconclusive, exit 3, unless
``--force``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..diff.thresholds import DEFAULT_MIN_SHARE_PCT, DEFAULT_NOISE_FLOOR_NS


class DiffFormat(StrEnum):
    """Output formats of ``diff``."""

    text = "text"
    json = "json"
    html = "html"


class Severity(StrEnum):
    """Finding severities, most severe first."""

    high = "high"
    medium = "medium"
    low = "low"
    info = "info"


# The exit code of a diff of runs that do not compare (captured differently): no verdict.
EXIT_INCONCLUSIVE = 3


def _inconclusive(reasons: list[str], format: DiffFormat, output: Path | None,
                  warnings: list[str]) -> None:
    """Say that the runs do not compare, and why; no speedup is stated. Exit 3."""
    from ..render.formats import safe_text

    if format is DiffFormat.json:
        from .. import json_text

        text = json_text.dumps_text({"schema_version": 1, "kind": "diff",
                                     "verdict": "inconclusive", "comparable": False,
                                     "not_comparable": reasons})
    else:
        lines = ["ncu-advise diff: inconclusive: the runs were captured differently, so their "
                 "times do not compare (--force compares them anyway):",
                 *(f"  - {safe_text(r, newlines=False)}" for r in reasons)]
        text = "\n".join(lines) + "\n"
        if format is DiffFormat.html:
            import html

            text = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>ncu-advise "
                    "diff: inconclusive</title></head><body><pre>" + html.escape(text)
                    + "</pre></body></html>\n")
    _emit(text, output, warnings)
    typer.echo("ncu-advise: inconclusive: " + "; ".join(reasons), err=True)
    raise typer.Exit(EXIT_INCONCLUSIVE)


def _emit(text: str, output: Path | None, warnings: list[str]) -> None:
    """Warn, then print the result or write it all at once."""
    from .common import warn, write_atomic

    warn(warnings)
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_atomic(output, text)
        typer.echo(f"wrote {output}", err=True)


def _analyze(path: Path, rules: list[Path] | None):
    from ..analysis.pipeline import analyze
    from ..readers import read_report

    return analyze(read_report(path), rules_dirs=rules)


def diff_command(
    before: Annotated[Path | None, typer.Argument(
        help="The baseline run: a report file, or a folder read as one run (the raw and "
             "details exports of one capture belong together). Leave it out with "
             "--baseline-store.", show_default=False)] = None,
    after: Annotated[Path | None, typer.Argument(help="The run to judge (file or folder).",
                                                 show_default=False)] = None,
    baseline_store: Annotated[Path | None, typer.Option(
        "--baseline-store", help="Take the baseline from a report store (ncu-advise ingest); "
        "then give only AFTER.", show_default=False)] = None,
    baseline_label: Annotated[list[str] | None, typer.Option(
        "--baseline-label", help="KEY=VALUE label of the stored baseline (repeatable; "
        "report_id=... works too); the latest matching report is used.",
        show_default=False)] = None,
    format: Annotated[DiffFormat, typer.Option(
        "--format", "-f", help="text (terminal), json (machine contract) or html (report).",
        case_sensitive=False)] = DiffFormat.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout (- is stdout).")] = None,
    before_repeat: Annotated[list[Path] | None, typer.Option(
        "--before-repeat", help="Another capture of the baseline program (repeatable): the "
        "noise bands come from the differences the repeats show.")] = None,
    after_repeat: Annotated[list[Path] | None, typer.Option(
        "--after-repeat", help="Another capture of the judged program (repeatable).")] = None,
    noise: Annotated[float | None, typer.Option(
        "--noise", help="Per-kernel noise band in percent (default 2; with repeats, the "
        "band they show, at least this).", show_default=False)] = None,
    noise_floor_us: Annotated[float, typer.Option(
        "--noise-floor-us", help="Smallest per-kernel noise band in µs (short kernels jitter "
        "by a fixed amount).")] = DEFAULT_NOISE_FLOOR_NS / 1000.0,
    fail_if_slower: Annotated[float | None, typer.Option(
        "--fail-if-slower", help="Exit 1 when the whole run, or a kernel with at least "
        "--min-share of the run, is slower by more than PCT percent beyond noise.",
        metavar="PCT", show_default=False)] = None,
    fail_on_new: Annotated[Severity | None, typer.Option(
        "--fail-on-new", help="Exit 1 on a new finding of this severity or worse.",
        case_sensitive=False, show_default=False)] = None,
    min_share: Annotated[float, typer.Option(
        "--min-share", help="Kernels below this share (percent) of both runs are not gated "
        "one by one (the whole run still is).", metavar="PCT")] = DEFAULT_MIN_SHARE_PCT,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="Extra rule files or folders of them (repeatable).")] = None,
    top: Annotated[int | None, typer.Option(
        help="How many pairs the text output lists [default: 30].", min=1,
        show_default=False)] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Compare runs captured differently (another GPU, ncu version, clock "
        "or cache control, sections) anyway; without it they are inconclusive (exit "
        f"{EXIT_INCONCLUSIVE}).")] = False,
) -> None:
    """Compare two runs: launches paired, time and findings changed, CI gates."""
    from ..diff.compare import diff_runs, evaluate_gates
    from ..errors import NcuAdviseError
    from .common import to_stdout
    from .output import check_output_file, rule_files_kept

    output = to_stdout(output)
    if top is not None and format is not DiffFormat.text:
        raise NcuAdviseError("--top applies to -f text only")
    top = 30 if top is None else top
    if noise_floor_us < 0 or min_share < 0:
        raise NcuAdviseError("--noise-floor-us and --min-share must be >= 0")
    if output is not None:  # before any work: never overwrite what this command reads
        check_output_file(
            output, [p for p in (before, after, *(before_repeat or []), *(after_repeat or []))
                     if p is not None],
            kept=[*rule_files_kept(rules), *([baseline_store] if baseline_store else [])])
    if baseline_store is not None:
        if after is not None or before is None:
            raise NcuAdviseError("with --baseline-store give only the run to judge: ncu-advise "
                                 "diff --baseline-store DIR [--baseline-label K=V] AFTER")
        from ..analysis.pipeline import analyze
        from ..store import load_report

        after = before
        runs = {"before": analyze(load_report(baseline_store, list(baseline_label or [])),
                                  rules_dirs=rules),
                "after": _analyze(after, rules)}
    else:
        if before is None or after is None:
            raise NcuAdviseError("diff needs BEFORE and AFTER (or --baseline-store DIR AFTER)")
        runs = {"before": _analyze(before, rules), "after": _analyze(after, rules)}
    reps_before = [_analyze(p, rules) for p in before_repeat or []]
    reps_after = [_analyze(p, rules) for p in after_repeat or []]
    result = diff_runs(runs["before"], runs["after"], noise_pct=noise,
                       noise_floor_ns=noise_floor_us * 1000.0, before_repeats=reps_before,
                       after_repeats=reps_after)
    warnings = [f"{side}: {w}" for side, run in runs.items() for w in run.report.warnings]
    if result.not_comparable and not force:
        _inconclusive(result.not_comparable, format, output, warnings)
    if result.not_comparable:
        warnings.append("compared with --force, though " + "; ".join(result.not_comparable))
    data = result.to_dict()
    gates = [g.to_dict() for g in evaluate_gates(
        data, fail_if_slower=fail_if_slower,
        fail_on_new=fail_on_new.value if fail_on_new else None, min_share_pct=min_share)]
    if gates:
        data["gates"] = gates
    if format is DiffFormat.json:
        from .. import json_text

        text = json_text.dumps_text(data)
    elif format is DiffFormat.html:
        from ..render.diff_html import render_diff_html

        text = render_diff_html(data)
    else:
        from ..render.diff_text import render_diff_text

        text = render_diff_text(data, gates, top=top)
    _emit(text, output, warnings)
    failed = [g for g in gates if not g["passed"]]
    if failed:
        typer.echo("ncu-advise: gate failed: " + " | ".join(
            f"--{g['gate']}: {g['reason']}" for g in failed), err=True)
        raise typer.Exit(1)
