"""Census, then depth: profile one launch per kernel shape, weighted by every launch's time.

A training or decode loop launches the same few dozen kernel shapes thousands of times, and
the advisor set costs ~20 replay passes per launch. The default profiling run therefore has two
steps (:func:`ncu_advisor.profiling.run.run_profile`):

1. **Census**: the program once under ncu with the duration alone (one pass, no replay; about
   15 ms per launch on the H200): every launch's name, grid, block, dynamic shared memory and
   duration (:func:`read_census`).
2. **Depth**: the advisor set on one launch of each shape that matters (:func:`plan_depth`:
   the largest shapes until ``coverage`` of the GPU time), through ncu's own filter
   ``--filter-mode per-launch-config -c 1``, which profiles the first launch of each
   (function name, grid, block, shared memory) it meets (:func:`depth_filters`).

ncu keys that filter on the *function* name by default, so two instantiations of one template
with the same launch configuration (PyTorch's ``multi_tensor_apply_kernel`` for each optimizer
stage, ``kT<1>``/``kT<2>``) would count as one; under ``--kernel-name-base mangled`` the key is
the mangled name, which tells instantiations apart, and the report still prints demangled names
(both probed on the H200: ``scripts/probe/filter_mode_probe.py``, results in
``benchmarks/results/overhead_2026-12-02/``). One depth run therefore reaches every planned
shape; it used to take a second run of the program.

:func:`weigh` then gives every deep-profiled launch its shape's census count and mean
duration (``invocations``, ``duration_ns``), so findings, actions and time shares count all
launches; the time of shapes left out is kept as ``unprofiled_time_ns`` in the session.
Nothing here loads pandas before the depth step runs.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..units import normalize_unit

# What the census collects: the duration (one pass) and the launch attributes ncu reads
# without a pass. Grid and block are columns of every raw page.
CENSUS_METRICS = "gpu__time_duration.sum,launch__shared_mem_per_block_dynamic"
DEFAULT_COVERAGE = 0.98
# At most this many shapes are deep-profiled (~0.65 s each under the advisor set on the H200).
MAX_SHAPES = 200
# ncu options that already choose the launches to profile: with any of them the user's
# choice is kept and no census is taken.
SELECTING_OPTIONS = ("-k", "--kernel-name", "-c", "--launch-count", "-s", "--launch-skip",
                     "--kernel-id", "--nvtx-include", "--nvtx-exclude", "--filter-mode",
                     "--launch-skip-before-match", "--range-filter", "--replay-mode",
                     "--kernel-name-base")  # the last: changes what the depth run's -k matches

_RETURN_TYPE = re.compile(r"^(?:(?:static|__global__|void|int|float|double|unsigned|bool)\s+)+")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
# ncu does not print one kernel's name the same way in every report: the census of a PyTorch
# loop said `void at::<unnamed>::multi_tensor_apply_kernel<at::<unnamed>::...>`, the depth run
# under `-k regex:` `void unnamed>::multi_tensor_apply_kernel<unnamed>::...>` (the `at::<` lost,
# so a bracket cannot be told from the anonymous namespace). Shapes are matched on the name
# without namespaces, "unnamed", angle brackets, colons and spaces.
_QUALIFIER = re.compile(r"[A-Za-z_]\w*::|\(anonymous namespace\)|\bunnamed\b|[<>:\s]")


def canonical_name(name: str) -> str:
    """A kernel name with namespaces and spaces removed, to match one kernel across reports."""
    return _QUALIFIER.sub("", name)


def function_name(name: str) -> str:
    """The bare function name ncu's ``-k`` matches: no return type, namespaces, templates, params.

    ``void at::<unnamed>::multi_tensor_apply_kernel<...>(T1, T2)`` -> ``multi_tensor_apply_kernel``.
    """
    text = _RETURN_TYPE.sub("", name.strip(), count=1)
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0:
            break  # the parameter list
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip().split("::")[-1].strip()


@dataclass(frozen=True)
class Shape:
    """One kernel shape of the census: every launch with this name and launch configuration.

    Attributes:
        name: The kernel name as the raw page prints it (demangled, with its parameters).
        grid: ``"(x, y, z)"`` as the raw page prints it.
        block: Likewise.
        shared_bytes: Dynamic shared memory per block (0 when not reported).
        launches: How many launches of the census had this shape.
        time_ns: Their summed duration.
        first: Index of its first launch in the census (launch order).

    """

    name: str
    grid: str
    block: str
    shared_bytes: int
    launches: int
    time_ns: float
    first: int

    @property
    def function(self) -> str:
        """The bare function name (what the depth run's ``-k`` names)."""
        return function_name(self.name)

    @property
    def key(self) -> tuple[str, str, str, int]:
        """Name, grid, block and shared memory: what makes two launches one shape."""
        return (self.name, self.grid, self.block, self.shared_bytes)

    @property
    def match_key(self) -> tuple[str, str, str, int]:
        """The key with the name in :func:`canonical_name` form (how deep launches find it)."""
        return (canonical_name(self.name), self.grid, self.block, self.shared_bytes)


@dataclass
class Census:
    """Every launch of a census run, in launch order, and its shapes (largest time first)."""

    launch_keys: list[tuple[str, str, str, int]]
    shapes: list[Shape]
    durations: list[float] = field(default_factory=list)  # each launch's, in launch order

    @property
    def total_ns(self) -> float:
        """GPU time of every launch the census saw."""
        return sum(s.time_ns for s in self.shapes)

    @property
    def launches(self) -> int:
        """Launches the census saw."""
        return len(self.launch_keys)


@dataclass
class DepthPlan:
    """The shapes to deep-profile and how ncu is asked for them.

    Attributes:
        census: What the census saw.
        selected: The shapes chosen, largest time first.
        filters: ncu's filter options for the depth run.

    """

    census: Census
    selected: list[Shape]
    filters: list[str] = field(default_factory=list)

    @property
    def selected_ns(self) -> float:
        """Census time of the shapes chosen for the depth step."""
        return sum(s.time_ns for s in self.selected)

    @property
    def coverage(self) -> float:
        """Share of the census time the chosen shapes hold (0..1)."""
        total = self.census.total_ns
        return self.selected_ns / total if total > 0 else 1.0

    def summary(self) -> str:
        """``"312 launches, 41 shapes; deep-profiling 17 that hold 98.1% of the GPU time"``."""
        c = self.census
        return (f"census: {c.launches} launches, {len(c.shapes)} kernel shapes; deep-profiling "
                f"{len(self.selected)} that hold {100 * self.coverage:.1f}% of the GPU time")

    def session_facts(self) -> dict:
        """The plan as the report's session shows it."""
        return {"launches": self.census.launches, "shapes": len(self.census.shapes),
                "deep_shapes": len(self.selected), "coverage_pct": round(100 * self.coverage, 2),
                "total_ns": self.census.total_ns}


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "").replace("\u00a0", "")
    try:
        return float(text)
    except ValueError:
        return None


