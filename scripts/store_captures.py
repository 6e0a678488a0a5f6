"""Store captures brought back from the GPU machine: each ``.gz`` export recompressed as ``.xz``.

Usage: ``python scripts/store_captures.py SRC_DIR [DEST_DIR]`` (DEST_DIR defaults to
``sample_reports/corpus``). The device brings exports back gzip-compressed
(``scripts/gpu_corpus.sh``); the tree keeps them as ``xz -9e`` of the same bytes, about four
times smaller, so that it stays under the device call's 64 MiB travel limit. Each file's
decompressed SHA-256 is checked equal before the next; an existing file is never overwritten.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import sys
from pathlib import Path


def store(src: Path, dest: Path) -> list[str]:
    """Recompress every ``*.gz`` of ``src`` into ``dest``; return the names written."""
    written = []
    for path in sorted(src.glob("*.gz")):
        target = dest / (path.name.removesuffix(".gz") + ".xz")
        if target.exists():
            raise SystemExit(f"store_captures: {target} exists; not overwriting a capture")
        data = gzip.decompress(path.read_bytes())
        packed = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
        if hashlib.sha256(lzma.decompress(packed)).digest() != hashlib.sha256(data).digest():
            raise SystemExit(f"store_captures: {path}: xz round trip differs")
        target.write_bytes(packed)
        written.append(f"{target.name} {len(data):,} -> {len(packed):,} bytes")
    return written


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__.split("\n\n")[1])
    root = Path(__file__).resolve().parent.parent
    out = Path(sys.argv[2]) if len(sys.argv) == 3 else root / "sample_reports" / "corpus"
    for line in store(Path(sys.argv[1]), out):
        print(line)
