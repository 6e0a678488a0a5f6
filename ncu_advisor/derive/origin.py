"""Whose code a kernel is: the user's, or a library's (cuBLAS, cuDNN, CUB, PyTorch, ...).

Advice must speak to what the user can change: a library kernel's access pattern or tile
shape is not theirs to retune, but its precision mode, the layout of the tensors they pass and
the fusion of their eager ops are. The table is data (``data/origins.toml``); users can add
their own origins with a file of the same format.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import NcuAdviseError


@dataclass(frozen=True)
class Origin:
    """One origin: a library, a compiler, or the user's own code."""

    id: str
    label: str
    library: bool
    patterns: tuple[re.Pattern, ...] = ()
    # An eager framework (PyTorch, CuPy): one launch per op, that a compiler could fuse.
    eager: bool = False


USER = Origin("user", "user code", False)
# A C++-namespaced kernel that no origin names (``vllm::...``, ``tensorrt_llm::kernels::...``)
# is most likely a library the table does not know: its internals are not taken for the
# user's to change. Source-line correlation in the report (``-lineinfo``) makes it the user's.
UNKNOWN = Origin("unknown", "unknown code", False)
# Namespaces that say nothing about whose code it is.
_NEUTRAL_NAMESPACES = re.compile(r"^(?:std::|<unnamed>::|\(anonymous namespace\)::)+$")


@dataclass(frozen=True)
class CallerAdvice:
    """What the caller of a library kernel can do about a category of finding."""

    roles: tuple[str, ...]
    text: str
    severity_cap: str | None = None
    # When given, every kernel the finding is about must match one (a GEMV among matmuls).
    names: tuple[re.Pattern, ...] = ()
    # The category of the caller's change, where it is not the symptom's: a framework copy
    # that reads a transposed view strided is fixed by the layout upstream, not by the copy.
    category: str | None = None

    def fits(self, roles: list[str | None], names: list[str]) -> bool:
        """Whether this advice speaks to kernels of these roles and names."""
        return ((not self.roles or all(r in self.roles for r in roles))
                and (not self.names or all(any(p.search(n) for p in self.names)
                                           for n in names)))


@dataclass(frozen=True)
class OriginTable:
    """Origins, roles and caller advice, in match order."""

    origins: tuple[Origin, ...]
    roles: tuple[tuple[str, tuple[re.Pattern, ...]], ...]
    # Per category, entries in match order: a role-specific entry before the general one.
    caller_advice: dict[str, tuple[CallerAdvice, ...]]

    def advice_for(self, category: str, roles: list[str | None],
                   names: list[str] = ()) -> CallerAdvice | None:
        """The first caller advice of the category that fits kernels of these roles.

        ``names``: the kernels' names, for advice limited to some (a GEMV among matmuls).
        """
        for advice in self.caller_advice.get(category, ()):
            if advice.fits(roles, list(names)):
                return advice
        return None

    def classify(self, name: str, has_source: bool = False) -> Origin:
        """The first origin whose pattern matches the kernel name.

        None matching: user code, or ``unknown`` for a namespaced kernel without source-line
        correlation (``has_source``: the report holds source lines for it).
        """
        forms = name_forms(name)
        for origin in self.origins:
            if any(p.search(form) for p in origin.patterns for form in forms):
                return origin
        return UNKNOWN if not has_source and _namespaced(name) else USER

    def role(self, name: str) -> str | None:
        """What the kernel does (matmul, layout, elementwise, multi-pass), if recognizable."""
        forms = name_forms(name)
        for role, patterns in self.roles:
            if any(p.search(form) for p in patterns for form in forms):
                return role
        return None


# A demangled name's return type and namespaces ("void engines_precompiled::nchwToNhwcKernel<
# float, ...>(...)"): patterns anchored at the start ("^nchwToNhwc") are written for the bare
# function name, which ncu prints only in its short form.
_RETURN_TYPE = re.compile(r"^(?:void|int|float|double|unsigned|bool)\s+")
_QUALIFIED = re.compile(r"^((?:[A-Za-z_]\w*::)+)?([A-Za-z_]\w*)")


def _namespaced(name: str) -> bool:
    """Whether the kernel's function sits in a C++ namespace (or class) of its own."""
    match = _QUALIFIED.match(_RETURN_TYPE.sub("", name, count=1))
    scope = match.group(1) if match else None
    return bool(scope) and not _NEUTRAL_NAMESPACES.match(scope)


def name_forms(name: str) -> tuple[str, ...]:
    """The kernel name as printed, without its return type, and its bare function name."""
    bare = _RETURN_TYPE.sub("", name, count=1)
    match = _QUALIFIED.match(bare)
    function = match.group(2) if match else bare
    return tuple(dict.fromkeys((name, bare, function)))


