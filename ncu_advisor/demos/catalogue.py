"""The demo catalogue: each teaching lab's ``demo.toml``, read into plain dataclasses.

Each category of the optimization checklist has a folder ``kernels/<id>/`` (shipped in the wheel
as ``ncu_advisor/_kernels/<id>/``) holding:

* ``kernels.cu``: the CUDA source of both variants, compiled by CuPy/NVRTC with ``-lineinfo``;
* ``demo.toml``: the lesson (what, why, fix, expected effect), the kernel names as ncu prints
  them, and the ncu metric signature that should tell the two variants apart;
* ``launch.py``: a CuPy launcher with ``setup``, ``run_bad``, ``run_good``, ``reference``,
  ``work`` and ``TOLERANCE`` (run by :mod:`.runner`).

Reading the catalogue needs nothing but the standard library (no GPU, no CuPy).
"""

from __future__ import annotations

import importlib.resources
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checklist import CATEGORIES
from ..errors import DemoError

#: The checklist category ids, in checklist order (ncu_advisor/checklist.py).
CHECKLIST_IDS = CATEGORIES

#: Comparison operators allowed at the start of a signature condition such as ``"< 8"``.
CONDITION_OPERATORS: tuple[str, ...] = ("<=", ">=", "==", "<", ">")


@dataclass(frozen=True)
class Lesson:
    """The teaching text of a demo: the problem, its cause, the fix, and the expected effect."""

    what: str
    why: str
    fix: str
    expect: str


@dataclass(frozen=True)
class Variant:
    """One side of a demo: the kernels it launches and the launcher function that runs it."""

    role: str  # "bad", "good" or "extra"
    label: str
    kernels: tuple[str, ...]
    description: str
    run: str  # name of the function in launch.py


@dataclass(frozen=True)
class Signature:
    """An ncu metric and the condition each variant is expected to meet (e.g. ``"< 8"``).

    ``scope`` is ``"each"`` when the condition holds for every launch of the variant and
    ``"sum"`` when it holds for the metric summed over the variant's launches.
    """

    metric: str
    bad: str
    good: str
    note: str
    scope: str = "each"


@dataclass(frozen=True)
class Demo:
    """A bad/good kernel pair for one checklist category, as described by its ``demo.toml``."""

    name: str
    category: str
    title: str
    problem: str
    tolerance: str
    lesson: Lesson
    bad: Variant
    good: Variant
    extras: tuple[Variant, ...]
    signatures: tuple[Signature, ...]
    path: Path

    @property
    def source_path(self) -> Path:
        """Path of the CUDA source of the pair."""
        return self.path / "kernels.cu"

    @property
    def launch_path(self) -> Path:
        """Path of the CuPy launcher module."""
        return self.path / "launch.py"

    @property
    def variants(self) -> tuple[Variant, ...]:
        """Bad, good, then any extra variants, in launch order."""
        return (self.bad, self.good, *self.extras)

    @property
    def kernel_names(self) -> tuple[str, ...]:
        """Every kernel name the demo launches, in launch order."""
        return tuple(k for v in self.variants for k in v.kernels)

    def source(self) -> str:
        """Return the CUDA source text."""
        return self.source_path.read_text(encoding="utf-8")


def kernels_dir() -> Path:
    """Locate the demo folders: ``ncu_advisor/_kernels`` if installed, else ``kernels/``."""
    try:
        packaged = importlib.resources.files("ncu_advisor") / "_kernels"
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "kernels"


