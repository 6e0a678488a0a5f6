"""``ncu-advise rules``: the rules with their docs, and the tools for rule authors.

The tools are ``--check DIR``, ``--test DIR`` and ``--quantities``.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path
from typing import Annotated

import typer

from ..errors import NcuAdviseError
from .common import ListFormat as OutputFormat


def rules_tools(check: list[Path], test: list[Path], quantities: bool) -> None:
    """Run the rule-author tools: every problem on a line of its own, exit 1 if any.

    Like a test runner: the check ran and found something (1); a path that does not exist is
    a usage error (2).
    """
    # The rules and quantities load pandas and pydantic: not at the CLI's start-up.
    from ..analysis.cases import run_cases
    from ..derive.quantities import label_of, quantity_names, unit_of
    from ..rules_engine.loader import check_rules, rule_files

    for path in [*check, *test]:
        if not path.exists():
            raise NcuAdviseError(f"{path}: no such rule file or folder")
    if quantities:
        width = max(len(n) for n in quantity_names())
        for name in quantity_names():
            typer.echo(f"{name:<{width}}  {unit_of(name) or '-':<16} {label_of(name)}")
    problems: list[str] = []
    for folder in check:
        rules, found = check_rules([folder])
        problems += found
        if not found:
            count = 1 if folder.is_file() else len(rule_files(folder))
            typer.echo(f"{folder}: {count} rule file(s) OK")
    failed = 0
    for folder in test:
        results, found = run_cases(folder)
        problems += found
        for result in results:
            typer.echo(str(result))
            failed += result.problem is not None
        if not found:
            typer.echo(f"{folder}: {len(results) - failed} of {len(results)} case(s) passed")
    if problems or failed:
        from ..render.formats import safe_text

        for line in problems:
            for part in line.splitlines():
                typer.echo(f"ncu-advise: {safe_text(part)}", err=True)
        summary = [f"{len(problems)} problem(s) in rule files" if problems else "",
                   f"{failed} rule case(s) failed" if failed else ""]
        typer.echo(f"ncu-advise: error: {', '.join(s for s in summary if s)}", err=True)
        raise typer.Exit(1)


def rules_cmd(
    rule_id: Annotated[str | None, typer.Argument(help="Show one rule in full.")] = None,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="Extra rule files or folders of them (repeatable).")] = None,
    format: Annotated[OutputFormat, typer.Option(
        "--format", "-f", help="text or json.", case_sensitive=False)] = OutputFormat.text,
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
    from ..derive.quantities import metrics_of
    from ..rules_engine.loader import load_rules
    from ..rules_engine.schema import describe

    if quantities or check or test:
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
                  + (f" against {e.target:g}" if isinstance(e.target, float | int)
                     else f" against {e.target}" if e.target else "")
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
        # The title wraps under itself rather than being cut at the edge.
        typer.echo("\n".join(textwrap.wrap(line, max(columns, width + 40),
                                            subsequent_indent=" " * (width + 17))))
    typer.echo(f"\n{len(loaded)} rules; `ncu-advise rules ID` shows one in full.")
