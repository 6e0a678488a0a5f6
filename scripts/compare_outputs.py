"""Write, or compare, ncu-advise's outputs on every capture in the repository.

A refactoring must not change what users see. ``write DIR`` analyses every report file under
sample_reports/ and docs/examples/ (each read alone, as ``tests/test_every_capture.py`` picks
them) into DIR as text, JSON and HTML, with the library this interpreter imports; ``compare A B``
says which outputs differ, the JSON apart from ``generated_at`` and the HTML apart from its
timestamp. Run ``write`` from a checkout of the old commit and of the new one, then compare:

    (cd OLD && python scripts/compare_outputs.py write /tmp/out-old)
    python scripts/compare_outputs.py write /tmp/out-new
    python scripts/compare_outputs.py compare /tmp/out-old /tmp/out-new
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path.cwd()
NOT_CAPTURES = re.compile(r"(^|/)(logs/|host\.txt$|pytest_gpu\.txt$|[^/]*\.out\.txt$)")
PAGES = re.compile(r"\.(session|source)\.(csv|txt)(\.gz|\.xz)?$")
STAMP = re.compile(r"<time>[^<]*</time>")


def captures() -> list[Path]:
    """Every report file, as tests/test_every_capture.py lists them."""
    def form(p: Path) -> str:
        suffixes = [s for s in p.suffixes if s not in (".gz", ".xz")]
        return suffixes[-1] if suffixes else ""
    return sorted(p for folder in ("sample_reports", "docs/examples")
                  for p in (ROOT / folder).rglob("*")
                  if p.is_file() and form(p) in (".csv", ".ncu-rep", ".txt")
                  and not NOT_CAPTURES.search(p.relative_to(ROOT).as_posix())
                  and not PAGES.search(p.name))


def write(out: Path) -> None:
    """Run ``ncu-advise analyze`` (its entry point, in this process) on every capture into
    OUT/<path>.{txt,json,html}, with the exit code and stderr in OUT/<path>.rc."""
    import contextlib
    import io

    from ncu_advisor.cli import main

    for path in captures():
        # Given relative to the checkout, as written into the outputs: two checkouts compare.
        relative = path.relative_to(ROOT).as_posix()
        stem = out / relative.replace("/", "__")
        codes = []
        for fmt, suffix in (("text", ".txt"), ("json", ".json"), ("html", ".html")):
            target = stem.with_suffix(suffix)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main(["analyze", relative, "-f", fmt, "-o", str(target)])
            codes.append(f"{fmt} {code} {err.getvalue().strip()}")
            if not target.exists():
                continue
            if fmt == "json":
                doc = json.loads(target.read_text())
                doc.pop("generated_at", None)
                target.write_text(json.dumps(doc, sort_keys=True))
            elif fmt == "html":
                target.write_text(STAMP.sub("<time></time>", target.read_text()))
        # The "wrote PATH" line names the output folder, which differs between runs.
        stem.with_suffix(".rc").write_text("\n".join(codes).replace(str(out), "OUT") + "\n")


def compare(a: Path, b: Path) -> int:
    """Print every output that differs or exists on one side only; 1 if any."""
    names_a = {p.name for p in a.iterdir()}
    names_b = {p.name for p in b.iterdir()}
    bad = sorted(names_a ^ names_b)
    bad += [n for n in sorted(names_a & names_b)
            if (a / n).read_bytes() != (b / n).read_bytes()]
    for n in bad:
        print(f"differs: {n}")
    print(f"{len(names_a & names_b)} outputs compared, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["write"] and len(sys.argv) == 3:
        target = Path(sys.argv[2])
        target.mkdir(parents=True, exist_ok=True)
        write(target)
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        raise SystemExit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        raise SystemExit(__doc__)
