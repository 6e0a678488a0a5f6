"""Findings and not-evaluated entries: what they hold, and the one place that builds them.

This module is also the small public API of function rules
(:mod:`ncu_advisor.rules_engine.functions`): they find the cases, and hand each to
:func:`make_finding` with the values its texts and severity steps read.
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from ..checklist import CONFIDENCES, SEVERITY_RANK
from ..derive.quantities import label_of, metrics_of, unit_of
from ..json_text import strict
from .conditions import holds
from .schema import Rule

CONFIDENCE_STEPS = CONFIDENCES
__all__ = ["CONFIDENCE_STEPS", "SEVERITY_RANK"]  # re-exported: where findings are built
# How much of an estimated saving counts when ranking: a saving we are less sure of is worth
# less (a medium-confidence 10% ranks with a high-confidence 7%).
CONFIDENCE_WEIGHT = {"high": 1.0, "medium": 0.7, "low": 0.4}


def lower_confidence(confidence: str) -> str:
    """One step less sure (low stays low)."""
    i = CONFIDENCE_STEPS.index(confidence)
    return CONFIDENCE_STEPS[min(i + 1, len(CONFIDENCE_STEPS) - 1)]


def cap_severity(severity: str, cap: str) -> str:
    """The milder of two severities."""
    return severity if SEVERITY_RANK[severity] >= SEVERITY_RANK[cap] else cap


def launch_times(launches) -> dict[int, float]:
    """Each launch row's GPU time over all the invocations it stands for.

    A per-kernel summary row or a census-weighted launch stands for several launches; a
    finding's saving is a share of this time (the ranking and the actions do not multiply
    it again).
    """
    calls = launches["invocations"].fillna(1) if "invocations" in launches else 1
    return dict(zip(launches["launch"].astype(int).tolist(),
                    (launches["duration_ns"] * calls).tolist(), strict=True))


def weighted_saving(saving_ns: float | None, confidence: str) -> float | None:
    """An estimated saving weighted by how sure we are of it (None without an estimate)."""
    if saving_ns is None or (isinstance(saving_ns, float) and math.isnan(saving_ns)):
        return None
    return saving_ns * CONFIDENCE_WEIGHT.get(confidence, 1.0)


class Evidence(Mapping):
    """A finding's evidence: quantity name -> ``{"value", "unit", "label"}``.

    Stored as the rule's evidence names (one tuple shared by all its findings) and this
    finding's values; each entry's dict is built when read. A dict of dicts was ~1 KB a
    finding, ~130 MB for the 125,000 findings of a 1 GB export.
    """

    __slots__ = ("_names", "_values")

    def __init__(self, names: tuple[str, ...], values: tuple[float, ...]) -> None:
        self._names, self._values = names, values  # NaN: not measured, not listed

    def __getitem__(self, name: str) -> dict:
        for known, value in zip(self._names, self._values, strict=True):
            if known == name and value == value:
                return {"value": value, "unit": unit_of(name), "label": label_of(name)}
        raise KeyError(name)

    def __iter__(self):
        return (name for name, value in zip(self._names, self._values, strict=True)
                if value == value)

    def __len__(self) -> int:
        return sum(value == value for value in self._values)

    def __repr__(self) -> str:
        return f"Evidence({dict(self.items())!r})"


@dataclass(frozen=True, slots=True)
class RuleTexts:
    """A rule's title, advice and explanation templates, and the values their fields read.

    One per rule: a finding keeps this and its values of ``names``, and its texts are filled
    when read. Filled texts were ~400 bytes a finding (~50 MB for the 125,000 findings of a
    1 GB export), the largest part of a finding.
    """

    title: str
    advice: str
    explanation: str
    names: tuple[str, ...]

    def fill(self, template: str, values: tuple) -> str:
        """``template`` (one of this rule's) filled with a finding's values of ``names``."""
        return fill_template(template, dict(zip(self.names, values, strict=True)))


@lru_cache(maxsize=512)
def rule_texts(title: str, advice: str, explanation: str) -> RuleTexts:
    """The shared :class:`RuleTexts` of one rule's three (stripped) templates."""
    names = tuple(dict.fromkeys(m.group(1) for text in (title, advice, explanation)
                                for m in _FIELD.finditer(text)))
    return RuleTexts(title, advice, explanation, names)


_NO_TEXTS = RuleTexts("", "", "", ())


class _FilledText:
    """A finding's text: the one set on it, else its rule's template filled when read."""

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.slot, self.__doc__ = name, "_" + name, doc

    def __get__(self, finding, owner=None):
        if finding is None:
            return self
        text = getattr(finding, self.slot)
        if text is not None:
            return text
        texts = finding._texts
        return texts.fill(getattr(texts, self.name), finding._text_values)

    def __set__(self, finding, text: str) -> None:
        setattr(finding, self.slot, text)


class Finding:
    """One piece of advice about one launch (or the application).

    ``title``, ``advice`` and ``explanation`` are strings to every reader; a finding built
    from a rule holds the rule's :class:`RuleTexts` and fills them when read, until one is
    set (the origin policy replaces a library kernel's advice). No per-finding ``__dict__``
    and empty lists shared as ``()``: reports hold 100,000s of findings.
    """

    # The JSON entry's fields, in order (``launch`` is where the entry sits, not a field).
    FIELDS = ("rule", "category", "severity", "confidence", "title", "evidence", "advice",
              "explanation", "estimated_speedup_pct", "estimated_saving_ns", "demo",
              "references", "kernel_ids", "launch_ids", "evidence_source", "origin", "note",
              "source_lines", "source_cause", "collect_with")

    __slots__ = ("rule", "category", "severity", "confidence", "evidence",
                 "estimated_speedup_pct", "estimated_saving_ns", "demo", "references",
                 "launch", "kernel_ids", "launch_ids", "evidence_source", "origin", "note",
                 "source_lines", "source_cause", "collect_with",
                 "_texts", "_text_values", "_title", "_advice", "_explanation")

    def __init__(self, rule: str, category: str, severity: str, confidence: str,
                 title: str | None = None, evidence: Mapping[str, dict] | None = None,
                 advice: str | None = None, explanation: str | None = None,
                 estimated_speedup_pct: float | None = None,
                 estimated_saving_ns: float | None = None, demo: str | None = None,
                 references: tuple[str, ...] | list[str] = (), launch: int | None = None,
                 kernel_ids: tuple[int, ...] | list[int] = (),
                 launch_ids: tuple[int, ...] | list[int] = (),
                 evidence_source: str = "metrics", origin: str | None = None,
                 note: str | None = None, source_lines: tuple | list = (),
                 source_cause: str | None = None, collect_with: str | None = None,
                 texts: RuleTexts = _NO_TEXTS, text_values: tuple = ()) -> None:
        self.rule, self.category = rule, category
        self.severity, self.confidence = severity, confidence
        self.evidence = {} if evidence is None else evidence  # a dict, or an Evidence
        self.estimated_speedup_pct = estimated_speedup_pct
        self.estimated_saving_ns = estimated_saving_ns
        self.demo, self.references, self.launch = demo, references, launch
        self.kernel_ids, self.launch_ids = kernel_ids, launch_ids  # application findings
        # Where the evidence came from: "metrics", "ncu-rule" (values stated by Nsight
        # Compute's rule messages, as on a details-page export) or "both" (metrics, and an
        # ncu rule of the same category fired on the launch).
        self.evidence_source = evidence_source
        self.origin = origin  # whose kernel (user, cublas, pytorch, ...)
        self.note = note  # why severity or advice were adjusted (library kernel, short launch)
        # Findings that live on lines: the top source lines of the cause
        # (derive/source_lines.py), or how to collect source-level counters.
        self.source_lines, self.source_cause = source_lines, source_cause
        self.collect_with = collect_with
        self._texts, self._text_values = texts, text_values
        self._title, self._advice, self._explanation = title, advice, explanation

    title = _FilledText("title", "One line: what is wrong, with the numbers.")
    advice = _FilledText("advice", "What to change.")
    explanation = _FilledText("explanation", "Why it costs time.")

    def to_dict(self) -> dict:
        """Return the JSON form (contract field names; lists, plain dicts, NaN as None)."""
        return {"launch": self.launch, **strict(
            {name: getattr(self, name) for name in self.FIELDS})}

    def __eq__(self, other) -> bool:
        if not isinstance(other, Finding):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # mutable, as the dataclass it replaced

    def __repr__(self) -> str:
        return f"Finding({self.rule!r}, launch={self.launch!r}, severity={self.severity!r})"


@dataclass
class NotEvaluated:
    """A rule that could not run on a launch because metrics are missing."""

    rule: str
    category: str
    missing: list[str]
    collect_with: str
    launch: int | None = None

    def to_dict(self) -> dict:
        """Return the JSON form."""
        return asdict(self)


class NotEvaluatedList(Sequence):
    """Not-evaluated entries in the order they were found, each distinct entry held once.

    A rule lacking a metric a details page or text output leaves out lacks it on nearly every
    launch: one :class:`NotEvaluated` per (rule, launch) was ~11 objects a launch, 670 MB for
    the 66,798 launches of 1 GB of text. Here each distinct (rule, category, missing metrics,
    how to collect them) is one entry without a launch (a *kind*), and each (launch, kind) two
    integers; a :class:`NotEvaluated` is made when read. Reads as a list of them.
    """

    _APPLICATION = -1  # the launch of an entry about the application (``launch`` None)

    def __init__(self, entries: Iterable[NotEvaluated] = ()) -> None:
        self._kinds: list[NotEvaluated] = []  # launch None
        self._kind_index: dict[tuple, int] = {}
        self._launch = array("q")  # per entry: its launch, or _APPLICATION
        self._kind = array("i")  # per entry: its kind's index in _kinds
        self.extend(entries)

    def add(self, entry: NotEvaluated, launch: int | None) -> None:
        """Add ``entry`` (its ``launch`` ignored) as found on ``launch`` (None: the application)."""
        self._launch.append(self._APPLICATION if launch is None else launch)
        self._kind.append(self._kind_of(entry))

    def extend(self, entries: Iterable[NotEvaluated]) -> None:
        """Add entries, each on its own ``launch``."""
        for entry in entries:
            self.add(entry, entry.launch)

    def _kind_of(self, entry: NotEvaluated) -> int:
        key = (entry.rule, entry.category, tuple(entry.missing), entry.collect_with)
        index = self._kind_index.get(key)
        if index is None:
            index = self._kind_index[key] = len(self._kinds)
            self._kinds.append(NotEvaluated(entry.rule, entry.category, list(entry.missing),
                                            entry.collect_with))
        return index

    def _entry(self, launch: int, kind: int) -> NotEvaluated:
        k = self._kinds[kind]  # a list of its own: a reader may change what it is given
        return NotEvaluated(k.rule, k.category, list(k.missing), k.collect_with,
                            None if launch == self._APPLICATION else launch)

    def distinct(self) -> list[NotEvaluated]:
        """Each distinct entry once, without a launch (what a summary of them reads)."""
        used = dict.fromkeys(self._kind)
        return [self._entry(self._APPLICATION, kind) for kind in used]

    def launches(self) -> np.ndarray:
        """Each entry's launch (-1 for the application), in order."""
        return np.array(self._launch, dtype=np.int64)

    def relabel(self, rows: np.ndarray, change: Callable[[NotEvaluated], NotEvaluated]) -> None:
        """Replace the entries at ``rows`` (a mask over :meth:`launches`) by ``change(entry)``.

        ``change`` is called once per distinct entry among them.
        """
        kinds = np.array(self._kind, dtype=np.int32)
        chosen = kinds[rows]
        to = np.arange(len(self._kinds))
        for kind in np.unique(chosen).tolist():
            to[kind] = self._kind_of(change(self._entry(self._APPLICATION, kind)))
        kinds[rows] = to[chosen]
        self._kind = array("i", kinds.tobytes())

    def by_launch(self) -> Callable[[int | None], list[NotEvaluated]]:
        """A function giving one launch's entries in order (None: the application's).

        An index of two integer arrays: a list per launch held every entry at once.
        """
        launches = self.launches()
        order = np.argsort(launches, kind="stable")
        keys = launches[order]
        kinds = np.array(self._kind, dtype=np.int64)[order]

        def of(launch: int | None) -> list[NotEvaluated]:
            key = self._APPLICATION if launch is None else launch
            lo, hi = np.searchsorted(keys, [key, key + 1])
            return [self._entry(key, kind) for kind in kinds[lo:hi].tolist()]
        return of

    def __len__(self) -> int:
        return len(self._launch)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._entry(self._launch[i], self._kind[i])

    def __iter__(self):
        for launch, kind in zip(self._launch, self._kind, strict=True):
            yield self._entry(launch, kind)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # mutable, as the list it replaced

    def __repr__(self) -> str:
        return f"NotEvaluatedList({len(self)} entries, {len(self._kinds)} distinct)"


@lru_cache(maxsize=1)
def metric_sections() -> dict[str, tuple[str, str]]:
    """Metric -> (ncu section, smallest set that holds it), from data/metric_sections.csv."""
    path = resources.files("ncu_advisor").joinpath("data/metric_sections.csv")
    with path.open("r") as fh:
        return {row["metric"]: (row["section"], row["set"]) for row in csv.DictReader(fh)}


def collect_with(metrics: list[str]) -> str:
    """Say how to collect metrics: the ncu section (and the smallest set) or ``--metrics``."""
    table = metric_sections()
    parts, loose = [], []
    for metric in metrics:
        if metric in table:
            section, set_name = table[metric]
            text = f"--section {section}" + (f" (in --set {set_name})" if set_name else "")
            if text not in parts:
                parts.append(text)
        else:
            loose.append(metric)
    if loose:
        parts.append("--metrics " + ",".join(loose))
    return "; ".join(parts)


_FIELD = re.compile(r"\{([a-z0-9_]+)(?::([^{}]*))?\}")


def fill_template(template: str, values: Mapping[str, float]) -> str:
    """Fill ``{quantity:.1f}`` fields; only plain quantity names are allowed (no attributes).

    A field whose value is missing reads ``n/a``; the rule checker rejects unknown names, so
    that means "not measured", never a typo.
    """
    def sub(match: re.Match) -> str:
        name, spec = match.group(1), match.group(2) or ".3g"
        value = values.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)
    return _FIELD.sub(sub, template)


