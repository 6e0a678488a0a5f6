"""ncu-advise: ranked, evidence-backed optimization advice from Nsight Compute profiles."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

__all__ = ["Analysis", "NcuAdviseError", "Report", "ReportNotFoundError", "ReportParseError",
           "analyze", "read_report", "__version__"]

# The public names load on first use: `ncu-advise ./app` starts ncu before pandas and the
# analysis are imported (they load while the program runs under ncu).
_HOMES = {"Analysis": "analysis", "analyze": "analysis", "NcuAdviseError": "errors",
          "ReportNotFoundError": "errors", "ReportParseError": "errors",
          "read_report": "readers", "Report": "report"}

if TYPE_CHECKING:
    from .analysis import Analysis, analyze
    from .errors import NcuAdviseError, ReportNotFoundError, ReportParseError
    from .readers import read_report
    from .report import Report


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (they load on first use, so the module's own dict lacks them)."""
    return sorted(__all__)
