"""Helpers shared by the readers: value parsing, names, launch shapes, NVTX text."""

from __future__ import annotations

import csv
import lzma
import os
import re
import zlib
from dataclasses import dataclass
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


# Bounds on what an input may ask of a reader (docs/robustness.md). ncu's longest lines are
# raw-page rows of a few hundred KB; its gzip and zstd captures shrink 5-30x.
MAX_LINE = 64 << 20  # bytes in one line: beyond, an endless line, not an export
MAX_WHOLE = 2 << 30  # bytes of text a reader that holds its input whole takes
BOMB_RATIO = 200  # decompressed / compressed size beyond which a large input is a bomb
BOMB_FLOOR = 256 << 20  # ... once it has grown past this size
_CHUNK = 1 << 20
# A CSV field may be as long as a line (a session page's command line of 1 MB); the csv
# module's default of 128 KiB made such a field an internal error.
csv.field_size_limit(MAX_LINE)


# Compressed inputs, known by their last suffix: gzip (what users attach) and xz (what the
# bundled captures are stored as: ncu's CSV pages shrink ~4x further than with gzip).
COMPRESSION = {".gz": "gzip", ".xz": "xz"}


def _decoder(codec: str):
    return zlib.decompressobj(31) if codec == "gzip" else lzma.LZMADecompressor(lzma.FORMAT_XZ)


class InputStream:
    """An input file read in chunks, decompressing ``.gz`` and ``.xz``, within the bounds above.

    * A compressed stream cut short (a copy stopped at 99%) ends where its data ends:
      ``truncated`` is set and the reader says so, instead of refusing the file.
    * A line longer than :data:`MAX_LINE`, more than ``limit`` bytes, or a decompressed
      size far beyond the file's (a bomb) is a :class:`ReportParseError` at once,
      before memory runs out.
    """

    def __init__(self, path: Path, limit: int | None = None, what: str = "") -> None:
        """Open ``path`` (the limit, if any, with a word on what holds the input whole)."""
        self.path, self.limit, self.what = path, limit, what
        self.truncated = False
        self.size = 0
        self._line = 0
        self._raw = path.open("rb")
        try:
            self._compressed = os.fstat(self._raw.fileno()).st_size
        except BaseException:
            self._raw.close()
            raise
        # Inflated here, not by GzipFile/LZMAFile: a stream cut short keeps all it inflated.
        self._codec = COMPRESSION.get(path.suffix.lower())
        self._z = _decoder(self._codec) if self._codec else None
        self._tail = b""

    def __enter__(self) -> InputStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._raw.close()

    def read(self, n: int = -1) -> bytes:
        """Read up to ``n`` bytes (all that is left for -1), checking the bounds."""
        out = []
        want = n if n >= 0 else None
        while want is None or want > 0:
            chunk = self._chunk(_CHUNK if want is None else min(want, _CHUNK))
            if not chunk:
                break
            out.append(chunk)
            if want is not None:
                want -= len(chunk)
        return b"".join(out)

    def _inflate(self, n: int) -> bytes:
        from ..errors import ReportParseError

        xz = self._codec == "xz"
        while True:
            if self._z.eof:  # a member ends: another may follow (files concatenated)
                rest = self._z.unused_data or self._raw.read(1 << 16)
                if not rest.strip(b"\0"):
                    return b""
                self._z, self._tail = _decoder(self._codec), rest.lstrip(b"\0") if xz else rest
            if xz and not self._z.needs_input:
                data = b""  # the decoder holds output beyond the last call's n bytes
            else:
                data = self._tail or self._raw.read(1 << 16)
                if not data:
                    if self.size == 0:
                        raise ReportParseError(f"{self.path}: broken {self._codec} file (it "
                                               "ends before any data)")
                    self.truncated = True  # cut short: what came before is the file's data
                    return b""
            try:
                out = self._z.decompress(data, n)
            except (zlib.error, lzma.LZMAError) as exc:
                raise ReportParseError(f"{self.path}: broken {self._codec} file ({exc})") \
                    from None
            self._tail = b"" if xz else self._z.unconsumed_tail
            if out:
                return out

    def _chunk(self, n: int) -> bytes:
        from ..errors import ReportParseError

        if self.truncated:
            return b""
        chunk = self._inflate(n) if self._codec else self._raw.read(n)
        self.size += len(chunk)
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        self._line = self._line + len(chunk) if end < 0 else len(chunk) - end - 1
        if self._line > MAX_LINE:
            raise ReportParseError(
                f"{self.path}: a line longer than {MAX_LINE >> 20} MiB (an endless line?); "
                "ncu writes none")
        if self.limit is not None and self.size > self.limit:
            raise ReportParseError(
                f"{self.path}: more than {self.limit >> 20} MiB of text, the most "
                f"{self.what or 'this reader'} holds in memory; export the raw page "
                "(ncu --import R.ncu-rep --csv --page raw), which is read streamed")
        if self._codec and self.size > BOMB_FLOOR \
                and self.size > BOMB_RATIO * max(self._compressed, 1):
            raise ReportParseError(
                f"{self.path}: decompresses to more than {BOMB_RATIO}x its size (a "
                f"{self._codec} bomb?); no ncu export does")
        return chunk


