"""Whose code each launch is: the origin table (data/origins.toml) against the blind labels.

Every labelled launch of a set has the labeller's `origin` (user, library, framework or
compiler, from the program's source); the tool classifies the same launch from its name
(derive/origin.py). The tool's classes map to the labeller's: an eager framework's kernels
(PyTorch's ATen, CuPy's generated ufuncs) are `framework`, inductor's Triton kernels
`compiler`, a library's kernels `library`, everything else `user`; `unknown` (a namespaced
kernel of no known library, treated as the caller's library) is counted apart. Prints the
confusion table and every misclassified kernel name with its launches.

    python benchmarks/origin_accuracy.py [--set corpus|foreign|holdout] [--sealed]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from advice_quality import SETS, files_for  # noqa: E402

from ncu_advisor import read_report  # noqa: E402
from ncu_advisor.analysis.pipeline import with_origin  # noqa: E402
from ncu_advisor.errors import NcuAdviseError  # noqa: E402

CLASSES = ("user", "library", "framework", "compiler", "unknown")


def tool_class(origin: str, library: bool, eager: bool) -> str:
    """The labeller's class of one launch the tool classified."""
    if origin == "unknown":
        return "unknown"
    if origin == "triton-inductor":
        return "compiler"
    if eager:
        return "framework"
    return "library" if library else "user"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", default="corpus", choices=list(SETS))
    p.add_argument("--sealed", action="store_true", help="the sealed programs alone "
                   "(only when the sealed split is scored); without it, the dev programs")
    args = p.parse_args(argv)
    folder, labels_of = SETS[args.set]
    confusion: Counter = Counter()
    wrong: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    captures = 0
    for name, label in sorted(labels_of().items()):
        if (label.split == "sealed") != args.sealed:
            continue
        paths = files_for(folder, name, "raw") or files_for(folder, name, "details")
        if not paths:
            continue
        try:
            report = read_report(paths)
        except NcuAdviseError:
            continue
        captures += 1
        table = with_origin(report.launches)
        for row in table.itertuples(index=False):
            launch = label.launches.get(int(row.id)) if row.id == row.id else None
            if launch is None or not launch.origin:
                continue
            ours = tool_class(row.origin, bool(row.origin_library), bool(row.origin_eager))
            confusion[(launch.origin, ours)] += 1
            if ours != launch.origin:
                wrong[(launch.origin, ours, str(row.short_name))].append(f"{name}#{row.id}")
    total = sum(confusion.values())
    if not total:
        print(f"set {args.set}: no launch has a labelled origin")
        return 0
    right = sum(n for (a, b), n in confusion.items() if a == b)
    print(f"set {args.set}: {captures} captures, {total} labelled launches, "
          f"{right} classified as the labeller did ({100.0 * right / total:.1f}%)\n")
    print("| labeller \\ tool | " + " | ".join(CLASSES) + " |")
    print("|---" * (len(CLASSES) + 1) + "|")
    for theirs in CLASSES[:-1]:
        cells = [str(confusion.get((theirs, ours), 0)) for ours in CLASSES]
        print(f"| {theirs} | " + " | ".join(cells) + " |")
    print("\nmisclassified kernels (labeller -> tool: kernel, launches):")
    for (theirs, ours, kernel), where in sorted(wrong.items(), key=lambda kv: -len(kv[1])):
        shown = ", ".join(where[:4]) + (f" (+{len(where) - 4})" if len(where) > 4 else "")
        print(f"- {theirs} -> {ours}: `{kernel}`: {len(where)} ({shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
