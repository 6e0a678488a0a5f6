"""``python -m ncu_advisor.demos``: the demos as a program, for the GPU capture scripts and ncu.

Not the user's command (that is ``ncu-advise demo``, :mod:`ncu_advisor.cli.demo`): this is the
program ``ncu --profile-from-start off`` runs (``once``) and what ``scripts/gpu_*.sh`` call::

    python -m ncu_advisor.demos list
    python -m ncu_advisor.demos check NAME|all
    python -m ncu_advisor.demos time NAME|all [--json FILE] [--repeats N] [--warmup N]
    python -m ncu_advisor.demos once NAME      # for ncu --profile-from-start off
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import DemoError
from .catalogue import get_demo, list_demos
from .runner import TABLE_HEADER, check_demo, profile_once, require_gpu, time_all


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ncu_advisor.demos", description="Run the teaching-lab demo kernels."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the demos")
    p_check = sub.add_parser("check", help="check results against the references")
    p_check.add_argument("name", help="demo name or 'all'")
    p_check.add_argument("--size", default="default", choices=("default", "small"))
    p_time = sub.add_parser("time", help="check, then time bad and good variants")
    p_time.add_argument("name", help="demo name or 'all'")
    p_time.add_argument("--json", type=Path, help="write every number to this JSON file")
    p_time.add_argument("--repeats", type=int, default=50)
    p_time.add_argument("--warmup", type=int, default=5)
    p_time.add_argument("--size", default="default", choices=("default", "small"))
    p_once = sub.add_parser("once", help="run each variant once inside a profiler range")
    p_once.add_argument("name")
    p_once.add_argument("--size", default="default", choices=("default", "small"))
    args = parser.parse_args(argv)

    if args.command == "list":
        for demo in list_demos():
            kernels = ", ".join(demo.kernel_names)
            print(f"{demo.name:<15} {demo.title}\n{'':<15} kernels: {kernels}")
        return 0
    if args.command == "check":
        if args.name != "all":
            errors = check_demo(args.name, args.size)
            shown = ", ".join(f"{k} {v:.3g}" for k, v in errors.items())
            print(f"{args.name:<15} ok (max abs error: {shown})")
            return 0
        require_gpu()
        failed = 0
        for demo in list_demos():
            try:
                errors = check_demo(demo.name, args.size)
            except Exception as exc:  # report every demo, then fail
                failed += 1
                print(f"{demo.name:<15} FAILED: {type(exc).__name__}: {exc}", flush=True)
                continue
            shown = ", ".join(f"{k} {v:.3g}" for k, v in errors.items())
            print(f"{demo.name:<15} ok (max abs error: {shown})", flush=True)
        return 1 if failed else 0
    if args.command == "once":
        launched = profile_once(args.name, args.size)
        print(f"{args.name}: profiled {', '.join(launched)}")
        return 0
    names = None if args.name == "all" else [get_demo(args.name).name]
    require_gpu()  # fail with one line before printing the table header
    print(TABLE_HEADER, flush=True)
    report = time_all(
        names,
        args.repeats,
        args.warmup,
        size=args.size,
        log=lambda line: print(line, flush=True),
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 1 if report["errors"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo command line; errors are printed as one line with exit code 2."""
    try:
        return _main(argv)
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
