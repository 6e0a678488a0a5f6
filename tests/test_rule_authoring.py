"""Rule authoring (issue 14): the checker, rule cases, derived requirements, one definition
per concept (bound, tail), and the engine's import structure. That findings and panels agree
on every capture is checked in ``test_every_capture.py``."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ncu_advisor.analysis.cases import run_cases
from ncu_advisor.cli import main
from ncu_advisor.derive.bound import bound_of
from ncu_advisor.derive.launch_shape import launch_shape, tail_idle_pct
from ncu_advisor.derive.quantities import (
    DERIVED,
    DERIVED_INFO,
    QUANTITIES,
    add_derived,
    inputs_of,
    known,
    time_share_pct,
)
from ncu_advisor.rules_engine.loader import builtin_rules_dir, check_rules, load_rule_file

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples" / "rules"
ENGINE = ROOT / "ncu_advisor" / "rules_engine"


def test_example_rule_from_the_guide_checks_and_its_cases_pass():
    rules, problems = check_rules([EXAMPLES])
    assert problems == []
    assert "cache.l2-misses" in {r.id for r in rules}  # a user category beside the checklist
    results, problems = run_cases(EXAMPLES)
    assert problems == [] and len(results) >= 5
    assert [str(r) for r in results if r.problem] == []


def test_check_reports_every_mistake_at_once(tmp_path, capsys):
    (tmp_path / "cache.l2-misses.toml").write_text(
        (EXAMPLES / "cache.l2-misses.toml").read_text()
        .replace('category = "cache"', 'category = "memory"')
        .replace("{l2_hit_pct:.0f}% of its", "{l2_hit_rate:.0f}% of its")
        .replace('{ q = "l2_hit_pct", lt = 20 }', '{ q = "l2_hit_pc", lte = 20 }'))
    shutil.copy(builtin_rules_dir() / "roofline.hot-spots.toml", tmp_path)
    assert main(["rules", "--check", str(tmp_path)]) == 1  # the check ran and found problems
    err = capsys.readouterr().err
    lines = err.splitlines()
    # One problem per line, each naming its file; then one summary line.
    assert lines[-1] == f"ncu-advise: error: {len(lines) - 1} problem(s) in rule files"
    assert all(ln.startswith(f"ncu-advise: {tmp_path}") for ln in lines[:-1])
    assert len(lines) >= 5 and "Traceback" not in err
    for expected in ("unknown operator 'lte' (did you mean 'lt' or 'le'?)",
                     "unknown quantity 'l2_hit_pc' (did you mean 'l2_hit_pct'",
                     "must start with its category",
                     "unknown placeholder {l2_hit_rate} (did you mean 'l2_hit_pct'",
                     "'roofline.hot-spots' is already defined by"):
        assert expected in err, expected
    # One clear line per mistake, not pydantic's list of union alternatives.
    assert "Input should be" not in err and "union" not in err.lower()


def test_unknown_condition_form_is_one_error(tmp_path):
    path = tmp_path / "cache.x.toml"
    path.write_text((EXAMPLES / "cache.l2-misses.toml").read_text()
                    .replace('id = "cache.l2-misses"', 'id = "cache.x"')
                    .replace('{ q = "memory_bound", eq = 1 }', '{ every = [] }'))
    _, problems = check_rules([tmp_path], builtin=False)
    assert len(problems) == 1 and "a condition is { q = QUANTITY" in problems[0]


def test_failing_case_and_orphan_cases_file_are_reported(tmp_path, capsys):
    for f in EXAMPLES.iterdir():
        shutil.copy(f, tmp_path)
    cases = tmp_path / "cache.l2-misses.cases.toml"
    cases.write_text(cases.read_text().replace('severity = "medium"', 'severity = "high"'))
    (tmp_path / "cache.gone.cases.toml").write_text("[[case]]\nexpect = 'silent'\n")
    assert main(["rules", "--test", str(tmp_path)]) == 1  # a failing test run exits 1
    out, err = capsys.readouterr()
    assert "expected severity high, got medium" in out
    assert "no rule 'cache.gone' beside it" in err


def test_requirements_come_from_the_condition():
    needs = {p.stem: load_rule_file(p).needs for p in builtin_rules_dir().glob("*.toml")
             if not p.name.endswith(".cases.toml")}
    # Quantities used only under `not` (guards a details page lacks) are never required, nor
    # one that only some alternatives of an `any` read (mem_pct, or scattered-enough loads).
    assert needs["coalescing.global-loads"] == ["global_ld_bytes_per_sector"]
    assert needs["bank-conflicts.shared-memory"] == ["shared_conflict_pct"]
    # Under `any`, only what every alternative reads; an explicit `requires` adds to it; a
    # plain comparison in `all` is required (matrix_product: every form has it, from names).
    assert needs["precision.fp32-without-tensor-cores"] == ["fma_pipe_pct", "matrix_product"]
    assert needs["local-memory.local-traffic"] == ["spill_requests"]
    # All conditions of an `all` are required (before: 14 rules read unlisted quantities).
    assert set(needs["fast-math.transcendentals"]) == {"fma_pipe_pct", "sm_pct", "xu_pipe_pct"}


def test_a_missing_metric_is_not_evaluated_but_an_undefined_ratio_is_silent():
    rule = load_rule_file(builtin_rules_dir() / "precision.fp64-arithmetic.toml")
    from ncu_advisor.analysis.cases import outcome

    # No floating-point work at all: the FP64 share is undefined, not missing.
    zero = {"flops_fp64": 0.0, "flops_fp32": 0.0, "flops_fp16": 0.0, "flops_tensor": 0.0}
    assert outcome(rule, zero) == ("silent", None)
    assert outcome(rule, {"dram_pct": 80.0})[0] == "not-evaluated"


def test_derived_dependencies_are_the_formula_inputs():
    earlier = {q.name for q in QUANTITIES}
    for d in DERIVED:
        assert all(known(i) for i in d.inputs), d.name
        # add_derived computes in definition order: an input defined later would read NaN.
        assert set(d.inputs) <= earlier, (d.name, set(d.inputs) - earlier)
        earlier.add(d.name)
        assert DERIVED_INFO[d.name][2] == d.inputs
        # Changing any input changes the result somewhere: no input is declared but unused. A
        # fallback route's inputs count where the routes preferred to it lack an input.
        if d.routes:
            assert set().union(*d.routes) == set(d.inputs), d.name
        rng = np.random.default_rng(14)
        for k, route in enumerate(d.routes or (d.inputs,)):
            base = pd.DataFrame({i: rng.uniform(0.0, 150.0, 64) for i in d.inputs})
            for preferred in d.routes[:k]:
                base[preferred[0]] = np.nan
            ref = d.fn(*(base[i] for i in d.inputs))
            for i in route:
                moved = base.copy()
                moved[i] = rng.uniform(0.0, 150.0, 64)
                out = d.fn(*(moved[n] for n in d.inputs))
                assert not np.allclose(ref.fillna(-1), out.fillna(-1)), (d.name, i)


def test_measured_quantities_read_exactly_their_formula_metrics():
    """A formula source declares the metrics it reads (collect.py gathers them): none unused."""
    rng = np.random.default_rng(14)
    for q in QUANTITIES:
        for source in q.sources:
            assert len(set(source.metrics)) == len(source.metrics), q.name
            if source.fn is None:
                assert len(source.metrics) == 1, q.name
                continue
            base = pd.DataFrame({m: rng.uniform(1.0, 150.0, 64) for m in source.metrics})
            ref = source.compute(base)
            for metric in source.metrics:
                moved = base.copy()
                moved[metric] = rng.uniform(1.0, 150.0, 64)
                assert not np.allclose(ref, source.compute(moved)), (q.name, metric)


def test_time_share_reads_the_duration():
    assert inputs_of("time_share_pct") == ("duration_ns",)
    duration = pd.Series([100.0, 300.0, np.nan])
    assert time_share_pct(duration).fillna(-1).tolist() == [25.0, 75.0, -1.0]
    # Invocations come from the launch table, not from a quantity.
    assert time_share_pct(duration, pd.Series([3, 1, 1])).tolist()[:2] == [50.0, 50.0]


def test_engine_modules_import_in_one_direction():
    def imports(name: str) -> set[str]:
        tree = ast.parse((ENGINE / f"{name}.py").read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "engine" not in imports("functions")
    assert "engine" not in imports("findings") and "functions" not in imports("findings")
    assert "engine" not in imports("conditions")


def test_bound_has_one_definition():
    sm = pd.Series([30.0, 80.0, 70.0, 65.0, np.nan])
    mem = pd.Series([20.0, 50.0, 70.0, 90.0, 10.0])
    assert bound_of(sm, mem).tolist() == ["latency", "compute", "memory", "memory", None]
    q = add_derived(pd.DataFrame({"sm_pct": sm, "mem_pct": mem}))
    assert q["memory_bound"].tolist()[:4] == [0.0, 0.0, 1.0, 1.0]
    assert np.isnan(q["memory_bound"].iloc[4])


def test_tail_has_one_formula():
    s = launch_shape(4096, 128, 132, 16)
    assert s.tail_idle_slots_pct == pytest.approx(tail_idle_pct(s.waves))
    assert tail_idle_pct(pd.Series([0.5, 2.0, 1.5, np.nan])).fillna(-1).tolist() == \
        [0.0, 0.0, pytest.approx(25.0), -1.0]


def test_confidence_steps_are_data_and_cases_check_them(tmp_path, capsys):
    text = (EXAMPLES / "cache.l2-misses.toml").read_text()
    assert 'confidence = "medium"' in text
    (tmp_path / "cache.l2-misses.toml").write_text(text.replace(
        'confidence = "medium"',
        'confidence = "medium"\nconfidence_steps = [{ level = "high", when = '
        '{ q = "l2_hit_pct", lt = 5 } }]'))
    (tmp_path / "cache.l2-misses.cases.toml").write_text(
        '[[case]]\nname = "almost no hits"\nexpect = "fires"\nconfidence = "high"\n'
        'values = { sm_pct = 20, mem_pct = 85, l2_hit_pct = 2 }\n'
        '[[case]]\nname = "some hits"\nexpect = "fires"\nconfidence = "high"\n'
        'values = { sm_pct = 20, mem_pct = 85, l2_hit_pct = 15 }\n')
    assert main(["rules", "--test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "[almost no hits]: ok" in out
    assert "[some hits]: FAILED: expected confidence high, got medium" in out


def test_fusion_confidence_policy_lives_in_its_rule_file():
    rule = load_rule_file(builtin_rules_dir() / "fusion.memory-bound-chain.toml")
    assert rule.confidence == "medium"
    assert [s.level for s in rule.confidence_steps] == ["high"]
    assert "chain_in_one_range" in (ENGINE / "functions.py").read_text()
    assert '"high"' not in (ENGINE / "functions.py").read_text()  # no policy left in code


def test_a_data_rule_cannot_read_a_function_value(tmp_path):
    """A function's own values are for its rule's steps: a data rule naming one is refused."""
    (tmp_path / "cache.l2-misses.toml").write_text(
        (EXAMPLES / "cache.l2-misses.toml").read_text().replace(
            '{ q = "l2_hit_pct", lt = 20 }', '{ q = "chain_in_one_range", eq = 1 }'))
    _, problems = check_rules([tmp_path], builtin=False)
    assert any("unknown quantity 'chain_in_one_range'" in p for p in problems), problems
