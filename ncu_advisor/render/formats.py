"""Value formatters: numbers with their units, for the HTML report and the terminal.

The HTML filters (``FILTERS``, registered once in :func:`ncu_advisor.render.html.environment`)
print "not measured" for a missing value (``None``, NaN); :func:`fmt_time` is the terminal's
plain-text duration, which prints "n/a".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from markupsafe import Markup

NOT_MEASURED = Markup('<span class="nm">not measured</span>')
# A severity as the terminal prints it: one width, so columns line up (text and diff).
SEVERITY_TAGS = {"high": "HIGH", "medium": "MED ", "low": "low ", "info": "info"}


def as_text(value: Any) -> str | None:
    """Return input text as a str (numbers too), or None when missing/empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def as_number(value: Any) -> float | None:
    """Return a finite float, or None for missing, NaN, booleans and text."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def scaled(value: float, units: Sequence[tuple[float, str]], digits: int = 3) -> str:
    """Pick the largest unit that keeps the value >= 1 and print ``digits`` significant digits."""
    for factor, unit in units:
        if abs(value) >= factor:
            return f"{sig(value / factor, digits)} {unit}"
    factor, unit = units[-1]
    return f"{sig(value / factor, digits)} {unit}"


def sig(value: float, digits: int = 3) -> str:
    """Print a number with about ``digits`` significant digits and no exponent below 1e15."""
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_duration(value: Any) -> str:
    """Format nanoseconds as ns / µs / ms / s."""
    v = as_number(value)
    if v is None:
        return NOT_MEASURED
    return scaled(v, [(1e9, "s"), (1e6, "ms"), (1e3, "\u00b5s"), (1.0, "ns")])


def fmt_bytes(value: Any) -> str:
    """Format bytes with decimal prefixes, as ncu does (1 KB = 1000 bytes)."""
    v = as_number(value)
    if v is None:
        return NOT_MEASURED
    if abs(v) < 1000:
        return f"{sig(v)} B"
    return scaled(v, [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")])


def _si_formatter(unit: str, doc: str):
    """A formatter for ``unit`` with decimal prefixes P, T, G, M, K."""
    steps = [(1e15, f"P{unit}"), (1e12, f"T{unit}"), (1e9, f"G{unit}"), (1e6, f"M{unit}"),
             (1e3, f"K{unit}"), (1.0, unit)]

    def fmt(value: Any) -> str:
        v = as_number(value)
        return NOT_MEASURED if v is None else scaled(v, steps)

    fmt.__doc__ = doc
    return fmt


fmt_bandwidth = _si_formatter("B/s", "Format byte/s with decimal prefixes.")
fmt_flops = _si_formatter("FLOP/s", "Format FLOP/s with SI prefixes.")
fmt_flop = _si_formatter("FLOP", "Format a count of floating-point operations with SI prefixes.")


def fmt_pct(value: Any, digits: int = 1) -> str:
    """Format a value already in percent."""
    v = as_number(value)
    if v is None:
        return NOT_MEASURED
    return f"{v:.{digits}f}%"


def fmt_share(value: Any) -> str:
    """Format a fraction (0..1) as a percentage."""
    v = as_number(value)
    return NOT_MEASURED if v is None else f"{v * 100:.1f}%"


def fmt_num(value: Any) -> str:
    """Format a plain number: integers with thousands separators, others to 3 digits."""
    v = as_number(value)
    if v is None:
        return NOT_MEASURED
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return sig(v)


def fmt_qty(value: Any, unit: str | None = None) -> str:
    """Format a value by its base unit (the units the JSON contract uses)."""
    if isinstance(value, str):
        return f"{value} {unit}".strip() if unit else value
    unit = (unit or "").strip()
    formatter = _BY_UNIT.get(unit)
    if formatter is not None:
        return formatter(value)
    text = fmt_num(value)
    if isinstance(text, Markup) or not unit:
        return text
    return f"{text} {unit}"


def fmt_dims(value: Any) -> str:
    """Format a launch shape ``[x, y, z]`` as ``x × y × z``."""
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        return NOT_MEASURED
    parts = [fmt_num(v) for v in value]
    if any(isinstance(p, Markup) for p in parts):
        return NOT_MEASURED
    return " \u00d7 ".join(parts)


def fmt_text(value: Any) -> str:
    """Return input text as it is (autoescaped when printed), "not measured" for None."""
    text = as_text(value)
    return NOT_MEASURED if text is None else text


def bar_width(value: Any, scale: float = 1.0) -> str:
    """Return a CSS width percentage in [0, 100] for ``value * scale`` (0 when missing)."""
    v = as_number(value)
    return "0" if v is None else f"{min(100.0, max(0.0, v * scale)):.2f}"


def sort_key(value: Any) -> str:
    """Return a numeric sort key for a ``data-sort`` attribute ('' sorts last)."""
    v = as_number(value)
    return "" if v is None else repr(v)


_BY_UNIT: dict[str, Callable[[Any], str]] = {
    "ns": fmt_duration,
    "%": fmt_pct,
    "byte": fmt_bytes,
    "byte/s": fmt_bandwidth,
    "FLOP/s": fmt_flops,
    "flop/s": fmt_flops,
    "FLOP": fmt_flop,
    "fraction": fmt_share,
}

FILTERS: dict[str, Callable[..., str]] = {
    "duration": fmt_duration,
    "bytes": fmt_bytes,
    "bandwidth": fmt_bandwidth,
    "flops": fmt_flops,
    "flop": fmt_flop,
    "pct": fmt_pct,
    "share": fmt_share,
    "num": fmt_num,
    "qty": fmt_qty,
    "dims": fmt_dims,
    "text": fmt_text,
    "width": bar_width,
    "sortkey": sort_key,
}


def fmt_time(ns: float | None) -> str:
    """Format nanoseconds as ns/us/ms/s for the terminal ("n/a" when missing)."""
    if ns is None:
        return "n/a"
    for limit, div, unit in ((1e9, 1e9, "s"), (1e6, 1e6, "ms"), (1e3, 1e3, "us")):
        if abs(ns) >= limit:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.0f} ns"


# Terminal control characters (ESC, BEL, CR, ...), bidi overrides and line/paragraph
# separators in kernel names or file names could rewrite the terminal or reorder the text.
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff]")


def safe_text(text: str, newlines: bool = True) -> str:
    r"""Escape control, bidi and line-separator characters (``\x1b``, ``\u202e``).

    ``newlines=False`` escapes ``\n`` too (names and one-line fields).
    """
    if not newlines:
        text = text.replace("\n", "\\x0a")
    return _UNSAFE.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                  else f"\\u{ord(m.group()):04x}"), text)
