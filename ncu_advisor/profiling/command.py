"""ncu command lines: profiling a program into a ``.ncu-rep``, and exporting it as CSV.

:func:`build_ncu_command` is the profiling run (the section set from
:mod:`ncu_advisor.profiling.sections`, the filters, the options ncu-advise owns);
:func:`build_import_command` and :func:`export_csvs` turn a report into the raw and details
pages the analysis reads. The program's name is checked and the report named here too. Part
of the wrapper (:mod:`ncu_advisor.profiling.run`).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from ..errors import ProfilingError
from . import sections as collect

__all__ = [
    "build_import_command",
    "build_ncu_command",
    "collection_args",
    "export_csvs",
    "export_page",
]

_RESERVED = ("-o", "--export", "-i", "--import", "--csv", "--log-file")
_PYTHON = re.compile(r"^python[\d.]*(\.exe)?$", re.IGNORECASE)


def option_value(args: Sequence[str], *names: str) -> str | None:
    """Return the value of the last ``--opt value`` / ``--opt=value`` in args, or None."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def has_option(args: Sequence[str], *names: str) -> bool:
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


def collection_args(
    ncu: str | os.PathLike[str], section_set: str | None
) -> tuple[list[str], list[str]]:
    """Return the ncu options that collect a section set, and warnings about them.

    Args:
        ncu: The ncu executable.
        section_set: ``"advise"`` (:mod:`ncu_advisor.profiling.sections`), another ncu set such as
            ``"full"``, or None for none (ncu's default set).

    Returns:
        ``(args, warnings)``.

    """
    if not section_set:
        return [], []
    if section_set == collect.ADVISOR_SET:
        return collect.advisor_ncu_args(ncu)
    return ["--set", section_set], []


