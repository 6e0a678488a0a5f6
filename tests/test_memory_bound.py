"""Issue 25: memory grows with the input by a bounded amount (a child process's peak RSS).

Peak memory of 1 GB of text output was 2.3 GB to JSON and 3.5 GB to HTML: the ncu rule
descriptions once per row, ~11 not-evaluated objects a launch, and every kernel's whole
entry for a page that shows 60. The check is on a generated 35 MB text output to HTML (read
lean, as an input above 64 MiB is), against a run on the capture it is made of, so imports
and the interpreter cancel out. Measured (BENCHMARKS.md, "Peak memory below 2 GB at 1 GB"):
71 MB more than the small run, 140 MB before that work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from generate import replicate_text  # noqa: E402

SOURCE = ROOT / "sample_reports" / "forms" / "forms_app.live.full.txt"
SIZE = 35_000_000  # bytes of generated text output (2,340 launches: a big run's page)
GROWTH_MB = 100  # peak memory beyond the small run's: 71 MB measured, 140 MB before


def _peak_mb(path: Path, out: Path) -> float:
    """The peak resident memory of ``ncu-advise analyze PATH -f html --no-metrics``."""
    with (out.parent / "stderr.txt").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ncu_advisor.cli", "analyze", str(path),
                                 "-f", "html", "--no-metrics", "-o", str(out)],
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, (out.parent / "stderr.txt").read_text()
    return usage.ru_maxrss / 1024  # KiB on Linux


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB: Linux")
def test_html_of_a_large_text_output_stays_within_its_memory_bound(tmp_path):
    big = tmp_path / "generated.txt"
    replicate_text(SOURCE, big, size_bytes=SIZE)
    small_mb = _peak_mb(SOURCE, tmp_path / "small.html")
    big_mb = _peak_mb(big, tmp_path / "big.html")
    assert 'id="big-run"' in (tmp_path / "big.html").read_text()  # the page of a big run
    growth = big_mb - small_mb
    assert growth < GROWTH_MB, (
        f"{growth:.0f} MB more than the {SOURCE.name} run ({small_mb:.0f} MB) for "
        f"{SIZE / 1e6:.0f} MB of text output")
