"""Issue 3's proof: every demo's metric signature holds in its real H200 capture.

For each demo, the bad variant's launches must meet every `[[signature]] bad` condition and the
good variant's every `good` condition (per launch, or summed over the variant's launches where
`scope = "sum"`), read from sample_reports/demos/<name>.{raw,details}.csv.
"""

from __future__ import annotations

import operator
from functools import cache
from pathlib import Path

import pytest

from ncu_advisor import read_report
from ncu_advisor.demos import list_demos, parse_condition

DEMOS = Path(__file__).resolve().parent.parent / "sample_reports" / "demos"
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
       "==": operator.eq, "!=": operator.ne}


@cache
def capture(name: str):
    return read_report([DEMOS / f"{name}.raw.csv", DEMOS / f"{name}.details.csv"])


CASES = [(d, s, role) for d in list_demos() for s in d.signatures for role in ("bad", "good")]


@pytest.mark.parametrize(("demo", "signature", "role"), CASES,
                         ids=[f"{d.name}-{s.metric}-{r}" for d, s, r in CASES])
def test_signature_holds_in_the_capture(demo, signature, role):
    report = capture(demo.name)
    kernels = getattr(demo, role).kernels
    launches = report.launches[report.launches["short_name"].isin(kernels)]["launch"]
    assert len(launches) == len(kernels)
    values = report.wide().loc[launches, signature.metric]
    assert values.notna().all(), f"{signature.metric} missing from the capture"
    op, threshold = parse_condition(getattr(signature, role))
    checked = [values.sum()] if signature.scope == "sum" else list(values)
    for value in checked:
        assert OPS[op](value, threshold), (
            f"{demo.name}/{role}: {signature.metric} = {value:.4g}, expected {op} {threshold:g}")


def test_every_demo_has_a_capture_with_both_variants():
    for demo in list_demos():
        names = set(capture(demo.name).launches["short_name"])
        assert set(demo.bad.kernels) | set(demo.good.kernels) <= names
