"""What ``diff`` counts as a change: noise bands, the gate's share floor, renamed pairs.

Apart from :mod:`.compare` so that the command line can show these defaults without importing
pandas (``ncu-advise ./app`` starts ncu before the analysis is loaded).
"""

DEFAULT_NOISE_PCT = 2.0
DEFAULT_NOISE_FLOOR_NS = 1000.0
# Two or three captures underestimate the spread: bands derived from repeats are this many
# times the largest difference they show.
NOISE_MARGIN = 2.0
# --fail-if-slower checks every kernel whose share of the run (before or after) is at least this.
DEFAULT_MIN_SHARE_PCT = 1.0
# A different-name pair needs at least this similarity (0..1) to count as ``renamed``.
RENAME_THRESHOLD = 0.3
