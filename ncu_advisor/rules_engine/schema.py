"""The rule file schema: every file in ``rules/`` is validated against these models on load.

A rule is data: which quantities it needs, a condition in a small structured grammar
(comparisons combined with ``all``/``any``/``not``; never ``eval``), severity steps, how it
estimates the saving, and its text. A rule that cannot be written as data names a Python
function registered in :mod:`ncu_advisor.rules_engine.functions`.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..checklist import CATEGORIES, CONFIDENCES, SEVERITIES
from ..derive.quantities import known, quantity_names

_OPS = ("lt", "le", "gt", "ge", "eq", "ne")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def did_you_mean(name: str, choices) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def _function_values(info: ValidationInfo | None) -> set[str]:
    """Names a function rule's conditions may use besides quantities (the loader's context)."""
    context = info.context if info is not None else None
    return set(context.get("function_values", ())) if isinstance(context, dict) else set()


def _check_quantity(name: str, info: ValidationInfo | None = None) -> str:
    if not known(name) and name not in _function_values(info):
        raise ValueError(f"unknown quantity {name!r}{did_you_mean(name, quantity_names())}; "
                         "`ncu-advise rules --quantities` lists them")
    return name


_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.]+)(?::[^{}]*)?\}")


def placeholders(text: str) -> list[str]:
    """The ``{name}`` / ``{name:.1f}`` fields of a rule's title or text."""
    return _PLACEHOLDER.findall(text)


class Comparison(_Strict):
    """``{q = "global_ld_bytes_per_sector", lt = 16}``; the right side may name a quantity.

    ``times`` scales the right side: ``{q = "a", gt = "b", times = 2}`` means a > 2 b.
    """

    q: str
    lt: float | str | None = None
    le: float | str | None = None
    gt: float | str | None = None
    ge: float | str | None = None
    eq: float | str | None = None
    ne: float | str | None = None
    times: float = 1.0

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data, info: ValidationInfo):
        if not isinstance(data, dict):
            return data
        problems = []  # every mistake of this comparison in one message
        allowed = {"q", "times", *_OPS}
        for key in data:
            if key not in allowed:
                problems.append(
                    f"unknown operator {key!r}{did_you_mean(key, _OPS)}; write "
                    f"{{ q = QUANTITY, OP = NUMBER or QUANTITY }} with OP one of "
                    f"{', '.join(_OPS)}")
        if "q" not in data:
            problems.append("a comparison needs q = \"QUANTITY\"")
        for key in ("q", *_OPS):
            name = data.get(key)
            if isinstance(name, str) and not known(name) and name not in _function_values(info):
                problems.append(f"unknown quantity {name!r}"
                                f"{did_you_mean(name, quantity_names())}; "
                                "`ncu-advise rules --quantities` lists them")
        if problems:
            raise ValueError("; ".join(problems))
        return data

    @field_validator("q")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        return _check_quantity(v, info)

    @model_validator(mode="after")
    def _one_op(self, info: ValidationInfo) -> Comparison:
        ops = [op for op in _OPS if getattr(self, op) is not None]
        if len(ops) != 1:
            raise ValueError(f"a comparison needs exactly one of {', '.join(_OPS)}")
        rhs = getattr(self, ops[0])
        if isinstance(rhs, str):
            _check_quantity(rhs, info)
        return self

    @property
    def op(self) -> str:
        """The comparison operator's name."""
        return next(op for op in _OPS if getattr(self, op) is not None)

    def quantities(self) -> set[str]:
        """Quantities this comparison reads."""
        rhs = getattr(self, self.op)
        return {self.q} | ({rhs} if isinstance(rhs, str) else set())

    def necessary(self) -> set[str]:
        """Quantities without which the condition cannot hold: both sides."""
        return self.quantities()


class All(_Strict):
    """Every sub-condition holds."""

    all: list[Condition]

    def quantities(self) -> set[str]:
        """Quantities the condition reads."""
        return set().union(*(c.quantities() for c in self.all))

    def necessary(self) -> set[str]:
        """Every part must hold: what any part needs."""
        return set().union(*(c.necessary() for c in self.all))


class Any_(_Strict):
    """At least one sub-condition holds."""

    any: list[Condition]

    def quantities(self) -> set[str]:
        """Quantities the condition reads."""
        return set().union(*(c.quantities() for c in self.any))

    def necessary(self) -> set[str]:
        """One part must hold: only what every alternative needs."""
        parts = [c.necessary() for c in self.any]
        return set.intersection(*parts) if parts else set()


