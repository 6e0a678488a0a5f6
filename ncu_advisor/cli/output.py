"""Writing outputs safely: never over an input, all or nothing, errors as one line.

* An output that is, or resolves to, one of the inputs is refused before any work.
* A regular file is written to a temporary file beside it, then renamed over it: a failure
  (full disk, read-only filesystem, no permission) leaves no partial output.
* A symlink is followed: its target is written, the link stays. A FIFO, a terminal or
  ``/dev/stdout`` is written through, not replaced by a regular file.
* Every OS error becomes an :class:`~ncu_advisor.errors.OutputError`: one line naming the
  path and the reason (CLI exit code 2).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import OutputError
from ..processes import alive

REPORT_SUFFIXES = (".csv", ".ncu-rep", ".ncu-repz", ".gz", ".xz", ".txt")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output_file(output: Path, inputs: Iterable[str | os.PathLike],
                      kept: Iterable[str | os.PathLike] = ()) -> None:
    """Refuse an output file that would overwrite an input, or that cannot be a file.

    The one output guard of every command that writes a file (``analyze``, ``diff``,
    ``query``, ``trend``): it runs before any work.

    Args:
        output: the ``-o`` path.
        inputs: the paths given to read (files or folders): reports, repeats.
        kept: files and folders nothing may be written into: rule files and folders, an
            origins table, a report store (a file anywhere inside a kept folder is refused).

    Raises:
        OutputError: the output is an input or a kept file, lies inside a kept folder (or
            inside an input folder where it would be read as one), is a folder, or its folder
            does not exist.

    """
    try:
        mode = os.stat(output).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return  # a FIFO, terminal or /dev/stdout: written through, never an input file
    target = os.path.realpath(output)
    if os.path.isdir(target):
        raise OutputError(f"{output}: is a folder; give a file name for the output")
    parent = os.path.dirname(target) or "."
    if not os.path.isdir(parent):
        raise OutputError(f"{output}: output folder {os.path.dirname(str(output)) or '.'} "
                          "does not exist")
    for given in inputs:
        source = os.path.realpath(given)
        if target == source or _same_file(target, source):
            raise OutputError(f"{output}: is one of the inputs; refusing to overwrite it")
        if os.path.isdir(source) and os.path.exists(target) \
                and target.startswith(source.rstrip(os.sep) + os.sep) \
                and Path(target).name.lower().endswith(REPORT_SUFFIXES):
            raise OutputError(f"{output}: is a report inside the input folder {given}; "
                              "refusing to overwrite it")
    for given in kept:
        source = os.path.realpath(given)
        if target == source or _same_file(target, source) \
                or target.startswith(source.rstrip(os.sep) + os.sep):
            raise OutputError(f"{output}: would write into {given}, which this command reads "
                              "(rules, origins or a store); refusing")


def check_store_folder(store: Path, inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse an ``ingest --store`` that is an input, or lies inside an input folder.

    A store written into a folder of reports would be read as reports by the next command
    that reads that folder; one that is an input file would replace it.
    """
    target = os.path.realpath(store)
    for given in inputs:
        source = os.path.realpath(given)
        if target == source or _same_file(target, source):
            raise OutputError(f"{store}: is one of the inputs; refusing to make it a store")
        if os.path.isdir(source) and target.startswith(source.rstrip(os.sep) + os.sep):
            raise OutputError(f"{store}: lies inside the input folder {given}; refusing to "
                              "write a store among the reports")


def rule_files_kept(rules: Iterable[str | os.PathLike] | None) -> list[Path]:
    """The files of ``--rules`` folders an output must not overwrite (rules and their cases).

    The files, not the folders: a report may be written beside a rule folder's rules.
    """
    kept: list[Path] = []
    for given in rules or []:
        path = Path(given)
        kept.extend(sorted(path.glob("*.toml")) if path.is_dir() else [path])
    return kept


def check_output_folder(output: Path, inputs: Iterable[str | os.PathLike],
                        names: Iterable[str]) -> None:
    """Refuse an output folder that is a file, or whose files-to-be are inputs."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise OutputError(f"{output}: exists and is not a folder")
    for name in names:
        target = os.path.realpath(Path(output, name))
        for given in inputs:
            if target == os.path.realpath(given) or _same_file(target, given):
                raise OutputError(f"{Path(output, name)}: is one of the inputs; refusing to "
                                  "overwrite it")


def write_text(path: Path, text: str) -> None:
    """Write a whole text output safely (see the module docstring)."""
    write_files([(Path(path), lambda fh: fh.write(text.encode("utf-8")))])


def write_files(outputs: list[tuple[Path, Callable]]) -> None:
    """Write several files all or nothing: each ``writer(binary_file)`` fills one file.

    Regular files are written to temporaries first and renamed into place only when every
    one succeeded; streams (FIFO, terminal, /dev/stdout) are written through directly.
    """
    staged: list[tuple[str, str]] = []
    try:
        for path, writer in outputs:
            try:
                mode = os.stat(path).st_mode  # follows symlinks
            except FileNotFoundError:
                mode = None
            except OSError as exc:
                raise OutputError(f"{path}: cannot write ({_reason(exc)})") from None
            if mode is not None and stat.S_ISDIR(mode):
                raise OutputError(f"{path}: is a folder; give a file name for the output")
            if mode is not None and not stat.S_ISREG(mode):
                _write_through(path, str(path), writer)  # FIFO, terminal, /dev/stdout
                continue
            target = os.path.realpath(path)  # a symlink's target is what gets written
            staged.append((_stage(path, target, writer), target))
        for tmp, target in staged:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
        staged.clear()
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def _write_through(path: Path, target: str, writer: Callable) -> None:
    try:
        with open(target, "wb") as fh:
            writer(fh)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({_reason(exc)})") from None


def _stage(path: Path, target: str, writer: Callable) -> str:
    """Write one output to a temporary file beside its target; return the temporary's path."""
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise OutputError(f"{path}: output folder {os.path.dirname(str(path)) or '.'} does "
                          "not exist")
    _remove_stale_temps(folder, os.path.basename(target))
    try:
        # The writer's PID in the name: a run killed before its rename leaves a temporary the
        # next write of the same output removes (_remove_stale_temps).
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}."
                                   f"{os.getpid()}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            writer(fh)
            fh.flush()
            os.fsync(fh.fileno())  # a full disk shows here, not after the rename
        # mkstemp creates 0600; give the output the permissions a normal file would get.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write ({_reason(exc)})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _remove_stale_temps(folder: str, name: str) -> None:
    """Remove temporaries of ``name`` left by writers that no longer run (SIGKILL, OOM)."""
    prefix = f".{name}."
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid = entry[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or alive(int(pid)):
            continue
        try:
            os.unlink(os.path.join(folder, entry))
        except OSError:
            pass

