"""The rule engine: schema validation, the condition grammar, not-evaluated reporting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import analysis_cached, read_cached

from ncu_advisor import analyze
from ncu_advisor.checklist import PROGRAM_CATEGORIES
from ncu_advisor.errors import RuleDefinitionError
from ncu_advisor.rules_engine.conditions import holds
from ncu_advisor.rules_engine.engine import estimate_pct
from ncu_advisor.rules_engine.findings import NotEvaluated, NotEvaluatedList, fill_template
from ncu_advisor.rules_engine.loader import (
    builtin_rules_dir,
    load_rule_file,
    load_rules,
    rule_files,
)
from ncu_advisor.rules_engine.schema import CATEGORIES, Rule

FORMS = Path(__file__).resolve().parent.parent / "sample_reports" / "forms"
GOOD_RULE = """
id = "custom.example"
category = "custom"
title = "x {global_ld_bytes_per_sector:.1f}"
confidence = "high"
requires = ["global_ld_bytes_per_sector"]
explanation = "e"
fix = "f"
[when]
all = [{ q = "global_ld_bytes_per_sector", lt = 16 }]
[[severity]]
level = "low"
"""


def _rule_file(tmp_path: Path, text: str, name: str = "custom.example") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_builtin_rules_load_and_cover_every_category():
    rules = load_rules()
    assert {r.category for r in rules} == set(CATEGORIES) | set(PROGRAM_CATEGORIES)
    assert len({r.id for r in rules}) == len(rules)
    for path in rule_files(builtin_rules_dir()):
        assert load_rule_file(path).id == path.stem


@pytest.mark.parametrize(("change", "field"), [
    (("category = \"custom\"", "category = \"nonsense\""), "category"),
    (("lt = 16", "lt = 16, gt = 3"), "when"),
    (("global_ld_bytes_per_sector\", lt", "no_such_quantity\", lt"), "when"),
    (("confidence = \"high\"", "confidence = \"certain\""), "confidence"),
    (("fix = \"f\"", ""), "fix"),
    (("[[severity]]\nlevel = \"low\"", ""), "severity"),
    (("title = ", "titel = "), "titel"),
])
def test_bad_rule_files_fail_with_path_and_field(tmp_path, change, field):
    path = _rule_file(tmp_path, GOOD_RULE.replace(*change))
    with pytest.raises(RuleDefinitionError) as err:
        load_rule_file(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and f"field {field}" in text[len(str(path)):]


def test_rule_id_must_match_file_name_and_toml_must_parse(tmp_path):
    with pytest.raises(RuleDefinitionError, match="match the file name"):
        load_rule_file(_rule_file(tmp_path, GOOD_RULE, name="other.name"))
    with pytest.raises(RuleDefinitionError, match="invalid TOML"):
        load_rule_file(_rule_file(tmp_path, "id = ", name="broken.rule"))


def test_user_rules_directory_adds_rules(tmp_path):
    _rule_file(tmp_path, GOOD_RULE)
    rules = load_rules([tmp_path])
    assert "custom.example" in {r.id for r in rules}
    report = read_cached(FORMS / "forms_app.ncu-rep.gz")
    result = analyze(report, rules=rules)
    fired = {f.launch for f in result.findings if f.rule == "custom.example"}
    assert fired == {1, 2}  # copy_strided (4 B/sector) and scale_vec<float,4> (8 B/sector)


def test_condition_grammar():
    rule = Rule.model_validate({
        "id": "coalescing.t", "category": "coalescing", "title": "t", "confidence": "low",
        "explanation": "e", "fix": "f", "severity": [{"level": "low"}],
        "when": {"any": [{"q": "sm_pct", "gt": "mem_pct", "times": 2},
                         {"not": {"q": "dram_pct", "ge": 10}}]},
    })
    assert holds(rule.when, {"sm_pct": 50, "mem_pct": 20, "dram_pct": 50})
    assert not holds(rule.when, {"sm_pct": 30, "mem_pct": 20, "dram_pct": 50})
    assert holds(rule.when, {"sm_pct": 30, "mem_pct": 20, "dram_pct": 5})
    # A missing value never makes a comparison true (but `not` of it is true).
    assert not holds(rule.when.any[0], {"sm_pct": np.nan, "mem_pct": 20})


def test_estimates():
    rule = load_rule_file(builtin_rules_dir() / "coalescing.global-loads.toml")
    row = {"global_ld_bytes_per_sector": 8.0, "mem_pct": 80.0}
    assert estimate_pct(rule, row) == pytest.approx((1 - 8 / 32) * 100)
    assert estimate_pct(rule, {"global_ld_bytes_per_sector": np.nan, "mem_pct": 80}) is None


def test_text_templates_only_take_plain_names():
    assert fill_template("{a:.1f} and {b}", {"a": 1.234, "b": np.nan}) == "1.2 and n/a"
    # Attribute access is not a field: left as written, never evaluated.
    assert fill_template("{a.__class__}", {"a": 1.0}) == "{a.__class__}"


def test_basic_set_report_says_what_it_could_not_evaluate():
    result = analysis_cached(FORMS / "forms_app.live.basic.csv")
    skipped = {n.rule: n for n in result.not_evaluated}
    assert "coalescing.global-loads" in skipped
    entry = skipped["coalescing.global-loads"]
    assert "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio" in entry.missing
    assert "MemoryWorkloadAnalysis_Tables" in entry.collect_with
    assert "--set full" in entry.collect_with
    # What the basic set does hold is still evaluated.
    assert any(f.rule == "launch-config.small-grid" for f in result.findings)


def test_not_evaluated_entries_are_held_once_and_read_as_a_list():
    # One object per (rule, launch) was ~11 a launch, 670 MB at 1 GB of text (issue 25).
    a = NotEvaluated("r.a", "memory", ["m1"], "--section X")
    b = NotEvaluated("r.b", "compute", ["m2", "m3"], "--metrics m2,m3")
    app = NotEvaluated("r.c", "fusion", ["m4"], "--section Y")
    entries = NotEvaluatedList()
    for launch in (3, 1, 2):
        entries.add(a, launch)
    entries.add(b, 1)
    entries.extend([app])  # launch None: the application
    want = [NotEvaluated("r.a", "memory", ["m1"], "--section X", 3),
            NotEvaluated("r.a", "memory", ["m1"], "--section X", 1),
            NotEvaluated("r.a", "memory", ["m1"], "--section X", 2),
            NotEvaluated("r.b", "compute", ["m2", "m3"], "--metrics m2,m3", 1), app]
    assert entries == want and list(entries) == want and len(entries) == 5
    assert entries[3] == want[3] and entries[-1] == app and entries[1:3] == want[1:3]
    assert entries != want[:4] and NotEvaluatedList() == []
    assert entries.distinct() == [a, b, app] and len(entries._kinds) == 3
    of = entries.by_launch()
    assert of(1) == [want[1], want[3]] and of(None) == [app] and of(7) == []
    entries[0].missing.append("changed")  # an entry read is a copy
    assert entries[0] == want[0]
    # Relabel the entries of launches 1 and 2: once per distinct entry, in place.
    seen = []

    def hinted(n):
        seen.append(n.rule)
        n.collect_with = "raw page; " + n.collect_with
        return n

    entries.relabel(np.isin(entries.launches(), [1, 2]), hinted)
    assert sorted(seen) == ["r.a", "r.b"]
    assert [n.collect_with.startswith("raw page") for n in entries] == [
        False, True, True, True, False]


def test_full_set_report_evaluates_every_kernel_rule():
    result = analysis_cached(FORMS / "forms_app.ncu-rep.gz")
    assert result.not_evaluated == []
