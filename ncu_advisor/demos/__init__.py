"""Teaching-lab demo pairs: one bad and one good CUDA kernel per checklist category.

* :mod:`.catalogue`: the pairs and their lessons, read from ``kernels/<id>/demo.toml`` (no GPU);
* :mod:`.runner`: checking, timing and profiling them on a GPU with CuPy;
* ``python -m ncu_advisor.demos`` (:mod:`.__main__`): the program the capture scripts and ncu
  run. The user's command is ``ncu-advise demo`` (:mod:`ncu_advisor.cli.demo`).
"""

from ..errors import DemoError
from .catalogue import (
    CHECKLIST_IDS,
    CONDITION_OPERATORS,
    Demo,
    Lesson,
    Signature,
    Variant,
    get_demo,
    kernels_dir,
    list_demos,
    parse_condition,
)
from .runner import (
    TABLE_HEADER,
    check_demo,
    load_launcher,
    measure_copy_roof,
    profile_once,
    require_gpu,
    time_all,
    time_demo,
)

__all__ = [
    "CHECKLIST_IDS",
    "CONDITION_OPERATORS",
    "TABLE_HEADER",
    "Demo",
    "DemoError",
    "Lesson",
    "Signature",
    "Variant",
    "check_demo",
    "get_demo",
    "kernels_dir",
    "list_demos",
    "load_launcher",
    "measure_copy_roof",
    "parse_condition",
    "profile_once",
    "require_gpu",
    "time_all",
    "time_demo",
]