def read_census(raw_csv: Path) -> Census:
    """Read a census run's raw page (``--page raw --print-units base``) into its shapes.

    Raises:
        ValueError: The file has no raw-page header or no duration column.

    """
    keys: list[tuple[str, str, str, int]] = []
    durations: list[float] = []
    with raw_csv.open(newline="", encoding="utf-8", errors="replace") as fh:
        rows = csv.reader(fh)
        header = None
        for row in rows:
            if row and row[0] == "ID":
                header = row
                break
        needed = ("Kernel Name", "Grid Size", "Block Size", "gpu__time_duration.sum")
        if header is None or not all(name in header for name in needed):
            raise ValueError(f"{raw_csv}: not a census raw page (no ID / "
                             f"{' / '.join(needed)} columns)")
        col = {name: header.index(name) for name in header}
        scale = 1.0
        for row in rows:
            if row and not row[0].strip().isdigit():  # the units row
                unit = row[col["gpu__time_duration.sum"]] if len(row) == len(header) else ""
                scale = normalize_unit(unit)[1]  # base units: ns, factor 1
                continue
            if len(row) != len(header):
                continue
            smem = col.get("launch__shared_mem_per_block_dynamic")
            shared = _number(row[smem]) if smem is not None else None
            keys.append((row[col["Kernel Name"]], row[col["Grid Size"]].strip(),
                         row[col["Block Size"]].strip(), int(shared or 0)))
            duration = _number(row[col["gpu__time_duration.sum"]])
            durations.append((duration or 0.0) * scale)
    return Census(keys, _shapes(keys, durations), durations)


