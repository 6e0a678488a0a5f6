"""Unit normalisation: every value is stored in the base unit Nsight Compute uses.

``ncu --print-units auto`` (the default for ``--import``) scales values per row with SI
prefixes (1 Kbyte = 1000 byte): ``us``/``ms`` for ``ns``, ``Ghz`` for ``hz``, ``Mbyte`` for
``byte``, ``Tbyte/s`` for ``byte/s``.  Base units are what a live ``--csv`` run prints:
times in ``ns`` (but rates per ``s``), ``byte``, ``hz``.
"""

from __future__ import annotations

import re
from functools import lru_cache

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# Time as a quantity is based on nanoseconds; time in a rate's denominator on seconds.
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
            "s": 1e9, "second": 1e9}
# Per-time denominators, as "how many per second": x/ns = 1e9 x/s.
_PER_S = {"ns": 1e9, "nsecond": 1e9, "us": 1e6, "usecond": 1e6, "ms": 1e3, "msecond": 1e3,
          "s": 1.0, "second": 1.0}
_SCALED = re.compile(r"^([KMGTP]?)(byte|hz|bytes)$", re.IGNORECASE)


def _term(term: str, denominator: bool) -> tuple[str, float]:
    """Split one unit term such as ``Kbyte`` or ``us`` into (base term, factor)."""
    if denominator and term in _PER_S:
        return "s", _PER_S[term]
    if not denominator and term in _TIME_NS:
        return "ns", _TIME_NS[term]
    m = _SCALED.match(term)
    if m:
        prefix = m.group(1).upper()
        base = m.group(2).lower()
        return ("byte" if base.startswith("byte") else "hz"), _PREFIX[prefix]
    return term, 1.0


@lru_cache(maxsize=512)
def normalize_unit(unit: str) -> tuple[str, float]:
    """Return ``(base_unit, factor)`` so that ``value * factor`` is in ``base_unit``.

    >>> normalize_unit("Gbyte/s")
    ('byte/s', 1000000000.0)
    >>> normalize_unit("%/Kbyte")
    ('%/byte', 0.001)
    """
    unit = (unit or "").strip()
    if not unit:
        return "", 1.0
    num, _, den = unit.partition("/")
    base_num, f_num = _term(num, denominator=False)
    if not den:
        return base_num, f_num
    base_den, f_den = _term(den, denominator=True)
    if base_den == "s":
        return f"{base_num}/s", f_num * f_den
    return f"{base_num}/{base_den}", f_num / f_den