def build_ncu_command(
    ncu: str | os.PathLike[str],
    program: str | os.PathLike[str],
    args: Sequence[str | os.PathLike[str]],
    *,
    rep_path: str | os.PathLike[str],
    section_set: str | None = collect.ADVISOR_SET,
    kernel_name: str | None = None,
    launch_count: int | None = None,
    nvtx: bool = False,
    extra: Sequence[str] = (),
    log_file: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Build the ncu command line that profiles a program into a ``.ncu-rep``.

    The order is: ncu, ``--clock-control none`` and ``--target-processes all`` (unless ``extra``
    sets them), the section set, ``-k``, ``-c``, ``--nvtx``, ``extra``, ``--log-file``,
    ``-o rep_path -f``, then the program and its arguments.

    Args:
        ncu: The ncu executable.
        program: The program to profile.
        args: The program's arguments.
        rep_path: Where ncu writes the report (ncu adds ``.ncu-rep`` if missing).
        section_set: ``"advise"`` (what ncu-advise reads), an ncu set (``--set``), or None to
            pass none. A ``--set`` in ``extra`` replaces it; a ``--section`` adds to it.
        kernel_name: Profile only kernels with this name (``-k``; ``regex:PATTERN`` works).
        launch_count: Profile at most this many launches (``-c``).
        nvtx: Record NVTX ranges (``--nvtx``).
        extra: More ncu options, passed through as given (e.g. ``["--section", "Occupancy"]``).
        log_file: Where ncu writes its own messages (``--log-file``), apart from the program's.

    Returns:
        The command as a list of strings (to run without a shell).

    Raises:
        ProfilingError: ``extra`` sets an option this module owns, or ``launch_count`` < 1.

    """
    extra = [str(e) for e in extra]
    for arg in extra:
        if arg in _RESERVED or any(arg.startswith(r + "=") for r in _RESERVED if r[1] == "-"):
            raise ProfilingError(
                f"the ncu option {arg} is set by ncu-advise; choose the output with out_dir/name"
            )
    if launch_count is not None and launch_count < 1:
        raise ProfilingError(f"the launch count must be at least 1, not {launch_count}")
    cmd = [str(ncu)]
    # Unlocked clocks measure the program as it really runs (ncu would lock them to base);
    # NCU_NOTES.md's captures all use this.
    if not has_option(extra, "--clock-control"):
        cmd += ["--clock-control", "none"]
    # Python launchers (torchrun, multiprocessing, DataLoader workers) run kernels in child
    # processes; ncu's default is the same, said here so the command line shows it.
    if not has_option(extra, "--target-processes"):
        cmd += ["--target-processes", "all"]
    if not has_option(extra, "--set"):
        cmd += collection_args(ncu, section_set)[0]
    if kernel_name:
        cmd += ["-k", kernel_name]
    if launch_count is not None:
        cmd += ["-c", str(launch_count)]
    if nvtx:
        cmd.append("--nvtx")
    cmd += extra
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    cmd += ["-o", str(rep_path), "-f"]
    cmd.append(str(program))
    cmd += [str(a) for a in args]
    return cmd


def build_import_command(
    ncu: str | os.PathLike[str], rep_path: str | os.PathLike[str], *, page: str | None = None
) -> list[str]:
    """Build ``ncu --import REP --csv [--page PAGE] --print-units base``.

    A report taken with ``--nvtx`` gets its NVTX columns on import without asking (ncu 2025.3
    refuses ``--nvtx`` together with ``--import``).

    Args:
        ncu: The ncu executable.
        rep_path: The ``.ncu-rep`` report.
        page: ``"raw"`` for the raw page; None for the details page (with ncu's rule rows).

    Returns:
        The command as a list of strings.

    """
    cmd = [str(ncu), "--import", str(rep_path), "--csv"]
    if page:
        cmd += ["--page", page]
    # Imports default to auto-scaled units per row; base units are one unit per metric.
    cmd += ["--print-units", "base"]
    return cmd


def report_stem(rep_path: Path) -> str:
    name = rep_path.name
    return name[: -len(".ncu-rep")] if name.endswith(".ncu-rep") else rep_path.stem


def _import(cmd: list[str], dest: Path) -> None:
    try:
        with dest.open("wb") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, check=False)
    except OSError as exc:
        dest.unlink(missing_ok=True)
        raise ProfilingError(f"cannot export {cmd[2]} to {dest}: {exc.strerror or exc}") from None
    if proc.returncode != 0 or dest.stat().st_size == 0:
        # ncu prints its errors on stdout, which went into the file.
        with dest.open(encoding="utf-8", errors="replace") as fh:
            head = [line.strip() for _, line in zip(range(20), fh, strict=False)]
        dest.unlink(missing_ok=True)
        said = [line for line in head if line.startswith("==ERROR==")]
        said += proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
        why = said[0] if said else f"exit status {proc.returncode}"
        raise ProfilingError(f"ncu could not export {cmd[2]} as CSV ({' '.join(cmd[3:])}): {why}")


def export_page(ncu: str | os.PathLike[str], rep_path: str | os.PathLike[str], dest: Path,
                page: str | None = None) -> Path:
    """Export one page of a report as CSV into ``dest`` (see :func:`build_import_command`)."""
    _import(build_import_command(ncu, rep_path, page=page), dest)
    return dest


def export_csvs(ncu: str | os.PathLike[str], rep_path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Export a report's raw and details pages as CSV, next to it.

    Args:
        ncu: The ncu executable.
        rep_path: The ``.ncu-rep`` report, e.g. ``out/app.ncu-rep``.

    Returns:
        ``(raw_csv, details_csv)``: ``out/app.raw.csv`` and ``out/app.details.csv``.

    Raises:
        ProfilingError: ncu could not export the report.

    """
    rep = Path(rep_path)
    raw = rep.with_name(report_stem(rep) + ".raw.csv")
    details = rep.with_name(report_stem(rep) + ".details.csv")
    jobs = [(build_import_command(ncu, rep, page="raw"), raw), (build_import_command(ncu, rep),
                                                                details)]
    # The two imports are independent: running them side by side halves the wait.
    errors: list[ProfilingError] = []

    def run(cmd: list[str], dest: Path) -> None:
        try:
            _import(cmd, dest)
        except ProfilingError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=job, daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for _, dest in jobs:
            dest.unlink(missing_ok=True)
        raise errors[0]
    return raw, details


def count_launches(raw_csv: Path) -> int:
    """Rows of a raw-page export: one per launch, after the header and the units row."""
    count, in_table = 0, False
    with raw_csv.open(newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.reader(fh):
            if not in_table:
                in_table = bool(row) and row[0] == "ID"
            elif row and row[0].strip().isdigit():
                count += 1
    return count


# --------------------------------------------------------------------------- program, report name


def resolve_program(program: str) -> str:
    """Return the program as ncu should be given it, or raise if it cannot be run."""
    path = Path(program)
    has_dir = os.sep in program or bool(os.altsep and os.altsep in program)
    if not has_dir and shutil.which(program):
        return program
    if not path.exists():
        where = "no such file" if has_dir else "not a file here nor a command on PATH"
        raise ProfilingError(f"program not found: {program} ({where})")
    if path.is_dir() or not os.access(path, os.X_OK):
        hint = ""
        if path.suffix == ".py":
            hint = f"; run it through Python: python3 {program}"
        elif path.suffix == ".cu":
            hint = f"; compile it first, e.g. nvcc -O3 -lineinfo -o app {program}"
        elif not path.is_dir():
            hint = f"; chmod +x {program}"
        raise ProfilingError(f"program not executable: {program}{hint}")
    # A bare name found only in the current folder: spell it as a path so ncu does not
    # search PATH for it.
    return program if has_dir else os.path.join(".", program)


def default_name(program: str, args: Sequence[str]) -> str:
    base = Path(program).name
    # `python3 train.py` is better named after the script than the interpreter.
    if _PYTHON.match(base) and args and str(args[0]).endswith(".py"):
        base = Path(str(args[0])).stem
    elif base.lower().endswith((".exe", ".bat")):
        base = base.rsplit(".", 1)[0]
    return re.sub(r"[^\w.-]", "_", base) or "profile"
