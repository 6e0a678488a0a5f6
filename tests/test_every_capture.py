"""Every real capture in the repository analyzes end to end into valid JSON and HTML, and
every number it shows twice (a finding's evidence, a panel, the summary) is the same."""

from __future__ import annotations

import io
import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import analysis_cached, first_of_each, read_cached

from ncu_advisor import ReportParseError, analyze, read_report
from ncu_advisor.derive.bound import bound_of
from ncu_advisor.render.html import render_html
from ncu_advisor.render.text import render_text
from ncu_advisor.rules_engine.loader import load_rules
from ncu_advisor.rules_engine.schema import All, Comparison

ROOT = Path(__file__).resolve().parent.parent
# Notes and logs beside the captures: what the machine reported, pytest's output, ncu's own
# messages of each run (no results), ncu-advise's printed output in docs/examples.
NOT_CAPTURES = re.compile(r"(^|/)(logs/|host\.txt$|pytest_gpu\.txt$|[^/]*\.out\.txt$)")
# Pages that hold no launches: read alone they are a one-line error, beside a details export
# of the same capture they add to it.
PAGES = re.compile(r"\.(session|source)\.(csv|txt)(\.gz|\.xz)?$")


def _form(path: Path) -> str:
    """The name's form, below a .gz: .csv, .ncu-rep, .txt or other."""
    suffixes = [s for s in path.suffixes if s not in (".gz", ".xz")]
    return suffixes[-1] if suffixes else ""


_ALL = sorted(p for folder in ("sample_reports", "docs/examples")
              for p in (ROOT / folder).rglob("*")
              if p.is_file() and _form(p) in (".csv", ".ncu-rep", ".txt")
              and not NOT_CAPTURES.search(p.relative_to(ROOT).as_posix()))
CAPTURES = [p for p in _ALL if not PAGES.search(p.name)]
PAGE_FILES = [p for p in _ALL if PAGES.search(p.name)]


def _inputs(path: Path) -> Path | list[Path]:
    """A source page names no launch: it is read with the details export of its capture."""
    if path.name.endswith(".source.csv"):
        return [path.with_name(path.name.replace(".source.csv", ".details.csv")), path]
    return path


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


_FIRST_OF_FORM = first_of_each(CAPTURES)

# The per-variant raw exports (NAME.bad.raw / NAME.good.raw) repeat the launches of NAME.raw,
# which stays in the quick run; a raw page takes seconds to analyze and render.
_SLOW = re.compile(r"\.(bad|good)\.raw\.csv(\.gz)?$")


def _analyzes_marks(path: Path):
    if _SLOW.search(path.name):
        return pytest.param(path, marks=pytest.mark.slow)
    if path in _FIRST_OF_FORM:
        return path
    if path.parent.name == "corpus":
        # 82 programs in 4 forms: the quick run and CI take the first of each form (the dev
        # programs are analyzed by test_corpus too); the sweep takes every one.
        return pytest.param(path, marks=[pytest.mark.slow, pytest.mark.sweep])
    # The others: the quick run takes the first of each folder and form, CI's slow phase all.
    return pytest.param(path, marks=pytest.mark.slow)


@pytest.mark.parametrize("path", [_analyzes_marks(p) for p in CAPTURES], ids=_ids(CAPTURES))
def test_capture_analyzes(path):
    # Read and analyzed once per test run (conftest), shared with the other modules.
    report = read_cached(_inputs(path))
    data = analysis_cached(_inputs(path)).to_dict()
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN or inf anywhere
    assert len(data["kernels"]) == len(report.launches) > 0
    assert findings_panel_disagreements(data) == []
    assert render_text(data).startswith("ncu-advise:")
    # The streamed JSON writer (orjson, kernel by kernel) writes the same document.
    written = io.BytesIO()
    analysis_cached(_inputs(path)).write_json(written)
    streamed = json.loads(written.getvalue())
    assert streamed.pop("generated_at") and data.pop("generated_at")
    assert streamed == json.loads(json.dumps(data))


# The HTML page of a capture takes ~0.2 s: the quick run renders the first capture of each
# folder and form, the sweep (-m slow) every one.
@pytest.mark.parametrize("path", [
    p if p in _FIRST_OF_FORM and not _SLOW.search(p.name)
    else pytest.param(p, marks=[pytest.mark.slow, pytest.mark.sweep]) for p in CAPTURES],
    ids=_ids(CAPTURES))
def test_capture_renders_html(path):
    report = read_cached(_inputs(path))
    if len(report.launches) > 30:  # the probes' 499 launches make a large page; text suffices
        return
    assert "<html" in render_html(analysis_cached(_inputs(path)).to_dict())


