"""The optimization checklist's category ids: a public contract.

Findings, rule files, demo kernels and tests use these ids verbatim, in this order.
"""

CATEGORIES: tuple[str, ...] = (
    "roofline", "coalescing", "coarsening", "occupancy", "launch-config", "divergence", "fusion",
    "precision", "privatization", "tiling", "math-rewrite", "local-memory", "bank-conflicts",
    "fast-math",
)
# Program-level categories beside the checklist's: changes to how a whole program launches its
# work that no checklist row names and no single-kernel demo shows (their evidence is the
# sequence of launches). Rules may use them; demos and the checklist contract do not.
PROGRAM_CATEGORIES: tuple[str, ...] = ("launch-overhead", "layout")
# The severity ladder, most severe first, and the confidence levels: defined here only.
SEVERITIES: tuple[str, ...] = ("high", "medium", "low", "info")
SEVERITY_RANK: dict[str, int] = {level: rank for rank, level in enumerate(SEVERITIES)}
CONFIDENCES: tuple[str, ...] = ("high", "medium", "low")