def _shapes(keys: Sequence[tuple[str, str, str, int]], durations: Sequence[float]) -> list[Shape]:
    count: dict[tuple, int] = {}
    time: dict[tuple, float] = {}
    first: dict[tuple, int] = {}
    for i, (key, duration) in enumerate(zip(keys, durations, strict=True)):
        count[key] = count.get(key, 0) + 1
        time[key] = time.get(key, 0.0) + duration
        first.setdefault(key, i)
    shapes = [Shape(*key, launches=count[key], time_ns=time[key], first=first[key])
              for key in count]
    return sorted(shapes, key=lambda s: (-s.time_ns, s.first))


def plan_depth(census: Census, coverage: float = DEFAULT_COVERAGE,
               max_shapes: int = MAX_SHAPES) -> DepthPlan:
    """Choose the shapes to deep-profile: the largest first, until ``coverage`` of the time."""
    total = census.total_ns
    selected: list[Shape] = []
    held = 0.0
    for shape in census.shapes:
        if selected and (held >= coverage * total or len(selected) >= max_shapes):
            break
        selected.append(shape)
        held += shape.time_ns
    plan = DepthPlan(census, selected)
    plan.filters = depth_filters(plan)
    return plan


def _name_filter(functions: Iterable[str]) -> list[str]:
    """``-k`` for these bare function names under ``--kernel-name-base mangled``.

    A C-linkage kernel's mangled name is its bare name; a C++ one holds it after its length
    (``_Z2kTILi1EEvPfi``, ``..._GLOBAL__N_125multi_tensor_apply_kernelI...``). The second form
    may also match a longer name that starts with the same text: one more shape profiled.
    """
    names = sorted(set(functions))
    if not names or not all(_IDENTIFIER.match(n) for n in names):
        return []  # a name ncu's regex might read otherwise: profile every configuration
    plain = "|".join(names)
    encoded = "|".join(f"{len(n)}{n}" for n in names)
    return ["-k", f"regex:^({plain})$|({encoded})"]


def depth_filters(plan: DepthPlan) -> list[str]:
    """Return ncu's filter options for the depth run of a plan (see the module docstring).

    One run of the program: the mangled-name key reaches every instantiation of a template.
    """
    every = {s.function for s in plan.census.shapes}
    chosen = {s.function for s in plan.selected}
    filters = ["--kernel-name-base", "mangled", "--filter-mode", "per-launch-config", "-c", "1"]
    if chosen != every:
        filters += _name_filter(chosen)
    return filters