@pytest.mark.parametrize("path", PAGE_FILES, ids=_ids(PAGE_FILES))
def test_session_and_source_pages(path):
    page = PAGES.search(path.name)[1]
    with pytest.raises(ReportParseError) as err:
        read_report(path)
    assert str(err.value).startswith(f"{path}: a --page {page} export")
    assert "\n" not in str(err.value)
    details = next(path.parent.glob(PAGES.sub("", path.name) + ".details.csv*"))
    if path.name.endswith((".txt", ".txt.gz", ".txt.xz")):
        return  # a plain-text source page cannot be read beside anything
    merged = read_cached([details, path])
    alone = read_cached(details)
    assert len(merged.launches) == len(alone.launches)
    if page == "session":
        assert merged.session["ncu_command"].split()[0].endswith("ncu")
    json.dumps(analysis_cached([details, path]).to_dict(), allow_nan=False)


def test_there_are_captures():
    assert len(CAPTURES) >= 150
    forms = {_form(p) + (p.suffix if p.suffix in (".gz", ".xz") else "") for p in CAPTURES}
    assert forms == {".csv", ".csv.gz", ".csv.xz", ".ncu-rep", ".ncu-rep.gz", ".txt", ".txt.gz",
                     ".txt.xz"}
    assert len(PAGE_FILES) >= 9  # 1 session, 4 source CSV, 4 source text


# --- one definition per concept: a finding's numbers are the panels' numbers ----------------
_BOUND_FLAGS = {"memory_bound": "memory", "compute_bound": "compute", "latency_bound": "latency"}
# Rules whose condition places the kernel, beyond a `*_bound = 1` comparison: a throughput
# below 40% of peak is below the 60% that makes a kernel latency-bound (derive/bound.py).
_RULE_BOUND = {"roofline.latency-bound": "latency"}


def _bound_required(condition) -> str | None:
    """The bound a rule's condition requires (``{ q = "memory_bound", eq = 1 }``), if any."""
    if isinstance(condition, All):
        return next((b for c in condition.all if (b := _bound_required(c))), None)
    if isinstance(condition, Comparison) and condition.q in _BOUND_FLAGS and condition.eq == 1:
        return _BOUND_FLAGS[condition.q]
    return None


_RULE_BOUNDS = {r.id: _RULE_BOUND.get(r.id) or (_bound_required(r.when) if r.when else None)
                for r in load_rules()}


def _prod(values: list) -> float | None:
    return None if any(v is None for v in values) else float(math.prod(values))