def _parse(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NcuAdviseError(f"{where}: not a valid origins file ({exc})") from None


# A group with a quantifier inside, itself repeated ("(a+)+", "(a|aa)*"): Python's regex engine
# can take exponential time on it, and names come from files anyone can write.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)[+*{]")
_ORIGIN_KEYS = {"id", "label", "library", "patterns", "eager"}


def _compile(patterns, where: str) -> tuple[re.Pattern, ...]:
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise NcuAdviseError(f"{where}: patterns must be a list of strings")
    for p in patterns:
        if _NESTED_QUANTIFIER.search(p):
            raise NcuAdviseError(f"{where}: pattern {p!r} repeats a repeated group (it can take "
                                 "exponential time); write it without the nesting")
    try:
        return tuple(re.compile(p) for p in patterns)
    except (re.error, TypeError, RecursionError) as exc:
        raise NcuAdviseError(f"{where}: bad pattern ({exc})") from None


def _origins(data: dict, where: str) -> list[Origin]:
    unknown = sorted(set(data) - {"origin", "role", "caller_advice"})
    if unknown:
        raise NcuAdviseError(f"{where}: unknown key(s) {', '.join(unknown)}; an origins file "
                             "holds [[origin]] tables (id, label, library, patterns)")
    entries = data.get("origin", [])
    if not isinstance(entries, list) or not all(isinstance(o, dict) for o in entries):
        raise NcuAdviseError(f"{where}: origins are [[origin]] tables (an array of tables)")
    out = []
    for i, o in enumerate(entries):
        extra = sorted(set(o) - _ORIGIN_KEYS)
        if extra:
            raise NcuAdviseError(f"{where}: origin {i}: unknown field(s) {', '.join(extra)}")
        try:
            out.append(Origin(str(o["id"]), str(o.get("label", o["id"])),
                              bool(o.get("library", True)),
                              _compile(o.get("patterns", []), f"{where}: origin {i}"),
                              bool(o.get("eager", False))))
        except KeyError as exc:
            raise NcuAdviseError(f"{where}: origin {i} lacks field {exc}") from None
    return out


@lru_cache(maxsize=8)
def origin_table(extra: str | None = None) -> OriginTable:
    """The built-in table, with the origins of the file ``extra`` (if given) tried first."""
    builtin = resources.files("ncu_advisor").joinpath("data/origins.toml").read_text()
    data = _parse(builtin, "data/origins.toml")
    origins = _origins(data, "data/origins.toml")
    if extra:
        try:
            text = Path(extra).read_text(encoding="utf-8")
        except OSError as exc:
            raise NcuAdviseError(f"{extra}: cannot read ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise NcuAdviseError(f"{extra}: not a UTF-8 text file (an origins file is TOML)") \
                from None
        origins = _origins(_parse(text, extra), extra) + origins
    roles = tuple((r["id"], _compile(list(r["patterns"]), "data/origins.toml"))
                  for r in data.get("role", []))
    advice = {cat: tuple(CallerAdvice(tuple(a.get("roles", [])), " ".join(a["text"].split()),
                                      a.get("severity_cap"),
                                      _compile(list(a.get("names", [])), "data/origins.toml"),
                                      a.get("category"))
                         for a in (entries if isinstance(entries, list) else [entries]))
              for cat, entries in data.get("caller_advice", {}).items()}
    return OriginTable(tuple(origins), roles, advice)


# The op inside a framework's generic kernel: PyTorch's TensorIterator kernels are all named
# vectorized_elementwise_kernel / elementwise_kernel / reduce_kernel; the functor or lambda
# in the template arguments says which op it is (MulFunctor, bfloat16_copy_kernel_cuda,
# CUDAFunctor_add, masked_scale_kernel, sum_functor).
_OP_PART = re.compile(r"CUDAFunctor_([A-Za-z]\w*?)\b"
                      r"|([A-Za-z]\w*?)(?:_kernel_cuda|CUDAKernelImpl|_kernel|Functor|_functor)\b")
_GENERIC_PARTS = {"elementwise", "vectorized_elementwise", "unrolled_elementwise",
                  "gpu_kernel_impl", "gpu_kernel_impl_nocast", "reduce", "AUnary", "BUnary",
                  "Binary", "Unary", "CUDA", "launch", "index_elementwise",
                  "distribution_elementwise_grid_stride", "vectorized_gather"}


def op_label(name: str, short_name: str) -> str:
    """A short name for what a kernel computes.

    The functor of a generic framework kernel ("Mul", "bfloat16_copy", "masked_scale"), else
    the kernel's own short name.
    """
    parts = [a or b for a, b in _OP_PART.findall(name)]
    parts = [p for p in parts if p not in _GENERIC_PARTS and p != short_name]
    return parts[-1] if parts else short_name
