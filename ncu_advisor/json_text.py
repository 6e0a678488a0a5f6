"""Indented JSON text, character for character what ``json.dumps(value, indent=2)`` writes.

Python's JSON encoder is in C only without ``indent``; with it every value goes through
Python generators, which made writing the JSON of a large report (~12 KB per launch) cost
more than analysing it. Here containers are walked in Python, but each container that holds
only scalars (most of them: a quantity's value/unit/label, an evidence entry, a grid) is
written by the C encoder in one call, its item separator carrying the newline and indent.
"""

from __future__ import annotations

import math
from json.encoder import encode_basestring_ascii

try:  # CPython's accelerator; the pure-Python fallback gives the same text, slower
    from _json import make_encoder as _make_encoder
except ImportError:  # pragma: no cover - other interpreters
    _make_encoder = None

_SCALARS = frozenset({str, int, float, bool, type(None)})
_INDENT = "  "
_flat: dict[int, object] = {}  # depth -> encoder of one flat container at that depth


def _not_serializable(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _flat_text(value, depth: int) -> str:
    """``value`` (a scalar, or a container of scalars), its items on lines of ``depth + 1``."""
    encode = _flat.get(depth)
    if encode is None:
        separator = ",\n" + _INDENT * (depth + 1)
        if _make_encoder is not None:
            # (markers, default, encoder, indent, key_sep, item_sep, sort_keys, skipkeys,
            # allow_nan): no circular check is needed for a container of scalars.
            c_encode = _make_encoder(None, _not_serializable, encode_basestring_ascii, None,
                                     ": ", separator, False, False, False)

            def encode(v, _c=c_encode):
                return _c(v, 0)[0]
        else:  # pragma: no cover
            import json

            encoder = json.JSONEncoder(allow_nan=False, separators=(separator, ": "))
            encode = encoder.encode
        _flat[depth] = encode
    return encode(value)


def dumps(value, depth: int = 0) -> str:
    """``json.dumps(value, indent=2, allow_nan=False)``, nested ``depth`` levels deep.

    At ``depth`` > 0 the text is what the same value gets inside an enclosing document at
    that depth (every line after the first indented ``2 * depth`` more spaces).

    Raises:
        ValueError: a NaN or infinite float (as ``allow_nan=False``).
        TypeError: a value JSON cannot hold.

    """
    parts: list[str] = []
    _write(value, depth, parts)
    return "".join(parts)


def _write(value, depth: int, out: list[str]) -> None:
    kind = type(value)
    if kind is dict:
        if not value:
            out.append("{}")
            return
        for v in value.values():
            if type(v) not in _SCALARS:
                break
        else:
            if all(type(k) is str for k in value):
                text = _flat_text(value, depth)
                out.append("{\n" + _INDENT * (depth + 1) + text[1:-1] + "\n"
                           + _INDENT * depth + "}")
                return
        inner = "\n" + _INDENT * (depth + 1)
        separator = "{" + inner
        for key, item in value.items():
            out.append(separator + _key(key) + ": ")
            kind = type(item)
            if kind is str:  # inline: most items of a mixed dict are strings and numbers
                out.append(encode_basestring_ascii(item))
            elif kind is float and math.isfinite(item):
                out.append(float.__repr__(item))
            elif kind in _SCALARS:
                out.append(_flat_text(item, depth + 1))
            else:
                _write(item, depth + 1, out)
            separator = "," + inner
        out.append("\n" + _INDENT * depth + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        for v in value:
            if type(v) not in _SCALARS:
                break
        else:
            text = _flat_text(list(value), depth)
            out.append("[\n" + _INDENT * (depth + 1) + text[1:-1] + "\n" + _INDENT * depth + "]")
            return
        inner = "\n" + _INDENT * (depth + 1)
        separator = "[" + inner
        for item in value:
            out.append(separator)
            _write(item, depth + 1, out)
            separator = "," + inner
        out.append("\n" + _INDENT * depth + "]")
    elif kind in _SCALARS:
        out.append(_flat_text(value, depth))
    else:  # subclasses (numpy floats, enums ...) and the rest: the standard encoder decides
        import json

        text = json.dumps(value, indent=2, allow_nan=False)
        out.append(text.replace("\n", "\n" + _INDENT * depth))


def _key(key) -> str:
    """A dict key as json.dumps writes it (str keys; int, float, bool and None converted)."""
    if type(key) is str:
        return encode_basestring_ascii(key)
    import json

    return json.dumps({key: 0})[1:-4]