def findings_panel_disagreements(data: dict) -> list[str]:
    """Every place where a number is shown twice, in a finding and in a panel, and differs.

    Per kernel: the quantity table, the occupancy, launch-shape and roofline panels, the time
    share, and each finding's evidence; then the summary (bound counts, top kernels) and the
    application findings (a hot spot's share of the time).
    """
    problems: list[str] = []
    total = data["summary"]["total_duration_ns"]

    def differ(where: str, what: str, a, b, abs_tol: float = 0.0, rel: float = 1e-9) -> None:
        if a is None or b is None:
            return
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            same = a == b
        else:
            same = math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
        if not same:
            problems.append(f"{where}: {what}: {a!r} != {b!r}")

    kernels = {k["launch"]: k for k in data["kernels"]}
    for k in data["kernels"]:
        where = f"launch {k['launch']} {k['short_name']}"
        q = {name: v["value"] for name, v in k["quantities"].items()}
        occ, shape, roof = k["occupancy"], k["launch_shape"], k["roofline"]
        # The panels against the quantity table (what rules read).
        for panel_field, name in (("theoretical_pct", "theoretical_occupancy_pct"),
                                  ("achieved_pct", "achieved_occupancy_pct"),
                                  ("registers_per_thread", "registers_per_thread"),
                                  ("shared_mem_per_block", "shared_mem_per_block"),
                                  ("waves_per_sm", "waves_per_sm")):
            differ(where, f"occupancy.{panel_field} vs {name}", occ.get(panel_field), q.get(name))
        differ(where, "launch_shape.grid_size vs grid", shape.get("grid_size"),
               _prod(k["grid"]))
        differ(where, "launch_shape.block_size vs block", shape.get("block_size"),
               _prod(k["block"]))
        # ncu prints waves with two decimals in CSV and text forms.
        differ(where, "launch_shape.waves vs waves_per_sm", shape.get("waves"),
               q.get("waves_per_sm"), abs_tol=0.006, rel=0.0)
        if q.get("sm_pct") is not None and q.get("mem_pct") is not None:
            differ(where, "roofline.bound vs sm_pct/mem_pct", roof["bound"],
                   bound_of(q["sm_pct"], q["mem_pct"]))
        differ(where, "roofline.arithmetic_intensity", roof["arithmetic_intensity"],
               q.get("arith_intensity_dram"), rel=1e-6)
        if total and k["duration_ns"] is not None:
            differ(where, "time_share", k["time_share"],
                   k["duration_ns"] * k["invocations"] / total)
        # Each finding's evidence against the same kernel's table and panels.
        for f in k["findings"]:
            at = f"{where} {f['rule']}"
            ev = {name: e["value"] for name, e in f["evidence"].items()}
            for name, value in ev.items():
                differ(at, name, value, q.get(name))
            if (bound := _RULE_BOUNDS.get(f["rule"])) is not None:
                differ(at, "roofline.bound", roof["bound"], bound)
            if "time_share_pct" in ev and k["time_share"] is not None:
                differ(at, "time_share_pct", ev["time_share_pct"], 100.0 * k["time_share"])
            if "wave_tail_waste_pct" in ev and (shape.get("waves") or 0.0) >= 1.0:
                # The finding reads ncu's waves (two decimals), the panel counts blocks.
                differ(at, "wave_tail_waste_pct vs launch_shape.tail_idle_slots_pct",
                       ev["wave_tail_waste_pct"], shape.get("tail_idle_slots_pct"),
                       abs_tol=1.0, rel=0.0)
            for name, panel, panel_field in (
                    ("waves_per_sm", occ, "waves_per_sm"),
                    ("theoretical_occupancy_pct", occ, "theoretical_pct"),
                    ("achieved_occupancy_pct", occ, "achieved_pct"),
                    ("registers_per_thread", occ, "registers_per_thread"),
                    ("block_size", shape, "block_size"), ("grid_size", shape, "grid_size"),
                    ("sm_count", shape, "sm_count")):
                differ(at, f"{name} vs {panel_field}", ev.get(name), panel.get(panel_field))
            if "sm_fill_pct" in ev and shape.get("idle_sm_pct") is not None:
                differ(at, "sm_fill_pct vs 100 - idle_sm_pct", ev["sm_fill_pct"],
                       100.0 - shape["idle_sm_pct"], abs_tol=1e-9)
            if "block_lane_waste_pct" in ev:
                differ(at, "block_lane_waste_pct", ev["block_lane_waste_pct"],
                       shape.get("wasted_lanes_pct"), abs_tol=1e-9)
    # The summary against the kernels.
    counts = Counter(k["roofline"]["bound"] or "unknown" for k in data["kernels"])
    differ("summary", "bounds", data["summary"]["bounds"],
           {b: counts.get(b, 0) for b in ("memory", "compute", "latency", "unknown")})
    for top in data["summary"]["top_kernels"]:
        k = kernels[top["launch"]]
        for key, value in (("time_share", top["time_share"]), ("duration_ns", top["duration_ns"]),
                           ("bound", top["bound"])):
            differ(f"top kernel {top['launch']}", key, value,
                   k["roofline"]["bound"] if key == "bound" else k[key])
    for g in data["findings"]:
        if "time_share_pct" in g["evidence"] and g["launch_ids"] and g["kernel"] == "application":
            share = sum(kernels[i]["time_share"] or 0.0 for i in g["launch_ids"])
            differ(f"application {g['rule']}", "time_share_pct",
                   g["evidence"]["time_share_pct"]["value"], 100.0 * share, rel=1e-6)
    return problems


def test_disagreements_are_found():
    """The check above can fail: each doctored number is reported."""
    data = analyze(read_report(ROOT / "sample_reports/demos/local-memory.raw.csv")).to_dict()
    assert findings_panel_disagreements(data) == []
    tail = next(k for k in data["kernels"] for f in k["findings"]
                if f["rule"] == "launch-config.tail-effect")
    bound = next(k for k in data["kernels"] for f in k["findings"]
                 if f["rule"] == "roofline.memory-bound")
    doctored = [
        (tail["launch_shape"], "tail_idle_slots_pct", 2.0, "wave_tail_waste_pct vs launch_shape"),
        (tail["launch_shape"], "waves", 0.02, "launch_shape.waves vs waves_per_sm"),
        (bound["roofline"], "bound", "compute", "roofline.bound"),
        (bound["occupancy"], "achieved_pct", 1.0, "occupancy.achieved_pct"),
        (bound, "time_share", 0.01, "time_share"),
    ]
    for entry, key, change, message in doctored:
        kept = entry[key]
        entry[key] = change if isinstance(change, str) else kept + change
        problems = findings_panel_disagreements(data)
        entry[key] = kept
        assert any(message in p for p in problems), (key, problems)
