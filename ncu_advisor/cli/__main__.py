"""``python -m ncu_advisor.cli``: the same as the ``ncu-advise`` command."""

import sys

from .app import main

sys.exit(main())
