"""Helpers shared by the readers: value parsing, names, launch shapes, NVTX text."""

from __future__ import annotations

import gzip
import re
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

_TRIPLE = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
# ncu metric names are lower-case identifiers with underscores ("inst_executed",
# "dram__bytes_read.sum"); labels have capitals or spaces ("Duration", "DRAM Throughput").
METRIC_NAME = re.compile(r"^[a-z0-9.]*_[a-z0-9_.]*$")


def read_input_bytes(path: Path) -> bytes:
    """Return a file's bytes, decompressing ``.gz`` files (saved or attached logs often are)."""
    from ..errors import ReportParseError

    raw = path.read_bytes()
    if path.suffix.lower() != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise ReportParseError(f"{path}: broken gzip file ({exc})") from None


def path_text(path) -> str:
    """A path as text every writer takes.

    Bytes that are not UTF-8 (a file name with byte 0xff, kept by Python as a lone surrogate)
    become U+FFFD; the file itself is opened by its path.
    """
    text = str(path)
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") \
        if any("\udc80" <= ch <= "\udcff" for ch in text) else text


def base_suffix(path: Path) -> str:
    """The suffix that names the form, below a ``.gz``: ``x.csv.gz`` -> ``.csv``."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def parse_numbers(text: pd.Series | np.ndarray | pa.Array) -> np.ndarray:
    """Parse exported value texts into floats, vectorized in Arrow's C++ kernels.

    Handles thousands separators, ``aggregate (v1; v2; ...)`` instanced values, scientific
    notation, and ``n/a``/``nan``/``no data``/strings (NaN).
    """
    if isinstance(text, pa.Array | pa.ChunkedArray):
        arr = text if text.type == pa.string() else text.cast(pa.string())
    else:
        arr = pa.array(np.asarray(text, dtype=object) if not isinstance(text, pd.Series)
                       else text.astype(object).where(text.notna(), None), type=pa.string())
    arr = pc.utf8_trim_whitespace(arr)
    # "8,388,608 (3,145,728; 2,097,152; ...)" (instanced) or "1 (0-15)" (NUMA): the aggregate
    # comes first.
    arr = pc.replace_substring_regex(arr, r"\s+\(.*\)$", "")
    arr = pc.replace_substring(arr, ",", "")
    numeric = pc.if_else(pc.match_substring_regex(arr, _NUMBER), arr, pa.scalar(None, pa.string()))
    return pc.cast(numeric, pa.float64()).to_numpy(zero_copy_only=False)


def parse_triples(text: pd.Series) -> pd.DataFrame:
    """Parse ``"(256, 1, 1)"`` launch shapes into three nullable integer columns."""
    parts = text.fillna("").astype(str).str.extract(_TRIPLE)
    return pd.DataFrame({c: safe_ints(parts[c]) for c in parts.columns})


# Integers kept exactly: IDs, shapes and process IDs beyond this are not real launches.
_INT_LIMIT = 2.0**53


def safe_ints(values) -> pd.Series:
    """Texts or floats to nullable integers; what is not a whole number in range is missing.

    ``" 7"`` is 7; ``"0x1F"``, ``"nan"``, ``"7.5"`` and ``"1e400"`` are missing (the caller
    says so in a warning).
    """
    series = pd.Series(values)
    if series.dtype == object or isinstance(series.dtype, pd.StringDtype | pd.CategoricalDtype):
        series = series.astype(object).where(series.notna(), None).astype(str).str.strip()
        series = series.where(series.str.fullmatch(r"[+-]?\d{1,16}(\.0*)?"))
    numbers = pd.to_numeric(series, errors="coerce").astype("float64")
    numbers = numbers.where((numbers.abs() < _INT_LIMIT) & (numbers == np.round(numbers)))
    return numbers.astype("Int64")


def finite_or_nan(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replace values beyond float range (parsed as infinity) by NaN; return the mask too."""
    bad = np.isinf(values)
    if bad.any():
        values = np.where(bad, np.nan, values)
    return values, bad


def _strip_balanced(name: str, open_ch: str, close_ch: str) -> str:
    """Remove every balanced ``open_ch ... close_ch`` group (templates, parameter lists)."""
    out, depth = [], 0
    for ch in name:
        if ch == open_ch:
            depth += 1
        elif ch == close_ch and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=4096)
def short_name(name: str) -> str:
    """Return the bare function name of a demangled kernel name.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2)``
    becomes ``vectorized_elementwise_kernel``.
    """
    if not name:
        return name
    bare = name.strip()
    # Lambdas and operators keep their parentheses inside template arguments; strip the
    # templates first so the parameter list is the only group left at depth zero.
    bare = _strip_balanced(bare, "<", ">")
    bare = _strip_balanced(bare, "(", ")")
    bare = bare.strip().split(" ")[-1] if bare.strip() else name
    bare = bare.split("::")[-1]
    return bare or name


_NVTX_ENTRY = re.compile(r'"([^"]*)"')
# One entry is "domain:range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg". Range names and
# messages may hold colons themselves (CUB's "cub::DeviceRadixSort", registered as both the
# range and its message), so the message must be "none:none" or repeat the range name.
_NVTX_FIELDS = re.compile(
    r"^(?P<domain>[^:]*):(?P<range>.+?):\w+:[^:]*:\w+:[^:]*:(?:none:none|\w+:(?P=range))$")


@lru_cache(maxsize=1024)
def nvtx_ranges(text: str) -> str | None:
    """Turn ncu's NVTX column text into ``outer/inner`` range names (None outside ranges).

    The text looks like ``1662  "<default domain>:copies:none:none:none:none:none:none" ``:
    a thread id, then one quoted ``domain:range:payload...`` entry per open range, the
    ranges of every domain in turn.
    """
    names = []
    for entry in _NVTX_ENTRY.findall(text or ""):
        match = _NVTX_FIELDS.match(entry)
        if match:
            rng = match["range"]
        else:  # a message unlike the range name: take the fields before the last six
            _, _, rng = entry.rsplit(":", 6)[0].partition(":")
        if rng:
            names.append(rng)
    return "/".join(names) if names else None
