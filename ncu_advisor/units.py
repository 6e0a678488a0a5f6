"""Unit normalisation: every value is stored in the base unit Nsight Compute uses.

``ncu --print-units auto`` (the default for ``--import``) scales values per row with SI
prefixes (1 Kbyte = 1000 byte): ``us``/``ms`` for ``ns``, ``Ghz`` for ``hz``, ``Mbyte`` for
``byte``, ``Tbyte/s`` for ``byte/s``.  Base units are what a live ``--csv`` run prints:
times in ``ns`` (but rates per ``s``), ``byte``, ``hz``.

This module is the one table of unit spellings. Every spelling in the captures the project
ships is in it (``tests/test_units.py`` reads them all), and so are the other spellings of
the same units (``µs``, ``sec``, ``KB``, ``KiB``, ``TB/s``, ``GHz``). A spelling that is not in
it is *unknown*: its factor is NaN, so its values are missing rather than read in the wrong
scale, and the reader warns naming the metric.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

UNKNOWN = math.nan  # the factor of a unit spelling this table does not know

_SI = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# Time as a quantity is based on nanoseconds; time in a rate's denominator on seconds.
_TIME_NS = {
    "ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "nanosecond": 1.0,
    "us": 1e3, "usecond": 1e3, "usec": 1e3, "\u00b5s": 1e3, "\u03bcs": 1e3, "microsecond": 1e3,
    "ms": 1e6, "msecond": 1e6, "msec": 1e6, "millisecond": 1e6,
    "s": 1e9, "sec": 1e9, "second": 1e9,
}
_TIME_NS.update({f"{k}s": v for k, v in list(_TIME_NS.items()) if k.endswith("second")})
# Per-time denominators, as "how many per second": x/ns = 1e9 x/s.
_PER_S = {k: 1e9 / v for k, v in _TIME_NS.items()}
_BYTES = re.compile(r"^(Ki|Mi|Gi|Ti|Pi|[kKMGTP])?(byte|bytes|B)$")
_HZ = re.compile(r"^([kKMGTP])?hz$", re.IGNORECASE)
# Counted things ncu prints as units (no scale of their own). A prefix scales them
# (``Kinst``), as ncu's auto units may.
COUNTS = frozenset({
    "%", "inst", "instruction", "instructions", "cycle", "cycles", "sector", "sectors",
    "request", "requests", "warp", "warps", "thread", "threads", "block", "blocks", "SM",
    "SMs", "cluster", "clusters", "register", "registers", "pass", "passes", "sample",
    "samples", "branch", "branches", "wavefront", "wavefronts", "transaction", "transactions",
    "CTA", "CTAs", "TPC", "GPC", "kernel", "launch", "launches", "channel", "elements",
    "flop", "op", "ops", "x", "ratio", "value", "byte_per_sector",
})
_COUNT_PREFIX = re.compile(r"^([KMGT])(.+)$")


def _term(term: str, denominator: bool) -> tuple[str, float]:
    """Split one unit term such as ``Kbyte`` or ``us`` into (base term, factor)."""
    if term in _TIME_NS:
        return ("s", _PER_S[term]) if denominator else ("ns", _TIME_NS[term])
    m = _BYTES.match(term)
    if m:
        prefix = m.group(1) or ""
        return "byte", _BINARY.get(prefix) or _SI[prefix]
    m = _HZ.match(term)
    if m:
        return "hz", _SI[m.group(1) or ""]
    if term in COUNTS:
        return term, 1.0
    m = _COUNT_PREFIX.match(term)
    if m and m.group(2) in COUNTS and m.group(2) != "%":
        return m.group(2), _SI[m.group(1)]
    return term, UNKNOWN


@lru_cache(maxsize=512)
def normalize_unit(unit: str) -> tuple[str, float]:
    """Return ``(base_unit, factor)`` so that ``value * factor`` is in ``base_unit``.

    An unknown spelling has the factor NaN (:func:`is_known`): its values are missing.

    >>> normalize_unit("Gbyte/s")
    ('byte/s', 1000000000.0)
    >>> normalize_unit("%/Kbyte")
    ('%/byte', 0.001)
    """
    unit = (unit or "").strip()
    if not unit:
        return "", 1.0
    num, _, den = unit.partition("/")
    base_num, f_num = _term(num.strip(), denominator=False)
    if not den:
        return base_num, f_num
    if "/" in den:
        return unit, UNKNOWN
    base_den, f_den = _term(den.strip(), denominator=True)
    if base_den == "s":
        return f"{base_num}/s", f_num * f_den
    return f"{base_num}/{base_den}", f_num / f_den


def is_known(unit: str) -> bool:
    """Whether the unit spelling is in the table (an empty unit is: a plain number)."""
    return not math.isnan(normalize_unit(unit)[1])


# Metrics whose base unit is fixed: a value of one in another unit (an emptied or odd unit
# column) is not that metric's value and is read as missing.
EXPECTED_BASE = {
    "gpu__time_duration.sum": "ns",
    "dram__bytes_read.sum": "byte",
    "dram__bytes_write.sum": "byte",
}
