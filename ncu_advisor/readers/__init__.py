"""Readers: any Nsight Compute export in, one :class:`~ncu_advisor.report.Report` out.

``read_report`` is the face; :mod:`.dispatch` decides which reader reads a file and merges the
files of a capture; one module per form family does the reading (``csv_export`` for the
details, raw and summary pages, ``text`` for ncu's plain-text output, ``ncu_rep`` for
``.ncu-rep`` files through NVIDIA's reader in a child process, ``session_page``,
``source_page``).
"""

from .dispatch import (
                       HEAD_BYTES,
                       SESSION_METRICS,
                       detect_form,
                       expand_paths,
                       read_head,
                       read_one,
                       read_report,
                       release_freed_memory,
)

__all__ = ["HEAD_BYTES", "SESSION_METRICS", "detect_form", "expand_paths", "read_head",
           "read_one", "read_report", "release_freed_memory"]