class Not(_Strict):
    """The sub-condition does not hold."""

    not_: Condition = Field(alias="not")

    def quantities(self) -> set[str]:
        """Quantities the condition reads."""
        return self.not_.quantities()

    def necessary(self) -> set[str]:
        """Nothing: ``not`` of a missing comparison holds (the "unless we know" guard)."""
        return set()


# The tags pydantic adds to an error's location; error messages leave them out.
CONDITION_TAGS = ("comparison", "all-of", "any-of", "not-of")


def _condition_kind(value) -> str | None:
    """Which of the four condition forms a value is, from its keys (one error, not nine)."""
    if isinstance(value, dict):
        for key, tag in (("all", "all-of"), ("any", "any-of"), ("not", "not-of")):
            if key in value:
                return tag
        return "comparison" if {"q", *_OPS} & set(value) else None
    return {Comparison: "comparison", All: "all-of", Any_: "any-of", Not: "not-of"}.get(
        type(value))


Condition = Annotated[
    Annotated[Comparison, Tag("comparison")] | Annotated[All, Tag("all-of")]
    | Annotated[Any_, Tag("any-of")] | Annotated[Not, Tag("not-of")],
    Discriminator(_condition_kind, custom_error_type="condition",
                  custom_error_message="a condition is { q = QUANTITY, lt = 16 }, "
                                       "{ all = [...] }, { any = [...] } or { not = {...} }"),
]
All.model_rebuild()
Any_.model_rebuild()
Not.model_rebuild()


class SeverityStep(_Strict):
    """The first step whose condition holds gives the severity."""

    level: Literal[SEVERITIES]
    when: Condition | None = None


class ConfidenceStep(_Strict):
    """The first step whose condition holds gives the confidence; else the rule's own."""

    level: Literal[SEVERITIES[:3]]  # a step of the ladder; info is no step
    when: Condition


class Estimate(_Strict):
    """How much of the kernel's time fixing the finding could save, in percent.

    Methods:
      * ``shortfall``: ``(1 - q / target)`` (bytes used of 32 per sector, threads of 32 ...);
      * ``excess``: ``(1 - target / q)`` (q is a multiple of what is needed, e.g. passes);
        ``target`` is a number or names a quantity (``target = "max_warps_per_sm"``);
      * ``quantity``: the quantity itself is a percentage of time (``q`` / 100);
      * ``fixed``: ``value`` percent.
    The result is multiplied by ``scale / 100`` when ``scale`` names a utilization quantity
    (the share of time the affected unit is the limiter), then by ``factor`` (a calibration
    measured on before/after pairs, 1 unless the rule says why), and clipped to 0..``cap``.

    """

    method: Literal["shortfall", "excess", "quantity", "fixed"]
    quantity: str | None = None
    target: float | str | None = None
    value: float | None = None
    scale: str | None = None
    factor: float = 1.0
    cap: float = 90.0

    @model_validator(mode="after")
    def _fields(self) -> Estimate:
        if self.method in ("shortfall", "excess", "quantity") and not self.quantity:
            raise ValueError(f"estimate method {self.method!r} needs 'quantity'")
        if self.method in ("shortfall", "excess") and not self.target:
            raise ValueError(f"estimate method {self.method!r} needs 'target'")
        if self.method == "fixed" and self.value is None:
            raise ValueError("estimate method 'fixed' needs 'value'")
        for name in (self.quantity, self.scale, self.target_quantity):
            if name:
                _check_quantity(name)
        return self

    @property
    def target_quantity(self) -> str | None:
        """The quantity ``target`` names, or None when it is a number."""
        return self.target if isinstance(self.target, str) else None


