"""The rule file schema: every file in ``rules/`` is validated against these models on load.

A rule is data: which quantities it needs, a condition in a small structured grammar
(comparisons combined with ``all``/``any``/``not``; never ``eval``), severity steps, how it
estimates the saving, and its text. A rule that cannot be written as data names a Python
function registered in :mod:`ncu_advisor.rules_engine.functions`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..checklist import CATEGORIES
from ..derive.quantities import known

SEVERITIES = ("high", "medium", "low", "info")
_OPS = ("lt", "le", "gt", "ge", "eq", "ne")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_quantity(name: str) -> str:
    if not known(name):
        raise ValueError(f"unknown quantity {name!r} (see ncu_advisor/derive/quantities.py)")
    return name


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

    @field_validator("q")
    @classmethod
    def _known(cls, v: str) -> str:
        return _check_quantity(v)

    @model_validator(mode="after")
    def _one_op(self) -> Comparison:
        ops = [op for op in _OPS if getattr(self, op) is not None]
        if len(ops) != 1:
            raise ValueError(f"a comparison needs exactly one of {', '.join(_OPS)}")
        rhs = getattr(self, ops[0])
        if isinstance(rhs, str):
            _check_quantity(rhs)
        return self

    @property
    def op(self) -> str:
        """The comparison operator's name."""
        return next(op for op in _OPS if getattr(self, op) is not None)

    def quantities(self) -> set[str]:
        """Quantities this comparison reads."""
        rhs = getattr(self, self.op)
        return {self.q} | ({rhs} if isinstance(rhs, str) else set())


class All(_Strict):
    """Every sub-condition holds."""

    all: list[Condition]

    def quantities(self) -> set[str]:
        """Quantities the condition reads."""
        return set().union(*(c.quantities() for c in self.all))


class Any_(_Strict):
    """At least one sub-condition holds."""

    any: list[Condition]

    def quantities(self) -> set[str]:
        """Quantities the condition reads."""
        return set().union(*(c.quantities() for c in self.any))


class Not(_Strict):
    """The sub-condition does not hold."""

    not_: Condition = Field(alias="not")

    def quantities(self) -> set[str]:
        """Quantities the condition reads."""
        return self.not_.quantities()


Condition = Annotated[Comparison | All | Any_ | Not, Field(union_mode="left_to_right")]
All.model_rebuild()
Any_.model_rebuild()
Not.model_rebuild()


class SeverityStep(_Strict):
    """The first step whose condition holds gives the severity."""

    level: Literal["high", "medium", "low", "info"]
    when: Condition | None = None


class Estimate(_Strict):
    """How much of the kernel's time fixing the finding could save, in percent.

    Methods:
      * ``shortfall``: ``(1 - q / target)`` (bytes used of 32 per sector, threads of 32 ...);
      * ``excess``: ``(1 - target / q)`` (q is a multiple of what is needed, e.g. passes);
      * ``quantity``: the quantity itself is a percentage of time (``q`` / 100);
      * ``fixed``: ``value`` percent.
    The result is multiplied by ``scale / 100`` when ``scale`` names a utilization quantity
    (the share of time the affected unit is the limiter), and clipped to 0..``cap``.

    """

    method: Literal["shortfall", "excess", "quantity", "fixed"]
    quantity: str | None = None
    target: float | None = None
    value: float | None = None
    scale: str | None = None
    cap: float = 90.0

    @model_validator(mode="after")
    def _fields(self) -> Estimate:
        if self.method in ("shortfall", "excess", "quantity") and not self.quantity:
            raise ValueError(f"estimate method {self.method!r} needs 'quantity'")
        if self.method in ("shortfall", "excess") and not self.target:
            raise ValueError(f"estimate method {self.method!r} needs 'target'")
        if self.method == "fixed" and self.value is None:
            raise ValueError("estimate method 'fixed' needs 'value'")
        for name in (self.quantity, self.scale):
            if name:
                _check_quantity(name)
        return self


class Rule(_Strict):
    """One rule file."""

    id: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9.-]+$")
    category: Literal[CATEGORIES]  # type: ignore[valid-type]
    title: str
    scope: Literal["kernel", "application"] = "kernel"
    confidence: Literal["high", "medium", "low"]
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
    def _condition_or_function(self) -> Rule:
        if (self.when is None) == (self.function is None):
            raise ValueError("a rule needs exactly one of 'when' (data) or 'function' (Python)")
        if self.severity[-1].when is not None:
            raise ValueError("the last severity step must have no 'when' (the default)")
        return self

    def quantities(self) -> set[str]:
        """Every quantity the rule reads."""
        names = set(self.requires) | set(self.evidence)
        if self.when is not None:
            names |= self.when.quantities()
        for step in self.severity:
            if step.when is not None:
                names |= step.when.quantities()
        if self.estimate:
            names |= {n for n in (self.estimate.quantity, self.estimate.scale) if n}
        return names


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
