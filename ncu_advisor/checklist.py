"""The optimization checklist's category ids: a public contract.

Findings, rule files, demo kernels and tests use these ids verbatim, in this order.
"""

CATEGORIES: tuple[str, ...] = (
    "roofline", "coalescing", "coarsening", "occupancy", "launch-config", "divergence", "fusion",
    "precision", "privatization", "tiling", "math-rewrite", "local-memory", "bank-conflicts",
    "fast-math",
)
