"""ncu-advise: ranked, evidence-backed optimization advice from Nsight Compute profiles."""

__version__ = "0.1.0"

from .analysis import Analysis, analyze
from .errors import NcuAdviseError, ReportParseError
from .readers import read_report
from .report import Report

__all__ = ["Analysis", "NcuAdviseError", "Report", "ReportParseError", "analyze", "read_report",
           "__version__"]
