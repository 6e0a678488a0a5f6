"""ncu-advise: ranked, evidence-backed optimization advice from Nsight Compute profiles."""

__version__ = "0.1.0"
