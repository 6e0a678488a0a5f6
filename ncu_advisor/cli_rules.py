"""``ncu-advise rules --check DIR / --test DIR / --quantities``: tools for rule authors."""

from __future__ import annotations

from pathlib import Path

import typer

from .derive.quantities import label_of, quantity_names, unit_of
from .errors import RuleDefinitionError
from .rules_engine.cases import run_cases
from .rules_engine.loader import check_rules, rule_files


def rules_tools(check: list[Path], test: list[Path], quantities: bool) -> None:
    """Run the rule-author tools; raise RuleDefinitionError (exit 2) listing every problem."""
    if quantities:
        width = max(len(n) for n in quantity_names())
        for name in quantity_names():
            typer.echo(f"{name:<{width}}  {unit_of(name) or '-':<16} {label_of(name)}")
    problems: list[str] = []
    for folder in check:
        rules, found = check_rules([folder])
        problems += found
        if not found:
            typer.echo(f"{folder}: {len(rule_files(folder))} rule file(s) OK")
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
        lines = problems + ([f"{failed} rule case(s) failed"] if failed else [])
        raise RuleDefinitionError(f"{len(lines)} problem(s):\n" + "\n".join(lines))