def weigh(report, plan: DepthPlan):
    """Give each deep-profiled launch its shape's census weight; drop repeats of a shape.

    Returns:
        The report with one launch per shape profiled, ``invocations`` the shape's census
        count, ``duration_ns`` its census mean, and the session's ``census`` facts and
        ``unprofiled_time_ns`` (the census time of shapes with no deep launch).

    """
    from ..report import subset

    by_key = {s.match_key: s for s in plan.census.shapes}
    launches = report.launches
    smem = report.metric_rows(["launch__shared_mem_per_block_dynamic"])
    shared = dict(zip(smem["launch"], smem["value"], strict=False)) if len(smem) else {}
    keep, seen, weights, unmatched = [], set(), {}, 0
    for row in launches.itertuples():
        grid = f"({int(row.grid_x)}, {int(row.grid_y)}, {int(row.grid_z)})" \
            if row.grid_x == row.grid_x else ""
        block = f"({int(row.block_x)}, {int(row.block_y)}, {int(row.block_z)})" \
            if row.block_x == row.block_x else ""
        value = shared.get(row.launch)
        key = (canonical_name(row.name), grid, block,
               int(value) if value is not None and value == value else 0)
        shape = by_key.get(key)
        if shape is None:  # shared memory not in the deep page: match on the rest
            matches = [s for k, s in by_key.items() if k[:3] == key[:3]]
            shape = matches[0] if len(matches) == 1 else None
        if shape is None:
            unmatched += 1
            keep.append(row.launch)
            continue
        if shape.key in seen:
            continue
        seen.add(shape.key)
        keep.append(row.launch)
        weights[row.launch] = shape
    out = subset(report, keep)
    old_to_new = {old: new for new, old in enumerate(keep)}
    invocations = out.launches["invocations"].copy()
    duration = out.launches["duration_ns"].copy()
    for old, shape in weights.items():
        i = old_to_new[old]
        invocations.iloc[i] = shape.launches
        duration.iloc[i] = shape.time_ns / shape.launches
    out.launches["invocations"] = invocations.astype("int64")
    out.launches["duration_ns"] = duration.astype("float64")
    out.launches = out.launches.assign(**_host_sums(plan.census, weights, old_to_new,
                                                    len(out.launches)))
    profiled = {s.key for s in weights.values()}
    missing = [s for s in plan.census.shapes if s.key not in profiled]
    out.session["census"] = {**plan.session_facts(), "profiled_shapes": len(profiled)}
    out.session["unprofiled_time_ns"] = sum(s.time_ns for s in missing)
    if unmatched:
        out.warnings.append(f"{unmatched} deep-profiled launch(es) match no census shape (the "
                            "program launched differently the second time): counted once each")
    hidden = [s for s in plan.selected if s.key not in profiled]
    if hidden:
        share = 100 * sum(s.time_ns for s in hidden) / (plan.census.total_ns or 1)
        out.warnings.append(
            f"{len(hidden)} planned shape(s) holding {share:.1f}% of the GPU time were not "
            f"reached by the depth run (first: {function_name(hidden[0].name)} {hidden[0].grid}); "
            "--all-launches profiles every launch")
    return out


def _host_sums(census: Census, weights: dict, old_to_new: dict[int, int],
               rows: int) -> dict[str, list[float]]:
    """The host queue model over the census's every launch, summed per deep-profiled shape.

    The deep rows stand for their shape's launches but have lost the launch order the model
    needs; the census has it (:mod:`~ncu_advisor.derive.host_timeline`).
    """
    # Imported here: the census runs before the program, and pandas must not delay ncu.
    import numpy as np
    import pandas as pd

    from ..derive.host_timeline import (
        BOUND_COLUMN,
        NATIVE_LAUNCH_NS,
        PYTHON_LAUNCH_NS,
        WAIT_COLUMN,
        python_driven,
        queue_model,
    )
    from ..derive.origin import origin_table

    waits = [np.nan] * rows
    bound = [np.nan] * rows
    if len(census.durations) != len(census.launch_keys):
        return {WAIT_COLUMN: waits, BOUND_COLUMN: bound}
    table = origin_table()
    found = {n: table.classify(n) for n in {k[0] for k in census.launch_keys}}
    origin = pd.Series([found[k[0]].id for k in census.launch_keys])
    eager = pd.Series([found[k[0]].eager for k in census.launch_keys])
    cost = PYTHON_LAUNCH_NS if python_driven(origin, eager) else NATIVE_LAUNCH_NS
    w, b = queue_model(np.asarray(census.durations, dtype="float64"), cost)
    per_wait: dict[tuple, float] = {}
    per_bound: dict[tuple, float] = {}
    for key, wait, is_bound in zip(census.launch_keys, np.nan_to_num(w).tolist(), b.tolist(),
                                   strict=True):
        per_wait[key] = per_wait.get(key, 0.0) + wait
        per_bound[key] = per_bound.get(key, 0.0) + float(is_bound)
    for old, shape in weights.items():
        waits[old_to_new[old]] = per_wait.get(shape.key, np.nan)
        bound[old_to_new[old]] = per_bound.get(shape.key, np.nan)
    return {WAIT_COLUMN: waits, BOUND_COLUMN: bound}
