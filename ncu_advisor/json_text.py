"""Indented, strict JSON text: the one JSON writer of every command's output.

orjson writes it: with ``indent`` set, Python's own encoder runs in pure Python and was the
largest step of ``analyze -f json`` on a big report (~1.2 s of 3.5 s at 80 MB of export);
orjson writes the same document in a few percent of that. The text is what
``json.dumps(value, indent=2)`` writes up to spelling: non-ASCII characters are written as
UTF-8 rather than as escapes, and floats in their shortest form (``1e16``, not
``1e+16``). NaN and infinity become ``null``, so the JSON stays strict.

A value orjson refuses (an integer beyond 64 bits, a string with lone surrogates) is written
by the standard library instead, after the same NaN/infinity clean-up: it is rare and never
large, and the document's text must come out whatever a damaged input held.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np
import orjson

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_INDENT = b"  "


def _default(value):
    """What orjson does not know natively: mappings (a finding's Evidence), numpy scalars."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_PLAIN = frozenset({str, int, bool, type(None)})


def strict(value):
    """``value`` with NaN and infinity as None, mappings as dicts and numpy scalars as Python's.

    The clean-up the standard library's ``allow_nan=False`` needs (orjson does it itself),
    and what a renderer reading :meth:`Analysis.to_dict` gets: a copy of every dict and list.
    """
    kind = type(value)  # exact types first: this walks every finding of every launch
    if kind is float:
        return value if math.isfinite(value) else None
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {k: strict(v) for k, v in value.items()}
    if kind is list:
        return [strict(v) for v in value]
    if isinstance(value, Mapping):  # a dict subclass, or a finding's Evidence
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    if isinstance(value, np.generic):
        return strict(value.item())
    if isinstance(value, float):  # a float subclass
        return float(value) if math.isfinite(value) else None
    return value


def dumps(value, depth: int = 0) -> bytes:
    """``value`` as indented strict JSON (UTF-8), nested ``depth`` levels deep.

    At ``depth`` > 0 the text is what the value gets inside an enclosing document at that
    depth: every line after the first is indented ``2 * depth`` more spaces.

    Raises:
        TypeError: a value JSON cannot hold.

    """
    try:
        text = orjson.dumps(value, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:  # the standard library raises TypeError if it cannot either
        text = json.dumps(strict(value), indent=2, allow_nan=False).encode("ascii")
    if depth:  # a JSON string holds no raw newline: every b"\n" starts a line
        text = text.replace(b"\n", b"\n" + _INDENT * depth)
    return text


def dumps_text(value) -> str:
    """:func:`dumps` as a ``str`` ending in a newline, for outputs written as text."""
    return dumps(value).decode("utf-8") + "\n"


def json_number(value) -> float | None:
    """A JSON-safe float (None for NaN/inf/missing)."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