class Rule(_Strict):
    """One rule file."""

    id: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9.-]+$")
    # A checklist category (CATEGORIES) or one of the user's own; the id starts with it.
    category: str = Field(pattern=r"^[a-z0-9-]+$")
    title: str
    # kernel: a condition judged on each launch; application: a function over all launches.
    scope: Literal["kernel", "application"] = "kernel"
    confidence: Literal[CONFIDENCES]
    # Where some findings are surer than others (a fusion chain inside one NVTX range).
    confidence_steps: list[ConfidenceStep] = Field(default_factory=list)
    # Quantities needed beyond those the condition itself needs (see ``needs``); rarely set.
    requires: list[str] = Field(default_factory=list)
    when: Condition | None = None
    function: str | None = None
    severity: list[SeverityStep] = Field(min_length=1)
    estimate: Estimate | None = None
    evidence: list[str] = Field(default_factory=list)
    explanation: str
    fix: str
    demo: str | None = None
    references: list[str] = Field(default_factory=list)
    # Documentation: why this signal and not another, known false positives.
    notes: str = ""

    @field_validator("requires", "evidence")
    @classmethod
    def _known_all(cls, v: list[str]) -> list[str]:
        return [_check_quantity(x) for x in v]

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        problems = cross_checks(self.model_dump(by_alias=True, exclude_none=True))
        if problems:
            raise ValueError(problems[0])
        return self

    @property
    def needs(self) -> list[str]:
        """The quantities without which the rule cannot be judged on a launch.

        Derived from the condition (what every way of satisfying it reads: ``all`` takes the
        union, ``any`` what its alternatives share, ``not`` nothing) plus ``requires``.
        Evidence, severity steps and the estimate only show what is present.
        """
        derived = sorted(self.when.necessary()) if self.when is not None else []
        return list(dict.fromkeys([*derived, *self.requires]))

    @property
    def is_checklist(self) -> bool:
        """Whether the category is one of the optimization checklist's."""
        return self.category in CATEGORIES

    def quantities(self) -> set[str]:
        """Every quantity the rule reads."""
        return self.verdict_quantities() | set(self.evidence)

    def verdict_quantities(self) -> set[str]:
        """The quantities that decide whether, how strongly and how much (evidence aside)."""
        names = set(self.requires)
        if self.when is not None:
            names |= self.when.quantities()
        for step in [*self.severity, *self.confidence_steps]:
            if step.when is not None:
                names |= step.when.quantities()
        if self.estimate:
            names |= {n for n in (self.estimate.quantity, self.estimate.scale,
                                  self.estimate.target_quantity) if n}
        return {n for n in names if known(n)}  # not a function rule's own values


def cross_checks(data: dict, function_values: set[str] | None = None) -> list[str]:
    """Problems across fields of a rule file's data (all of them, not the first).

    Run on the raw TOML data by the rule checker, so they are reported beside the field
    errors; ``function_values`` are the extra placeholders a function rule's texts may use
    (unchecked when None).
    """
    problems = []
    rule_id, category = data.get("id"), data.get("category")
    if ("when" in data) == ("function" in data):
        problems.append("field when: a rule needs exactly one of 'when' (data) or 'function' "
                        "(Python)")
    steps = data.get("severity")
    if isinstance(steps, list) and steps and isinstance(steps[-1], dict) and "when" in steps[-1]:
        problems.append("field severity: the last step must have no 'when' (the default)")
    if isinstance(rule_id, str) and isinstance(category, str):
        prefix = rule_id.split(".", 1)[0]
        if prefix != category:
            problems.append(f"field category: the id {rule_id!r} must start with its category "
                            f"'{category}.' (or set category = {prefix!r})")
    scope, function = data.get("scope", "kernel"), data.get("function")
    if function is not None and scope != "application":
        problems.append("field scope: a 'function' rule looks across launches: "
                        "scope = 'application'")
    if function is None and scope == "application":
        problems.append("field scope: a 'when' condition is judged per launch: scope = 'kernel' "
                        "(application-scope rules name a 'function')")
    allowed = set(quantity_names())
    if function is not None:
        if function_values is None:
            return problems
        allowed |= function_values
    for name in ("title", "explanation", "fix"):
        text = data.get(name)
        if not isinstance(text, str):
            continue
        for field in dict.fromkeys(placeholders(text)):
            if field not in allowed:
                problems.append(f"field {name}: unknown placeholder {{{field}}}"
                                f"{did_you_mean(field, allowed)}; placeholders are quantity "
                                "names (`ncu-advise rules --quantities`)")
    return problems


_OP_TEXT = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def describe(cond) -> str:
    """Write a condition the way a person reads it: ``all(a < 16, b >= 2 x c)``."""
    if isinstance(cond, All):
        return "all(" + ", ".join(describe(c) for c in cond.all) + ")"
    if isinstance(cond, Any_):
        return "any(" + ", ".join(describe(c) for c in cond.any) + ")"
    if isinstance(cond, Not):
        return "not " + describe(cond.not_)
    rhs = getattr(cond, cond.op)
    right = f"{cond.times:g} x {rhs}" if cond.times != 1 else f"{rhs}"
    return f"{cond.q} {_OP_TEXT[cond.op]} {right}"
