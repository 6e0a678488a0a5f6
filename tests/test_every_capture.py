"""Every real capture in the repository analyzes end to end into valid JSON and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import analysis_cached

from ncu_advisor.render.html import render_html
from ncu_advisor.render.text import render_text

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for folder in ("sample_reports", "docs/examples")
                  for p in (ROOT / folder).rglob("*") if p.suffix in (".csv", ".ncu-rep"))


@pytest.mark.parametrize("path", CAPTURES, ids=[str(p.relative_to(ROOT)) for p in CAPTURES])
def test_capture_analyzes(path):
    result = analysis_cached(path)
    report = result.report
    data = result.to_dict()
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN or inf anywhere
    assert len(data["kernels"]) == len(report.launches) > 0
    assert render_text(data).startswith("ncu-advise:")
    if len(report.launches) <= 30:  # the probes' 499 launches make a large page; text suffices
        assert "<html" in render_html(data)


def test_there_are_captures():
    assert len(CAPTURES) >= 60
