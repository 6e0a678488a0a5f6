"""Whether a process still runs: what the clean-up of killed runs' leftovers asks.

Both the report store (``.staging/ingest-PID-*``) and the atomic output writer
(``.NAME.PID.*.tmp``) name their temporaries after the writing process and remove those of
processes that no longer run (killed by SIGKILL or the out-of-memory killer).
"""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (this one does; another user's counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: leave its files alone
        return True
    return True