def read_input_bytes(path: Path, limit: int | None = MAX_WHOLE) -> bytes:
    """Return a file's bytes, decompressing ``.gz``/``.xz`` files (saved logs often are).

    Within the bounds of :class:`InputStream`; a stream cut short gives what it holds.
    """
    with InputStream(path, limit, "a reader of the whole file") as fh:
        return fh.read()


def read_prefix(path: Path, size: int) -> bytes:
    """A file's first ``size`` bytes, decompressed.

    b"" where a compressed file will not decompress (its reader says why); OSError passes,
    for the caller to name an unreadable file.
    """
    from ..errors import ReportParseError

    try:
        with InputStream(path) as fh:
            return fh.read(size)
    except ReportParseError:
        return b""


def path_text(path) -> str:
    """A path as text every writer takes.

    Bytes that are not UTF-8 (a file name with byte 0xff, kept by Python as a lone surrogate)
    become U+FFFD; the file itself is opened by its path.
    """
    text = str(path)
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") \
        if any("\udc80" <= ch <= "\udcff" for ch in text) else text


def base_suffix(path: Path) -> str:
    """The suffix that names the form, below a ``.gz``/``.xz``: ``x.csv.xz`` -> ``.csv``."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSION:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


# Number formats. ncu prints numbers in the host's locale: a decimal point with ","
# grouping (the C and English locales, "3,199,470,873.31"), a decimal comma with "." or
# space grouping (German "3.199.470.873,31", French "3 199 470 873,31" with a space, NBSP or
# NNBSP), or apostrophe grouping (Swiss "1'215'000.00"). One format per file.
_GROUPING = ",. '\u00a0\u202f"


@dataclass(frozen=True)
class NumberFormat:
    """How one file writes numbers: its decimal mark and the grouping marks it may use."""

    decimal: str
    name: str

    @property
    def grouping(self) -> str:
        """The grouping marks possible beside this decimal mark."""
        return "".join(c for c in _GROUPING if c != self.decimal)

    @property
    def pattern(self) -> str:
        """A whole number in this format: groups of exactly three digits, one decimal mark."""
        group = "[" + re.escape(self.grouping) + "]"
        dec = re.escape(self.decimal)
        return (rf"^[+-]?(?:(?:\d{{1,3}}(?:{group}\d{{3}})+|\d+)(?:{dec}\d*)?|{dec}\d+)"
                r"(?:[eE][+-]?\d+)?$")


# C's printf exponent form (6.65e-05) has one reading in either format: a decimal point.
_SCIENTIFIC = r"^[+-]?\d+\.\d+[eE][+-]?\d+$"
DECIMAL_POINT = NumberFormat(".", "decimal point (1,234.5)")
DECIMAL_COMMA = NumberFormat(",", "decimal comma (1.234,5 or 1 234,5)")
_SAMPLE = 200_000  # values looked at to tell a file's format (a strided sample)


def _as_string_array(text) -> pa.Array:
    if isinstance(text, pa.Array | pa.ChunkedArray):
        return text if text.type == pa.string() else text.cast(pa.string())
    return pa.array(np.asarray(text, dtype=object) if not isinstance(text, pd.Series)
                    else text.astype(object).where(text.notna(), None), type=pa.string())


def _prepared(arr: pa.Array) -> pa.Array:
    arr = pc.utf8_trim_whitespace(arr)
    # "8,388,608 (3,145,728; 2,097,152; ...)" (instanced) or "1 (0-15)" (NUMA): the aggregate
    # comes first.
    return pc.replace_substring_regex(arr, r"\s+\(.*\)$", "")


def _first(arr: pa.Array, mask: pa.Array) -> str:
    return str(pc.filter(arr, mask)[0].as_py())


def number_format(text, where: str = "input") -> NumberFormat:
    """Tell the number format of a file's value texts (the decimal point unless shown otherwise).

    A value such as ``41,97`` or ``1.234,5`` can only be a decimal comma, ``41.97`` or
    ``1,234.5`` only a decimal point; ``1,234`` is either and decides nothing.

    Raises:
        ReportParseError: values of both kinds: the file mixes two formats.

    """
    return told_format(text, where) or DECIMAL_POINT


def told_format(text, where: str = "input") -> NumberFormat | None:
    """The number format the value texts show, or None when none of them decides it.

    For readers that build their tables block by block: a block of values such as
    ``1,234`` only waits for a block that tells (:func:`number_format` takes the decimal
    point then).

    Raises:
        ReportParseError: values of both kinds: the file mixes two formats.

    """
    from ..errors import ReportParseError

    arr = _as_string_array(text)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) > _SAMPLE:
        step = len(arr) // _SAMPLE
        arr = arr.take(pa.array(np.arange(0, len(arr), step)))
    arr = _prepared(arr)
    point = pc.fill_null(pc.match_substring_regex(arr, DECIMAL_POINT.pattern), False)
    comma = pc.fill_null(pc.match_substring_regex(arr, DECIMAL_COMMA.pattern), False)
    point = pc.and_(point, pc.invert(pc.fill_null(pc.match_substring_regex(arr, _SCIENTIFIC),
                                                  False)))
    point_only = pc.and_(point, pc.invert(comma))
    comma_only = pc.and_(comma, pc.invert(point))
    if pc.any(comma_only).as_py():
        if pc.any(point_only).as_py():
            raise ReportParseError(
                f"{where}: numbers in two formats ({_first(arr, point_only)!r}, a decimal "
                f"point, and {_first(arr, comma_only)!r}, a decimal comma); re-export it "
                "with ncu in one locale (LC_ALL=C)")
        return DECIMAL_COMMA
    return DECIMAL_POINT if pc.any(point_only).as_py() else None


def parse_numbers(text: pd.Series | np.ndarray | pa.Array, fmt: NumberFormat | None = None,
                  where: str = "input") -> np.ndarray:
    """Parse exported value texts into floats, vectorized in Arrow's C++ kernels.

    Handles the file's number format (``fmt``; told from ``text`` itself when None: see
    :func:`number_format`), ``aggregate (v1; v2; ...)`` instanced values, scientific notation,
    and ``n/a``/``nan``/``no data``/strings (NaN). Grouping must be in threes.

    Raises:
        ReportParseError: a value that is a number only in the other format (mixed formats).

    """
    arr = _as_string_array(text)
    if fmt is None:
        fmt = number_format(arr, where)
    arr = _prepared(arr)
    ok = pc.match_substring_regex(arr, fmt.pattern)
    clean = pc.replace_substring_regex(arr, "[" + re.escape(fmt.grouping) + "]", "")
    if fmt.decimal != ".":
        clean = pc.replace_substring(clean, fmt.decimal, ".")
        scientific = pc.fill_null(pc.match_substring_regex(arr, _SCIENTIFIC), False)
        ok = pc.or_(pc.fill_null(ok, False), scientific)
        clean = pc.if_else(scientific, arr, clean)
    numeric = pc.if_else(ok, clean, pa.scalar(None, pa.string()))
    values = pc.cast(numeric, pa.float64()).to_numpy(zero_copy_only=False)
    other = DECIMAL_COMMA if fmt is DECIMAL_POINT else DECIMAL_POINT
    failed = pc.and_(pc.invert(pc.fill_null(ok, True)), pc.is_valid(arr))
    if pc.any(failed).as_py():
        rest = pc.filter(arr, failed)
        stray = pc.fill_null(pc.match_substring_regex(rest, other.pattern), False)
        if pc.any(stray).as_py():
            from ..errors import ReportParseError

            raise ReportParseError(
                f"{where}: numbers in two formats ({_first(rest, stray)!r} is written with a "
                f"{other.name.split(' (')[0]}, the rest with a {fmt.name.split(' (')[0]}); "
                "re-export it with ncu in one locale (LC_ALL=C)")
    return values


def parse_triples(text: pd.Series) -> pd.DataFrame:
    """Parse ``"(256, 1, 1)"`` launch shapes into three nullable integer columns."""
    if len(text) <= _SMALL:
        found = [_TRIPLE.search(v if isinstance(v, str) else "" if pd.isna(v) else str(v))
                 for v in text.tolist()]
        return pd.DataFrame({i: _small_ints([m[i + 1] if m else None for m in found])
                             for i in range(3)})
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
    if len(series) <= _SMALL and (series.dtype == object or isinstance(
            series.dtype, pd.StringDtype | pd.CategoricalDtype)):
        return _small_ints(series.astype(object).where(series.notna(), None).tolist())
    if series.dtype == object or isinstance(series.dtype, pd.StringDtype | pd.CategoricalDtype):
        series = series.astype(object).where(series.notna(), None).astype(str).str.strip()
        series = series.where(series.str.fullmatch(r"[+-]?\d{1,16}(\.0*)?"))
    numbers = pd.to_numeric(series, errors="coerce").astype("float64")
    numbers = numbers.where((numbers.abs() < _INT_LIMIT) & (numbers == np.round(numbers)))
    return numbers.astype("Int64")


# Up to this many values, texts are read one by one in Python: pandas' string methods cost
# ~1 ms a call whatever the length, and a folder of 10,000 one-launch exports made ~30 such
# calls a file (60 of its 85 ms).
_SMALL = 64
_WHOLE = re.compile(r"[+-]?\d{1,16}(\.0*)?")


def _small_ints(texts: list) -> pd.Series:
    """:func:`safe_ints` of a few texts (None for missing), as it reads them in pandas."""
    out = []
    for v in texts:
        t = str(v).strip()
        n = float(t) if _WHOLE.fullmatch(t) else np.nan
        out.append(int(n) if abs(n) < _INT_LIMIT and n == round(n) else None)
    return pd.Series(pd.array(out, dtype="Int64"))


def repeated_texts(values) -> pd.Categorical:
    """Texts that repeat row after row (ncu's rule descriptions), each distinct one held once.

    As a string column every row held its own copy: 250 MB of descriptions for the 653,136
    rule results of 1 GB of text output, most of them the same few hundred texts. Categories
    in order of appearance, as Python strings (a row read is the one object, not a copy);
    None is missing.
    """
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


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
