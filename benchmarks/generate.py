"""Generated inputs for benchmarks and tests: a real raw-page capture replicated with new IDs.

The rows are the real rows of a capture (every metric value as ncu printed it); only the
``ID`` field changes, so each copy is a distinct launch. Files are written where the caller
asks (a temp dir) and named ``generated_*``; none is committed.
"""

from __future__ import annotations

import re
from pathlib import Path

from ncu_advisor.readers.common import read_input_bytes

_ID = re.compile(rb'^"(\d+)"')


def replicate_raw(src: Path, dst: Path, *, launches: int | None = None,
                  size_bytes: int | None = None) -> int:
    """Write ``dst``: the header and units row of raw export ``src``, then its launch rows
    repeated with IDs 0, 1, 2, ... until ``launches`` rows or ``size_bytes`` bytes.

    Returns the number of launch rows written.
    """
    raw = read_input_bytes(src)
    lines = raw.splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith(b'"ID",'))
    head = lines[start: start + 2]  # header and units row
    rows = [ln for ln in lines[start + 2:] if _ID.match(ln)]
    written = 0
    size = sum(map(len, head))
    with dst.open("wb") as out:
        out.writelines(head)
        buf: list[bytes] = []
        while True:
            for row in rows:
                if launches is not None and written >= launches:
                    break
                if size_bytes is not None and size >= size_bytes:
                    break
                line = _ID.sub(b'"%d"' % written, row, count=1)
                buf.append(line)
                size += len(line)
                written += 1
            else:
                if len(buf) > 512:
                    out.writelines(buf)
                    buf.clear()
                continue
            break
        out.writelines(buf)
    return written


_DETAILS_ID = re.compile(rb'^"(\d+)",')


def replicate_details(src: Path, dst: Path, *, size_bytes: int) -> int:
    """Write ``dst``: details-page export ``src`` (header, then its rows) repeated until
    ``size_bytes``, each copy's launch IDs moved past the previous copy's.

    Returns the number of launches written.
    """
    raw = read_input_bytes(src)
    lines = raw.splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith(b'"ID",'))
    rows = [ln for ln in lines[start + 1:] if _DETAILS_ID.match(ln)]
    ids = sorted({int(_DETAILS_ID.match(ln)[1]) for ln in rows})
    span = ids[-1] + 1
    size, copies = len(lines[start]), 0
    with dst.open("wb") as out:
        out.write(lines[start])
        while size < size_bytes:
            shift = copies * span
            block = b"".join(_DETAILS_ID.sub(lambda m, s=shift: b'"%d",' % (int(m[1]) + s), ln,
                                             count=1) for ln in rows)
            out.write(block)
            size += len(block)
            copies += 1
    return copies * len(ids)


def replicate_text(src: Path, dst: Path, *, size_bytes: int) -> int:
    """Write ``dst``: ncu's plain-text output ``src`` with its launches (everything after
    the first ``[pid] process@host`` line) repeated until ``size_bytes``.

    Returns the number of copies of the launches written.
    """
    raw = read_input_bytes(src)
    at = re.search(rb"^\[\d+\] [^\n]*\n", raw, re.M).end()
    head, body = raw[:at], raw[at:]
    size, copies = len(head), 0
    with dst.open("wb") as out:
        out.write(head)
        while size < size_bytes:
            out.write(body)
            size += len(body)
            copies += 1
    return copies


def one_launch_files(src: Path, dst: Path, *, files: int, same_run: bool = False) -> int:
    """Write ``files`` raw-page exports of one launch each into folder ``dst``
    (``generated_00000.raw.csv``, ...): the header and units row of raw export ``src``, then
    one of its launch rows in turn.

    Each file is a capture of its own (ID 0, a process ID of its own), as a folder of
    per-run exports is; with ``same_run``, every file keeps the row's own process and gets
    ID ``i`` (one run exported launch by launch). Returns the number of files written.
    """
    import csv
    import io

    raw = read_input_bytes(src)
    lines = raw.decode("utf-8").splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
    head = "".join(lines[start: start + 2])
    rows = [next(csv.reader([ln])) for ln in lines[start + 2:] if _ID.match(ln.encode())]
    dst.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        row = list(rows[i % len(rows)])
        row[0] = str(i) if same_run else "0"
        if not same_run:
            row[1] = str(100000 + i)
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(row)
        (dst / f"generated_{i:05d}.raw.csv").write_text(head + out.getvalue(), encoding="utf-8")
    return files
