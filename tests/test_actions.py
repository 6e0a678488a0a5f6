"""Program-level actions (analysis/actions.py) on real captures of the corpus' dev split."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import analysis_cached

from ncu_advisor.analysis.actions import action_classes
from ncu_advisor.render.text import render_text
from ncu_advisor.rules_engine.findings import weighted_saving

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "sample_reports" / "corpus"
DECODER = CORPUS / "torch_decoder_train.details.csv.xz"


def test_the_eager_training_step_starts_with_compiling_it():
    """A bf16 decoder step, eager: most of its time is pointwise, dropout, cast, norm and
    softmax launches between the GEMMs; the first change is torch.compile."""
    analysis = analysis_cached(DECODER)
    first = analysis.actions[0]
    assert first.id == "compile-eager-ops" and first.category == "fusion"
    assert first.severity == "high" and len(first.launches) >= 40
    assert "torch.compile" in first.change
    # One action for the whole run, not one per chain.
    assert [a.id for a in analysis.actions].count("compile-eager-ops") == 1


def test_savings_are_counted_once_across_actions():
    for name in ("torch_decoder_train", "torch_cnn_train", "cuda_memory_access",
                 "cupy_libraries"):
        analysis = analysis_cached(CORPUS / f"{name}.details.csv.xz")
        launches = analysis.report.launches
        time_of = dict(zip(launches["launch"], launches["duration_ns"] * launches["invocations"],
                           strict=True))
        savings = [a.estimated_saving_ns for a in analysis.actions if a.estimated_saving_ns]
        assert sum(savings) <= analysis.total_time_ns, name
        for a in analysis.actions:
            assert a.estimated_saving_ns is None or \
                a.estimated_saving_ns <= sum(time_of[n] for n in a.launches) + 1e-6, a.id
        # Ranked by what each keeps (weighted by confidence); unestimated ones last.
        weights = [weighted_saving(a.estimated_saving_ns, a.confidence)
                   for a in analysis.actions]
        known = [w for w in weights if w is not None]
        assert known == sorted(known, reverse=True), name
        assert weights[:len(known)] == known, name


def test_two_changes_to_one_launch_compose_not_add():
    """An n-body kernel in double on 64 blocks: the grid fix saves about half, then float saves
    its 40% of what is left, not 40% of the original time (2.1 + 1.6 of 4.1 ms before)."""
    analysis = analysis_cached(CORPUS / "cuda_nbody.details.csv.xz")
    on_kernel = [a for a in analysis.actions if a.launches == [1]]
    grid, fp64 = (next(a for a in on_kernel if a.category == c)
                  for c in ("launch-config", "precision"))
    finding = next(f for f in analysis.findings
                   if f.rule == "precision.fp64-arithmetic" and f.launch == 1)
    duration = analysis.report.launches.set_index("launch").loc[1, "duration_ns"]
    left = duration - grid.estimated_saving_ns
    assert fp64.estimated_saving_ns == pytest.approx(
        finding.estimated_speedup_pct / 100.0 * left, rel=0.01)
    assert grid.estimated_saving_ns + fp64.estimated_saving_ns < 0.75 * duration


def test_no_action_is_a_placement_and_every_one_has_a_change():
    for name in ("cuda_histogram_scan", "cupy_libraries", "torch_vit_infer"):
        for a in analysis_cached(CORPUS / f"{name}.raw.csv.xz").actions:
            assert a.category != "roofline" and a.change and a.severity in ("high", "medium")


def test_the_text_output_leads_with_the_actions():
    analysis = analysis_cached(DECODER)
    text = render_text(analysis.to_dict(), width=100)
    assert text.index("Start here") < text.index("Validity") < text.index("Top findings")
    assert "Compile the eager ops into fused kernels" in text
    assert "\\x0a" not in text  # the change text wraps; its newlines are not escaped
    doc = analysis.to_dict()
    assert doc["actions"][0]["action"] == "compile-eager-ops"
    assert doc["actions"][0]["launches"] == sorted(doc["actions"][0]["launches"])


def test_action_classes_name_rules_that_exist():
    from ncu_advisor.rules_engine.loader import load_rules

    ids = {r.id for r in load_rules()}
    for c in action_classes():
        assert c.rules <= ids, c.id


def test_a_finding_group_keeps_each_launch_s_own_severity():
    # Eager CNN step: cuDNN's NCHW batch-norm backward runs on 64 blocks at five sizes; the
    # group shows the highest severity, and how many of its launches have each.
    analysis = analysis_cached(CORPUS / "torch_cnn_train.raw.csv.xz")
    group = next(g for g in analysis.ranked() if g["rule"] == "launch-config.small-grid"
                 and g["kernel"].startswith("bn_bw"))
    own = [f.severity for f in analysis.findings if f.rule == group["rule"]
           and f.launch in group["launch_ids"]]
    assert group["severities"] == {s: own.count(s) for s in set(own)}
    assert len(group["severities"]) > 1 and group["severity"] == "high"
    durations = analysis.report.launches.set_index("launch")["duration_ns"]
    assert group["time_ns"] == pytest.approx(durations[group["launch_ids"]].sum())


def test_kernel_speedups_keep_what_the_host_lets_through():
    """A recommender step the GPU spends waiting on the host (the queue model: 365 us of
    waits): launching it at once comes first and removes the waits of its launches; TF32 on
    its GEMMs keeps only what exceeds the waits left, fusion-like changes keep all of theirs."""
    analysis = analysis_cached(CORPUS / "torch_recsys_train.raw.csv.xz")
    waits = sum(analysis.host_waits.values())
    by_id = {a.id: a for a in analysis.actions}
    assert analysis.actions[0].id == "launch-as-graph" and waits > 300_000
    tf32 = by_id["tensor-core-math"]
    claimed = sum(tf32._claims.values())
    assert 0 < tf32.estimated_saving_ns < claimed
    left = waits - sum(analysis.host_waits.get(n, 0.0) for n in by_id["launch-as-graph"].launches)
    assert tf32.estimated_saving_ns == pytest.approx(max(0.0, claimed - left), rel=0.01)
