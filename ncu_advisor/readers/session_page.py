"""Reader for ``ncu --import r.ncu-rep --csv --page session``: facts about the capture, no launches.

The page is a few titled two-column tables separated by blank lines::

    Launch Settings
    "Launch Attribute","Value"
    "Profiler Command Line","/opt/.../ncu --set full --clock-control none -f -o r ./app"

    Session Info
    "Session Attribute","Value"
    "Created","2026-Dec-01 03:16:58"
    ...
    Device Attributes
    "Device Attribute","Device 0"
    "display_name","NVIDIA H200"

It gives no launches, so it is analyzed only together with a details or raw export of the same
capture; its facts go to ``Report.session``.
"""

from __future__ import annotations

import csv
import re
import shlex
from pathlib import Path

import pandas as pd

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from .common import path_text, read_input_bytes
from .csv_export import decode

# The attribute tables' header lines; any one of them in a file's first lines marks the page.
HEADERS = ('"Launch Attribute","Value"', '"Session Attribute","Value"',
           '"Process Id","Process Name"', '"Device Attribute",')
# Row names -> session keys (the rest of the page, such as IP addresses, is left out).
_FACTS = {
    "Profiler Command Line": "ncu_command",
    "Created": "created",
    "Host Name": "host_name",
    "Host OS": "host_os",
    "Host Processor": "host_processor",
    "Target Name": "target_name",
    "CUDA Version": "cuda_version",
    "Nsight Compute Target": "ncu_version",
    "display_name": "gpu",
    "multiprocessor_count": "sm_count",
    "total_memory": "memory_bytes",
}
# ncu options in the command line that say how the data was taken.
_OPTIONS = {"--set": "section_set", "--clock-control": "clock_control",
            "--cache-control": "cache_control"}


def looks_like_session_page(head: str) -> bool:
    """Whether the start of a file is a ``--page session`` export."""
    return any(line.startswith(HEADERS) for line in head.splitlines()[:8])


def read_session_page(path: Path) -> Report:
    """Read a ``--page session`` export into a Report with session facts and no launches.

    Raises:
        ReportParseError: the file is empty or holds none of the page's tables.

    """
    raw = read_input_bytes(path)
    if not raw or raw.isspace():
        raise ReportParseError(f"{path}: file is empty")
    text = decode(raw, path)
    rows = [r for r in csv.reader(ln for ln in text.splitlines() if ln.startswith('"'))
            if len(r) >= 2]
    if not rows:
        raise ReportParseError(f"{path}: not a --page session export (no attribute rows)")
    facts: dict = {}
    for name, value, *_ in rows:
        key = _FACTS.get(name)
        if key and value.strip():
            facts[key] = value.strip()
    values = {r[0]: r[1] for r in rows}
    if "compute_capability_major" in values:
        minor = values.get("compute_capability_minor", "0")
        facts["cc"] = f"{values['compute_capability_major']}.{minor}"
    for key in ("sm_count", "memory_bytes"):
        if key in facts:
            facts[key] = float(facts[key]) if facts[key].isdigit() else facts[key]
    if "ncu_version" in facts:  # "2025.3.1.0 (build 36398880) (public-release)"
        facts["ncu_version"] = re.split(r"\s", facts["ncu_version"])[0]
    facts.update(_command_options(facts.get("ncu_command", "")))
    return Report(
        launches=pd.DataFrame(columns=LAUNCH_COLUMNS), metrics=pd.DataFrame(columns=METRIC_COLUMNS),
        ncu_rules=pd.DataFrame(columns=RULE_COLUMNS), session=facts, sources=[path_text(path)])


_SHLEX_MAX = 1 << 16  # characters of a command line split as a shell would


def _command_options(command: str) -> dict:
    """``--set full --clock-control none`` in the recorded command line, as session facts."""
    try:
        # shlex grows each token a character at a time: a 1 MB argument took 19 s. ncu's
        # options are short words, so a line that long is split on white space alone.
        words = shlex.split(command) if len(command) <= _SHLEX_MAX else command.split()
    except ValueError:  # an unbalanced quote: the options are still separate words
        words = command.split()
    facts = {}
    for word, value in zip(words, words[1:], strict=False):
        if word in _OPTIONS:
            facts.setdefault(_OPTIONS[word], value)  # the program's own options come later
    return facts