def evidence_of(names: list[str] | tuple[str, ...],
                values: Mapping[str, float]) -> Evidence:
    """Evidence entries: value, unit and label of each quantity present."""
    names = _shared(tuple(dict.fromkeys(names)))
    numbers = []
    for name in names:
        value = values.get(name, np.nan)
        numbers.append(np.nan if value is None else float(value))
    return Evidence(names, tuple(numbers))


@lru_cache(maxsize=512)
def _shared(names: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple object per rule's names (evidence, references), however many findings."""
    return names


def severity_of(rule: Rule, values: Mapping[str, float]) -> str:
    """The first severity step of the rule file that holds for ``values``."""
    return next(s.level for s in rule.severity if s.when is None or holds(s.when, values))


def confidence_of(rule: Rule, values: Mapping[str, float]) -> str:
    """The first confidence step of the rule file that holds for ``values``, else its own."""
    return next((s.level for s in rule.confidence_steps if holds(s.when, values)),
                rule.confidence)


def not_evaluated(rule: Rule, launch: int | None, missing_quantities: list[str]) -> NotEvaluated:
    """Say which metrics a rule lacked (on one launch, or the application) and how to get them."""
    metrics = list(dict.fromkeys(m for q in missing_quantities for m in metrics_of(q)))
    return NotEvaluated(rule.id, rule.category, metrics, collect_with(metrics), launch)


@lru_cache(maxsize=512)
def _stripped(text: str) -> str:
    """A rule text without its surrounding blank lines, one object per text.

    A text without fields then stays one string shared by all its findings (a copy per
    finding was ~0.3 KB each on reports of 100,000 findings).
    """
    return text.strip()


def make_finding(rule: Rule, values: Mapping[str, float], *, severity: str | None = None,
                 confidence: str | None = None, launch: int | None = None,
                 speedup_pct: float | None = None, duration_ns: float = float("nan"),
                 evidence: dict[str, dict] | None = None, title_prefix: str = "",
                 title_suffix: str = "", kernel_ids: list[int] | None = None,
                 launch_ids: list[int] | None = None,
                 evidence_source: str = "metrics") -> Finding:
    """Build a finding of ``rule`` from the values its texts, severity and evidence read.

    Severity and confidence come from the rule file's steps unless given; the saving is
    ``speedup_pct`` of ``duration_ns``. ``evidence`` comes before the rule's own evidence
    quantities.
    """
    saving = (speedup_pct / 100.0 * duration_ns
              if speedup_pct is not None and not np.isnan(duration_ns) else None)
    if saving is not None and not saving >= 0:  # a saving is never negative
        saving = None
    texts = _texts_of(rule)
    title = None  # filled from the rule's template when read
    if title_prefix or title_suffix:
        title = title_prefix + fill_template(rule.title, values) + title_suffix
    return Finding(
        rule=rule.id, category=rule.category,
        severity=severity if severity is not None else severity_of(rule, values),
        confidence=confidence if confidence is not None else confidence_of(rule, values),
        evidence_source=evidence_source, title=title,
        evidence=({**evidence, **evidence_of(rule.evidence, values)} if evidence
                  else evidence_of(rule.evidence, values)),
        estimated_speedup_pct=speedup_pct, estimated_saving_ns=saving, demo=rule.demo,
        references=_shared(tuple(rule.references)), launch=launch,
        # Lists where given (application findings, a few); one shared () where empty.
        kernel_ids=list(kernel_ids) if kernel_ids else (),
        launch_ids=list(launch_ids) if launch_ids else (),
        texts=texts, text_values=tuple(values.get(name) for name in texts.names),
    )


def _texts_of(rule: Rule) -> RuleTexts:
    return rule_texts(rule.title, _stripped(rule.fix), _stripped(rule.explanation))