def _text(table: dict[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DemoError(f"{where}: missing or empty text field {key!r}")
    return " ".join(value.split())


def _variant(data: dict[str, Any], role: str, where: str) -> Variant:
    table = data.get(role)
    if not isinstance(table, dict):
        raise DemoError(f"{where}: missing table [{role}]")
    kernels = table.get("kernels")
    if not isinstance(kernels, list) or not kernels or not all(isinstance(k, str) for k in kernels):
        raise DemoError(f"{where}: [{role}] kernels must be a non-empty list of names")
    return Variant(
        role=role,
        label=str(table.get("label", role)),
        kernels=tuple(kernels),
        description=_text(table, "description", f"{where} [{role}]"),
        run=str(table.get("run", f"run_{role}")),
    )


def _signature(table: dict[str, Any], where: str) -> Signature:
    sig = Signature(
        metric=_text(table, "metric", where),
        bad=_text(table, "bad", where),
        good=_text(table, "good", where),
        note=_text(table, "note", where),
        scope=str(table.get("scope", "each")),
    )
    if sig.scope not in ("each", "sum"):
        raise DemoError(f"{where}: signature scope must be 'each' or 'sum', not {sig.scope!r}")
    for cond in (sig.bad, sig.good):
        parse_condition(cond, where)
    return sig


def parse_condition(text: str, where: str = "condition") -> tuple[str, float]:
    """Split a signature condition such as ``">= 28"`` into its operator and threshold.

    Args:
        text: The condition string from ``demo.toml``.
        where: Context for the error message.

    Returns:
        The operator (one of ``CONDITION_OPERATORS``) and the threshold as a float.

    Raises:
        DemoError: If the text is not an operator followed by a number.

    """
    stripped = text.strip()
    for op in CONDITION_OPERATORS:
        if stripped.startswith(op):
            try:
                return op, float(stripped[len(op) :])
            except ValueError:
                break
    raise DemoError(f"{where}: bad signature condition {text!r} (expected e.g. '< 8', '>= 28')")


def _load_demo(path: Path) -> Demo:
    toml_path = path / "demo.toml"
    where = str(toml_path)
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DemoError(f"{where}: cannot read demo metadata: {exc}") from None
    lesson_table = data.get("lesson")
    if not isinstance(lesson_table, dict):
        raise DemoError(f"{where}: missing table [lesson]")
    lesson = Lesson(
        what=_text(lesson_table, "what", f"{where} [lesson]"),
        why=_text(lesson_table, "why", f"{where} [lesson]"),
        fix=_text(lesson_table, "fix", f"{where} [lesson]"),
        expect=_text(lesson_table, "expect", f"{where} [lesson]"),
    )
    extras = tuple(
        _variant({"extra": table}, "extra", f"{where} [[extra]]") for table in data.get("extra", [])
    )
    signatures = tuple(
        _signature(table, f"{where} [[signature]] #{i + 1}")
        for i, table in enumerate(data.get("signature", []))
    )
    return Demo(
        name=_text(data, "name", where),
        category=_text(data, "category", where),
        title=_text(data, "title", where),
        problem=_text(data, "problem", where),
        tolerance=_text(data, "tolerance", where),
        lesson=lesson,
        bad=_variant(data, "bad", where),
        good=_variant(data, "good", where),
        extras=extras,
        signatures=signatures,
        path=path,
    )


def _order(demo: Demo) -> tuple[int, str]:
    try:
        return CHECKLIST_IDS.index(demo.name), demo.name
    except ValueError:
        return len(CHECKLIST_IDS), demo.name


def list_demos() -> list[Demo]:
    """Read every ``demo.toml`` under :func:`kernels_dir`, in checklist order.

    Returns:
        One :class:`Demo` per folder that has a ``demo.toml``.

    Raises:
        DemoError: If a ``demo.toml`` is unreadable or misses a required field.

    """
    root = kernels_dir()
    if not root.is_dir():
        raise DemoError(f"demo kernels folder not found: {root}")
    demos = [_load_demo(p) for p in sorted(root.iterdir()) if (p / "demo.toml").is_file()]
    return sorted(demos, key=_order)


def get_demo(name: str) -> Demo:
    """Return the demo called ``name`` (a checklist id such as ``"coalescing"``).

    Raises:
        DemoError: If no demo has that name.

    """
    demos = list_demos()
    for demo in demos:
        if demo.name == name:
            return demo
    known = ", ".join(d.name for d in demos)
    raise DemoError(f"unknown demo {name!r}; known demos: {known}")
