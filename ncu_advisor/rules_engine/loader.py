"""Load rule files (TOML) from the shipped ``rules/`` folder and from user folders."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from ..errors import RuleDefinitionError
from .schema import Rule


def builtin_rules_dir() -> Path:
    """Return the shipped rules folder (inside the wheel, or the repo's top-level ``rules/``)."""
    packaged = resources.files("ncu_advisor") / "_rules"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


def load_rule_file(path: Path) -> Rule:
    """Parse and validate one rule file; errors name the file and the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleDefinitionError(f"{path}: cannot read rule file ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise RuleDefinitionError(f"{path}: invalid TOML ({exc})") from None
    try:
        rule = Rule.model_validate(data)
    except ValidationError as exc:
        problems = [f"field {'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}"
                    for e in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise RuleDefinitionError(f"{path}: {'; '.join(problems)}{more}") from None
    if path.stem != rule.id:
        raise RuleDefinitionError(f"{path}: field id: {rule.id!r} must match the file name")
    if rule.function is not None:
        from .functions import FUNCTIONS

        if rule.function not in FUNCTIONS:
            raise RuleDefinitionError(
                f"{path}: field function: unknown function {rule.function!r} "
                f"(known: {', '.join(sorted(FUNCTIONS))})")
    return rule


def load_rules(extra_dirs: list[Path] | None = None, builtin: bool = True) -> list[Rule]:
    """Load the built-in rules plus every ``*.toml`` in ``extra_dirs``; ids must be unique."""
    dirs = ([builtin_rules_dir()] if builtin else []) + list(extra_dirs or [])
    rules: dict[str, Rule] = {}
    for folder in dirs:
        if not folder.is_dir():
            raise RuleDefinitionError(f"{folder}: rules folder does not exist")
        for path in sorted(folder.glob("*.toml")):
            rule = load_rule_file(path)
            if rule.id in rules and folder != dirs[0]:
                # A user folder may override a built-in rule of the same id on purpose.
                pass
            rules[rule.id] = rule
    return list(rules.values())
