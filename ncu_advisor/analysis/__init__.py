"""From a Report to advice.

The pipeline (``analyze``), its result (``Analysis``), ranking, the JSON contract, regions,
validity checks and the metrics the analysis reads.
"""

from .pipeline import analyze
from .result import Analysis

__all__ = ["Analysis", "analyze"]
