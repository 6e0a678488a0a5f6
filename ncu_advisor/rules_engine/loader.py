"""Load rule files (TOML) from the shipped ``rules/`` folder and from user folders.

Every problem of every file is collected before anything fails (``ncu-advise rules --check``
shows them all at once): TOML syntax, fields, condition forms, quantity and placeholder names
(with "did you mean"), id / category / file-name agreement, and duplicate ids. Test cases of a
rule (``RULE.cases.toml``) sit beside it and are not rules.
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from ..errors import RuleDefinitionError
from .functions import FUNCTION_VALUES, FUNCTIONS
from .schema import CONDITION_TAGS, Rule, cross_checks, did_you_mean

CASES_SUFFIX = ".cases.toml"


def builtin_rules_dir() -> Path:
    """Return the shipped rules folder (inside the wheel, or the repo's top-level ``rules/``)."""
    packaged = resources.files("ncu_advisor") / "_rules"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


def rule_files(folder: Path) -> list[Path]:
    """The rule files of a folder (its ``*.toml`` except test cases), sorted."""
    # Regular files only: a FIFO named like a rule would block the read for ever.
    return sorted(p for p in folder.glob("*.toml")
                  if not p.name.endswith(CASES_SUFFIX) and p.is_file())


def _field_error(error: dict) -> str:
    loc = [str(p) for p in error["loc"] if p not in CONDITION_TAGS]
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        fields = set(Rule.model_fields) | {"not"}
        msg = f"unknown field{did_you_mean(loc[-1], fields) if loc else ''}"
    elif error["type"] == "missing":
        msg = "missing (required)"
    if msg.startswith("field "):  # a check across fields names its own field
        return msg
    return f"field {'.'.join(loc)}: {msg}" if loc else msg


# Bounds on what a rule file may ask for: a condition nested deeper than any rule needs (the
# validators recurse), and a format width that would build a string of gigabytes.
MAX_DEPTH = 32
MAX_FORMAT_NUMBER = 64
_FORMAT_FIELD = re.compile(r"\{[a-z0-9_]+:([^{}]*)\}")


def _depth(value, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _bounded(data: dict) -> list[str]:
    """What a rule file asks for beyond the bounds (checked before validation)."""
    problems = []
    if _depth(data) > MAX_DEPTH:
        problems.append(f"nested more than {MAX_DEPTH} levels deep (conditions combine at most "
                        "a few all/any)")
    for name in ("title", "explanation", "fix", "notes"):
        text = data.get(name)
        if not isinstance(text, str):
            continue
        for spec in _FORMAT_FIELD.findall(text):
            if any(int(n) > MAX_FORMAT_NUMBER for n in re.findall(r"\d+", spec)):
                problems.append(f"field {name}: format {{...:{spec}}} asks for more than "
                                f"{MAX_FORMAT_NUMBER} characters or digits")
    return problems


def check_rule_file(path: Path) -> tuple[Rule | None, list[str]]:
    """Parse and validate one rule file: the rule (None if invalid) and every problem found."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"cannot read rule file ({exc})"]
    except tomllib.TOMLDecodeError as exc:
        return None, [f"invalid TOML ({exc})"]
    except RecursionError:  # the TOML parser recurses into nested inline tables
        return None, [f"nested more than {MAX_DEPTH} levels deep (conditions combine at most "
                      "a few all/any)"]
    problems: list[str] = _bounded(data)
    if problems:
        return None, problems
    rule = None
    function = data.get("function")
    # A function rule's severity and confidence steps may read the values it computes.
    context = {"function_values": FUNCTION_VALUES.get(function, set())
               if isinstance(function, str) else set()}
    try:
        rule = Rule.model_validate(data, context=context)
    except ValidationError as exc:
        problems += [_field_error(e) for e in exc.errors() if e["loc"]]
    problems += cross_checks(data, FUNCTION_VALUES.get(function, set()) if function else None)
    if isinstance(data.get("id"), str) and path.stem != data["id"]:
        problems.append(f"field id: {data['id']!r} must match the file name "
                        f"(rename the file to {data['id']}.toml)")
    if isinstance(function, str) and function not in FUNCTIONS:
        problems.append(f"field function: unknown function {function!r}"
                        f"{did_you_mean(function, FUNCTIONS)} (known: "
                        f"{', '.join(sorted(FUNCTIONS))})")
    problems = list(dict.fromkeys(problems))
    return (rule if not problems else None), problems


def load_rule_file(path: Path) -> Rule:
    """Parse and validate one rule file; the error names the file and every bad field."""
    rule, problems = check_rule_file(path)
    if problems:
        raise RuleDefinitionError("\n".join(f"{path}: {p}" for p in problems))
    assert rule is not None
    return rule


def _checked(path: Path) -> tuple[Rule | None, list[str]]:
    """:func:`check_rule_file`, parsed again only when the file's bytes changed.

    Every analysis loads the rules; parsing and validating the TOML each time cost ~15 ms a
    call. Rules are frozen, so one parsed rule can serve every load.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return check_rule_file(path)
    rule, found = _checked_bytes(path, data)
    return rule, list(found)


@lru_cache(maxsize=256)
def _checked_bytes(path: Path, data: bytes) -> tuple[Rule | None, tuple[str, ...]]:
    rule, found = check_rule_file(path)
    return rule, tuple(found)


def check_rules(extra_dirs: list[Path] | None = None, builtin: bool = True,
                ) -> tuple[list[Rule], list[str]]:
    """Load the built-in rules plus every rule file of ``extra_dirs``; every problem found.

    Problems read ``PATH: message``. An id may be defined once: a user rule with a built-in
    rule's id is an error (give yours its own id), never a silent replacement.
    """
    home = builtin_rules_dir().resolve()
    extra = [d for d in extra_dirs or [] if not (builtin and d.resolve() == home)]
    dirs = ([builtin_rules_dir()] if builtin else []) + extra
    rules: list[Rule] = []
    where: dict[str, Path] = {}
    problems: list[str] = []
    for folder in dirs:
        if folder.is_file():  # one rule file, e.g. --rules my.rule.toml
            paths = [folder]
        elif folder.is_dir():
            paths = rule_files(folder)
        else:
            problems.append(f"{folder}: no such rule file or folder")
            continue
        for path in paths:
            rule, found = _checked(path)
            problems += [f"{path}: {p}" for p in found]
            if rule is None:
                continue
            if rule.id in where:
                problems.append(f"{path}: field id: {rule.id!r} is already defined by "
                                f"{where[rule.id]}; give this rule its own id")
                continue
            where[rule.id] = path
            rules.append(rule)
    return rules, problems


def load_rules(extra_dirs: list[Path] | None = None, builtin: bool = True) -> list[Rule]:
    """Load the built-in rules plus every rule file in ``extra_dirs``; ids must be unique."""
    rules, problems = check_rules(extra_dirs, builtin)
    if problems:
        raise RuleDefinitionError("\n".join(problems))
    return rules
