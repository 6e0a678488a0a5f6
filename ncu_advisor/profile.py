"""Run a program under Nsight Compute: the first stage of the flow.

``run_profile("./app", ["--size", "1024"], out_dir="out")`` finds ``ncu``, runs the program under
it with the advisor section set (:mod:`ncu_advisor.collect`: only what the analysis reads), and
returns the ``.ncu-rep``. ncu's own messages go to a log file (``--log-file``) that is followed
for the live line (kernels profiled, passes, time left); the program's stdout and stderr stay
its own, passed through and never parsed. The report is then exported as the raw page (one row
per launch) and the details page (with ncu's rule rows), which the analysis reads: on the H200
that took 1.4 s for 32 kernels, against 2.4 s reading the ``.ncu-rep`` through ``ncu_report``
(BENCHMARKS.md section 7); ``export_csv=False`` reads the ``.ncu-rep`` instead. Ctrl-C stops ncu and the program and keeps
what was profiled. Every failure raises an :class:`~ncu_advisor.errors.NcuAdviseError` with one
line that says what happened and how to fix it.
"""

from __future__ import annotations

import csv
import glob
import importlib.util
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from . import collect
from .errors import NcuNotFoundError, ProfilingError

__all__ = [
    "MIN_NCU_VERSION",
    "ProfileResult",
    "build_import_command",
    "build_ncu_command",
    "can_read_ncu_rep",
    "collection_args",
    "export_csvs",
    "find_ncu",
    "ncu_version",
    "run_profile",
    "version_warnings",
]

# Older versions name metrics and CSV columns differently from the captures the rules are
# written against (NCU_NOTES.md was made with 2025.3.1).
MIN_NCU_VERSION = (2023, 1)

# The usual install folders, in the order they are tried; within one pattern the highest
# version in the path wins.
INSTALL_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda*/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
    "/opt/cuda/bin/ncu",
)
_WINDOWS_GLOB = r"NVIDIA Corporation\Nsight Compute */ncu.bat"

_FIX = "install Nsight Compute (part of the CUDA toolkit) or set NCU=/path/to/ncu"
_PERM_MESSAGE = (
    "the GPU performance counters are restricted to admin users (ERR_NVGPUCTRPERM): run with "
    "sudo, or add 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' to a file in "
    "/etc/modprobe.d and reboot (in a container: --cap-add=SYS_ADMIN); "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)

# ncu's own lines; everything else on its output is the program's.
_NCU_LINE = re.compile(r"^==(PROF|WARNING|ERROR|INFO)== ?(.*)$")
# A line can carry a second ncu message when one interrupts a kernel's progress dots.
_EMBEDDED_NCU = re.compile(r"(?<=.)(?===(?:PROF|WARNING|ERROR|INFO)==)")
# `Profiling "name" - 3: 0%....50%....100% - 38 passes`, with `- 3 (4/12):` under `-c 12`;
# under `-k` ncu 2025.3 prints neither: `Profiling "saxpy": 0%...` (also with `-c`).
_PROFILING = re.compile(
    r'^Profiling "(?P<name>.*)"(?: - (?P<id>\d+))?(?: \((?P<n>\d+)/(?P<total>\d+)\))?:'
    r"(?P<rest>.*)$"
)
_PASSES = re.compile(r"- (\d+) pass(?:es)?\b")
_PERCENT = re.compile(r"(\d+)%")
_APP_ERROR = re.compile(r"application returned an error code \((-?\d+)\)")
_REPORT = re.compile(r"^Report: (.+)$")
_UNABLE = re.compile(r"^Unable to access the following (\d+) metrics: (.*?)\.?$")
_AVAILABLE = re.compile(r"^(?:Available Kernels:|\s*\d+\. (?P<name>.+))\s*$")
_VERSION = re.compile(r"Version\s+(\d+(?:\.\d+)+)")
_PATH_VERSION = re.compile(r"\d+(?:\.\d+)*")
# Expected with `--clock-control none`, which this module chooses on purpose.
_QUIET_WARNINGS = ("Note: Running with unmodified GPU clocks", "No kernels were profiled")
_RESERVED = ("-o", "--export", "-i", "--import", "--csv", "--log-file")
# How long ncu may take to save the report after Ctrl-C before it and the program are killed.
_INTERRUPT_GRACE_S = 60.0
_PYTHON = re.compile(r"^python[\d.]*(\.exe)?$", re.IGNORECASE)


@dataclass
class ProfileResult:
    """What one profiling run produced.

    Attributes:
        rep_path: The ``.ncu-rep`` report ncu wrote.
        raw_csv: ``<name>.raw.csv``: the raw page, one row per launch, base units (None when
            the report was not exported: it is read from the ``.ncu-rep`` then).
        details_csv: ``<name>.details.csv``: the details page with ncu's rule rows, base units
            (None when not exported).
        command: The ncu command line that was run, as a list.
        ncu_version: ncu's version, e.g. ``"2025.3.1.0"`` (``"unknown"`` if it did not say).
        program_exit_code: The program's exit status (0 on success; ``None`` if unknown).
        warnings: One-line warnings for the user (old ncu, the program failed part way, ...).
        kernels_profiled: Launches in the report.
        log: ncu's own output lines (``==PROF==``, ``==WARNING==``, ``==ERROR==``).
        ncu: The ncu executable that was used.
        section_set: The section set collected (``None`` if none was asked for).
        clock_control: ncu's ``--clock-control`` value for this run.
        cache_control: ncu's ``--cache-control`` value for this run.
        passes: Replay passes of each profiled kernel, as ncu reported them.
        interrupted: The run was stopped with Ctrl-C; the report covers what was profiled.
        timings: Seconds spent: ``ncu`` (the program under ncu), ``export`` (CSV pages).
        log_path: ncu's own messages (``--log-file``), kept beside the report.

    """

    rep_path: Path
    raw_csv: Path | None
    details_csv: Path | None
    command: list[str]
    ncu_version: str
    program_exit_code: int | None
    warnings: list[str]
    kernels_profiled: int
    log: list[str]
    ncu: Path | None = None
    section_set: str | None = collect.ADVISOR_SET
    clock_control: str = "none"
    cache_control: str = "all"
    passes: list[int] = field(default_factory=list)
    interrupted: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    log_path: Path | None = None

    @property
    def report_files(self) -> list[Path]:
        """The files to read for the analysis: the CSV pages if exported, else the report."""
        if self.raw_csv is not None and self.details_csv is not None:
            return [self.raw_csv, self.details_csv]
        return [self.rep_path]

    def session_facts(self) -> dict[str, object]:
        """Facts about this run for ``Report.session`` (the report shows how data was taken)."""
        facts: dict[str, object] = {
            "ncu_version": self.ncu_version,
            "section_set": self.section_set,
            "clock_control": self.clock_control,
            "cache_control": self.cache_control,
            "ncu_command": shlex.join(self.command),
        }
        if self.passes:
            facts["passes_per_kernel"] = max(self.passes)
        return facts


# --------------------------------------------------------------------------- finding ncu


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _version_key(path: str) -> tuple[int, ...]:
    # The last version-looking part of the path: cuda-12.4 -> (12, 4), 2025.3.1 -> (2025, 3, 1).
    found = _PATH_VERSION.findall(str(Path(path).parent))
    return tuple(int(x) for x in found[-1].split(".")) if found else ()


def _install_patterns() -> list[str]:
    if os.name == "nt":
        program_files = os.environ.get("ProgramFiles", r"C:\Program Files")
        return [os.path.join(program_files, _WINDOWS_GLOB)]
    return list(INSTALL_GLOBS)


def find_ncu() -> Path:
    """Find the ``ncu`` executable.

    Looks at the ``NCU`` environment variable first, then ``PATH``, then the usual install
    folders (newest version first).

    Returns:
        The path of the ncu executable.

    Raises:
        NcuNotFoundError: ``NCU`` names no executable, or ncu is nowhere to be found.

    """
    env = os.environ.get("NCU", "").strip()
    if env:
        path = Path(env).expanduser()
        if path.is_dir():  # NCU=/opt/nvidia/nsight-compute/2025.3.1 is an easy mistake
            path = path / ("ncu.bat" if os.name == "nt" else "ncu")
        if _is_executable(path):
            return path
        on_path = shutil.which(env)
        if on_path:
            return Path(on_path)
        raise NcuNotFoundError(
            f"NCU={env} is not an executable file: set NCU=/path/to/ncu, or unset it to search"
            " PATH and the usual install folders"
        )
    on_path = shutil.which("ncu")
    if on_path:
        return Path(on_path)
    patterns = _install_patterns()
    for pattern in patterns:
        for candidate in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            if _is_executable(Path(candidate)):
                return Path(candidate)
    raise NcuNotFoundError(
        f"ncu not found (looked at $NCU, PATH, {', '.join(patterns)}): {_FIX}"
    )


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".") if x.isdigit())


def ncu_version(ncu: str | os.PathLike[str]) -> str:
    """Return ncu's version by running ``ncu --version``.

    Args:
        ncu: The ncu executable.

    Returns:
        The version, e.g. ``"2025.3.1.0"``, or ``"unknown"`` if ncu ran but printed none.

    Raises:
        NcuNotFoundError: ncu cannot be run or ``--version`` fails.

    """
    try:
        proc = subprocess.run(
            [str(ncu), "--version"], capture_output=True, text=True, errors="replace",
            timeout=120, check=False,
        )
    except OSError as exc:
        raise NcuNotFoundError(f"cannot run {ncu}: {exc.strerror or exc}; {_FIX}") from None
    except subprocess.TimeoutExpired:
        raise NcuNotFoundError(f"{ncu} --version did not answer within 120 s") from None
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        last = output.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise NcuNotFoundError(f"{ncu} --version failed ({last[0]}); {_FIX}")
    match = _VERSION.search(output)
    return match.group(1) if match else "unknown"


def _ask_version(ncu: Path, answer: dict[str, object]) -> None:
    try:
        answer["version"] = ncu_version(ncu)
    except NcuNotFoundError as exc:
        answer["error"] = exc


def version_warnings(version: str) -> list[str]:
    """Return one-line warnings about an ncu version (empty when it is recent enough)."""
    if version == "unknown":
        return ["ncu did not print its version; ncu-advise expects Nsight Compute 2023.1 or newer"]
    if _version_tuple(version)[:2] < MIN_NCU_VERSION:
        return [
            f"ncu {version} is older than 2023.1: metric names and CSV columns may differ and "
            "some advice may be missing; update Nsight Compute"
        ]
    return []


# --------------------------------------------------------------------------- command lines


def _option_value(args: Sequence[str], *names: str) -> str | None:
    """Return the value of the last ``--opt value`` / ``--opt=value`` in args, or None."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def _has_option(args: Sequence[str], *names: str) -> bool:
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


def can_read_ncu_rep() -> bool:
    """Whether a ``.ncu-rep`` can be read here directly, so no CSV export is needed.

    True with NVIDIA's ``ncu-report`` wheel or the ``ncu_report`` module an Nsight Compute
    install ships (``extras/python``). The reader runs in a child process, so a module that
    crashes on a report costs the CSV export it would have saved, never the profiling run
    (``cli._read_profiled`` falls back to it).
    """
    if importlib.util.find_spec("ncu_report") is not None:
        return True
    from .readers.ncu_rep_child import ncu_report_folders  # loads the readers: after ncu ran

    return bool(ncu_report_folders())


def collection_args(
    ncu: str | os.PathLike[str], section_set: str | None
) -> tuple[list[str], list[str]]:
    """Return the ncu options that collect a section set, and warnings about them.

    Args:
        ncu: The ncu executable.
        section_set: ``"advise"`` (:mod:`ncu_advisor.collect`), another ncu set such as
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
    if not _has_option(extra, "--clock-control"):
        cmd += ["--clock-control", "none"]
    # Python launchers (torchrun, multiprocessing, DataLoader workers) run kernels in child
    # processes; ncu's default is the same, said here so the command line shows it.
    if not _has_option(extra, "--target-processes"):
        cmd += ["--target-processes", "all"]
    if not _has_option(extra, "--set"):
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


def _stem(rep_path: Path) -> str:
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
    raw = rep.with_name(_stem(rep) + ".raw.csv")
    details = rep.with_name(_stem(rep) + ".details.csv")
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


def _count_launches(raw_csv: Path) -> int:
    """Rows of a raw-page export: one per launch, after the header and the units row."""
    count, in_table = 0, False
    with raw_csv.open(newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.reader(fh):
            if not in_table:
                in_table = bool(row) and row[0] == "ID"
            elif row and row[0].strip().isdigit():
                count += 1
    return count


# --------------------------------------------------------------------------- running ncu


def _resolve_program(program: str) -> str:
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


def _default_name(program: str, args: Sequence[str]) -> str:
    base = Path(program).name
    # `python3 train.py` is better named after the script than the interpreter.
    if _PYTHON.match(base) and args and str(args[0]).endswith(".py"):
        base = Path(str(args[0])).stem
    elif base.lower().endswith((".exe", ".bat")):
        base = base.rsplit(".", 1)[0]
    return re.sub(r"[^\w.-]", "_", base) or "profile"


@dataclass
class _NcuOutput:
    """What ncu printed, sorted out line by line (kept apart from the I/O to test it alone)."""

    log: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    app_exit_code: int | None = None
    report: str | None = None
    permission_denied: bool = False
    nothing_profiled: bool = False
    available: list[str] = field(default_factory=list)
    total: int | None = None
    passes: list[int] = field(default_factory=list)

    def add(self, line: str) -> tuple[str, re.Match[str] | None] | None:
        """Record one ncu line; return ``(kind, profiling match)``, or None for program output."""
        match = _NCU_LINE.match(line)
        if not match:
            # After "No kernels were profiled." ncu lists the kernels it saw (the program has
            # ended by then): `Available Kernels:`, `1. apply_pair`, ...
            listed = _AVAILABLE.match(line) if self.nothing_profiled else None
            if listed:
                self.log.append(line)
                if listed["name"]:
                    self.available.append(listed["name"])
                return "LIST", None
            return None
        kind, text = match.groups()
        self.log.append(line)
        profiling = None
        if kind == "PROF":
            profiling = _PROFILING.match(text)
            report = _REPORT.match(text)
            if profiling:
                self.kernels.append(profiling["name"])
                if profiling["total"]:
                    self.total = int(profiling["total"])
                passes = _PASSES.search(profiling["rest"])
                if passes:
                    self.passes.append(int(passes.group(1)))
            elif report:
                self.report = report.group(1).strip()
        elif kind == "ERROR":
            app = _APP_ERROR.search(text)
            if app:
                self.app_exit_code = int(app.group(1))
            elif "ERR_NVGPUCTRPERM" in text:
                self.permission_denied = True
            elif "No kernels were profiled" in text:
                self.nothing_profiled = True
            else:
                self.errors.append(text.strip())
        elif kind == "WARNING":
            if "No kernels were profiled" in text:
                self.nothing_profiled = True
            unable = _UNABLE.match(text)
            if unable:
                # On an H200 without a C2C link, the full set always misses 6 ctc__ metrics.
                names = unable.group(2).split(", ")
                shown = ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")
                self.warnings.append(
                    f"ncu could not collect {unable.group(1)} metrics ({shown}); they read n/a"
                )
            elif not text.startswith(_QUIET_WARNINGS):
                short = text if len(text) <= 200 else text[:197] + "..."
                self.warnings.append(f"ncu: {short}")
        return kind, profiling


class _Display:
    """The live line on stderr while ncu runs, and the program's output passed through.

    The line says which kernel is being profiled, how many are done, their replay passes and,
    when the number of launches is known (``-c``, or ncu's ``(n/N)``), the time left.
    """

    def __init__(self, enabled: bool, total: int | None) -> None:
        self._progress: Progress | None = None
        self.total = total
        self.started = time.monotonic()
        self.first_kernel_at: float | None = None
        console = Console(stderr=True)
        if enabled and console.is_terminal and not console.is_dumb_terminal:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                # Never reroute stdout: when it is a file, the program's output belongs there.
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._progress.add_task("starting the program under ncu", total=None)
        self._stdout_is_terminal = sys.stdout.isatty()

    @contextmanager
    def shown(self) -> Iterator[_Display]:
        """Show the live line for the duration of the block."""
        if self._progress is None:
            yield self
            return
        with self._progress:
            yield self

    def program_output(self, line: str, stream: IO[str] | None = None) -> None:
        """Pass one line of the program's output on (its stdout to stdout, stderr to stderr)."""
        stream = stream or sys.stdout
        if self._progress is not None and stream.isatty():
            # Same terminal: print above the live line so the two do not overwrite each other.
            self._progress.console.print(Text(line), soft_wrap=True, highlight=False)
        else:
            stream.write(line + "\n")
            stream.flush()

    def note(self, text: str) -> None:
        """Show a message about the run itself (e.g. that Ctrl-C is being handled)."""
        if self._progress is not None:
            self._progress.update(self._task, description=text, refresh=True)
        else:
            sys.stderr.write(f"ncu-advise: {text}\n")
            sys.stderr.flush()

    def status(self, out: _NcuOutput, current: re.Match[str] | None = None) -> str:
        """Return the live line's text for what ncu said so far (kept testable without a tty)."""
        done = len(out.passes)
        total = out.total or self.total
        parts = []
        if current is not None:
            name = current["name"]
            name = name if len(name) <= 50 else name[:47] + "..."
            kernel = f"kernel {current['id']}: {name}" if current["id"] else name
            percents = _PERCENT.findall(current["rest"])
            parts.append(f"profiling {kernel}" + (f" {percents[-1]}%" if percents else ""))
        else:
            parts.append("running the program under ncu")
        if done:
            passes = sorted(set(out.passes))
            each = (f"{passes[0]}" if len(passes) == 1 else f"{passes[0]}-{passes[-1]}")
            parts.append(f"{done}{'/' + str(total) if total else ''} kernels done, "
                         f"{each} passes each")
            if self.first_kernel_at is not None:
                per_kernel = (time.monotonic() - self.first_kernel_at) / done
                parts.append(f"{per_kernel:.1f} s/kernel")
                if total and total > done:
                    parts.append(f"about {_duration(per_kernel * (total - done))} left")
        return " | ".join(parts)

    def kernel(self, out: _NcuOutput, current: re.Match[str] | None) -> None:
        """Update the live line after a line (or a partial line) of ncu's progress."""
        if current is not None and self.first_kernel_at is None:
            self.first_kernel_at = time.monotonic()
        if self._progress is None:
            return
        self._progress.update(self._task, description=self.status(out, current), refresh=True)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _split_ncu_messages(line: str) -> list[str]:
    return [part for part in _EMBEDDED_NCU.split(line) if part] or [line]


def _pump(pipe: IO[bytes], stream: IO[str], lines: queue.Queue) -> None:
    """Move the program's output lines from a pipe to the queue (in a thread)."""
    with pipe:
        for raw in iter(pipe.readline, b""):
            lines.put((stream, raw.rstrip(b"\n").rstrip(b"\r").decode(errors="replace")))
    lines.put((stream, None))


class _LogFollower:
    """Follow ncu's log file as it grows: whole lines to the output, the partial one aside."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None
        self._pending = b""

    def poll(self) -> tuple[list[str], str]:
        """Return the new complete lines and the current partial line."""
        if self._fh is None:
            try:
                self._fh = self.path.open("rb")
            except OSError:  # ncu has not created it yet
                return [], ""
        chunk = self._fh.read()
        if not chunk:
            return [], self._pending.decode(errors="replace")
        *complete, self._pending = (self._pending + chunk).split(b"\n")
        lines = [c.rstrip(b"\r").decode(errors="replace") for c in complete]
        return lines, self._pending.decode(errors="replace")

    def close(self) -> list[str]:
        """Return what is left (a last line without a newline) and close the file."""
        lines, partial = self.poll()
        if self._fh is not None:
            self._fh.close()
        return lines + ([partial] if partial.strip() else [])


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send a signal to ncu and everything it started (the program, its children)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, sig)
        elif sig == signal.SIGINT:
            proc.terminate()
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _run_ncu(
    cmd: list[str], log_path: Path, display: _Display
) -> tuple[int, _NcuOutput, bool]:
    """Run ncu; show its progress and pass the program's output through.

    Returns:
        ncu's exit status, what it said, and whether the run was interrupted (Ctrl-C).

    """
    out = _NcuOutput(total=display.total)
    follower = _LogFollower(log_path)

    def on_ncu_line(raw: str) -> None:
        for line in _split_ncu_messages(raw):
            seen = out.add(line)
            if seen is not None and seen[1] is not None:
                display.kernel(out, seen[1])

    kwargs: dict = {}
    if os.name == "posix":
        # Its own process group: Ctrl-C reaches ncu-advise alone, which then stops ncu (and
        # through ncu the program) once, so that ncu can save what it profiled.
        kwargs["process_group"] = 0
    # A process outside the terminal's foreground group that reads the terminal is stopped;
    # a program fed through a pipe or a file keeps its input.
    stdin = subprocess.DEVNULL if sys.stdin is not None and sys.stdin.isatty() else None
    try:
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, **kwargs)
    except OSError as exc:
        raise NcuNotFoundError(f"cannot run {cmd[0]}: {exc.strerror or exc}; {_FIX}") from None
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue = queue.Queue()
    pumps = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout, lines), daemon=True),
             threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, lines), daemon=True)]
    for pump in pumps:
        pump.start()
    open_pipes = len(pumps)

    def step(timeout: float) -> None:
        nonlocal open_pipes
        try:
            stream, line = lines.get(timeout=timeout)
            while True:
                if line is None:
                    open_pipes -= 1
                else:
                    display.program_output(line, stream)
                stream, line = lines.get_nowait()
        except queue.Empty:
            pass
        complete, partial = follower.poll()
        for line in complete:
            on_ncu_line(line)
        started = _NCU_LINE.match(partial)
        if started and started.group(1) == "PROF":
            current = _PROFILING.match(started.group(2))
            if current:
                display.kernel(out, current)

    def until_exit(deadline: float | None) -> bool:
        """Run until ncu has exited and its pipes are drained; False if the deadline passed."""
        while proc.poll() is None or open_pipes > 0:
            if deadline is not None and time.monotonic() > deadline:
                return False
            step(0.1)
        return True

    interrupted = False
    try:
        with display.shown():
            try:
                until_exit(None)
            except KeyboardInterrupt:
                interrupted = True
                display.note("Ctrl-C: stopping ncu and the program, keeping what was profiled "
                             "(Ctrl-C again to kill them)")
                _signal_group(proc, signal.SIGINT)
                try:
                    if not until_exit(time.monotonic() + _INTERRUPT_GRACE_S):
                        _signal_group(proc, signal.SIGKILL)
                except KeyboardInterrupt:
                    _signal_group(proc, signal.SIGKILL)
                proc.wait()
            for line in follower.close():
                on_ncu_line(line)
    finally:
        if proc.poll() is None:  # failed while reading: leave nothing running
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, interrupted


def _nothing_profiled(
    kernel_name: str | None, extra: Sequence[str], app_exit: int | None, available: list[str]
) -> str:
    filters = [f"-k {kernel_name}"] if kernel_name else []
    filters += [a for a in extra if a.split("=", 1)[0] in ("--launch-skip", "-s", "--nvtx-include")]
    if app_exit:
        why = f"the program exited with status {app_exit} before launching a profiled kernel"
    elif filters:
        why = (f"no kernel launch matched the filters ({' '.join(filters)}); ncu matches the "
               "function name exactly (use -k regex:PATTERN for a pattern)")
    else:
        why = ("the program launched no CUDA kernels under ncu (no -k/-c filters were set); "
               "check that it runs on the GPU with these arguments")
    if available:
        shown = ", ".join(available[:12]) + (", ..." if len(available) > 12 else "")
        why += f"; the program launched: {shown}"
    return f"nothing was profiled: {why}"


def run_profile(
    program: str | os.PathLike[str],
    args: Sequence[str | os.PathLike[str]] = (),
    *,
    out_dir: str | os.PathLike[str] = ".",
    name: str | None = None,
    section_set: str | None = collect.ADVISOR_SET,
    kernel_name: str | None = None,
    launch_count: int | None = None,
    nvtx: bool = False,
    extra: Sequence[str] = (),
    progress: bool = True,
    ncu: str | os.PathLike[str] | None = None,
    export_csv: bool = True,
) -> ProfileResult:
    """Profile a program under ncu.

    Writes ``<out_dir>/<name>.ncu-rep`` and ``<name>.ncu.log`` (ncu's own messages), and, when
    exported, ``<name>.raw.csv`` and ``<name>.details.csv`` (``name`` defaults to the
    program's name, or the script's for ``python3 script.py``).

    Args:
        program: The program to run, a path or a command on PATH (e.g. ``python3``).
        args: Its arguments.
        out_dir: The folder for the report and the CSV files (created if missing).
        name: The base name of the files.
        section_set: ``"advise"`` (default: what ncu-advise reads), or an ncu set (``"full"``).
        kernel_name: Profile only kernels with this name (``-k``).
        launch_count: Profile at most this many launches (``-c``).
        nvtx: Record NVTX ranges (``--nvtx``).
        extra: More ncu options, passed through (``--clock-control`` here replaces the default).
        progress: Show a live line on stderr (only when stderr is a terminal).
        ncu: The ncu executable; found with :func:`find_ncu` when None.
        export_csv: Export the raw and details pages as CSV (the default: faster to read
            than the ``.ncu-rep``); False leaves the ``.ncu-rep`` to be read directly, which
            needs :func:`can_read_ncu_rep` (the CSV export then happens only if that fails).

    Returns:
        The files written and what the run reported. After Ctrl-C, what was profiled before
        it, with ``interrupted`` set.

    Raises:
        NcuNotFoundError: ncu cannot be found or run.
        ProfilingError: The program cannot be run, the counters are restricted, nothing was
            profiled, or ncu wrote no report.

    """
    ncu_path = Path(ncu) if ncu is not None else find_ncu()
    # `ncu --version` starts ncu once more (a noticeable share of a short run): it runs beside
    # the profiling run, and its answer is needed only afterwards.
    asked: dict[str, object] = {}
    version_query = threading.Thread(target=_ask_version, args=(ncu_path, asked), daemon=True)
    version_query.start()
    warnings: list[str] = []
    program_arg = _resolve_program(str(program))
    args = [str(a) for a in args]
    extra = [str(e) for e in extra]

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfilingError(f"cannot create {out}: {exc.strerror or exc}") from None
    rep = out / f"{name or _default_name(str(program), args)}.ncu-rep"
    log_path = rep.with_name(_stem(rep) + ".ncu.log")
    # ncu writes no report when nothing is profiled: a stale one must not pass for this run's.
    for stale in (rep, log_path, rep.with_name(_stem(rep) + ".raw.csv"),
                  rep.with_name(_stem(rep) + ".details.csv")):
        stale.unlink(missing_ok=True)

    if not _has_option(extra, "--set"):
        warnings += collection_args(ncu_path, section_set)[1]
    cmd = build_ncu_command(
        ncu_path, program_arg, args, rep_path=rep, section_set=section_set,
        kernel_name=kernel_name, launch_count=launch_count, nvtx=nvtx, extra=extra,
        log_file=log_path,
    )
    started = time.monotonic()
    returncode, output, interrupted = _run_ncu(cmd, log_path, _Display(progress, launch_count))
    timings = {"ncu": time.monotonic() - started}
    version_query.join()
    if "error" in asked:
        raise asked["error"]  # ncu cannot run at all: say so rather than "no report"
    version = str(asked["version"])
    warnings[:0] = version_warnings(version)

    if output.permission_denied:
        raise ProfilingError(_PERM_MESSAGE)
    if not rep.is_file() and output.report and Path(output.report).is_file():
        rep = Path(output.report)  # ncu chose another name than the one asked for
    app_exit = output.app_exit_code
    if app_exit is None and returncode == 0:
        app_exit = 0
    if not rep.is_file():
        if interrupted:
            raise ProfilingError(
                f"interrupted (Ctrl-C) after {len(output.passes)} kernel(s); ncu saved no report")
        if output.errors:  # e.g. "Unknown Error on device 0": more telling than "nothing"
            raise ProfilingError(f"ncu failed (exit status {returncode}): {output.errors[0]}")
        if output.nothing_profiled or not output.kernels:
            raise ProfilingError(_nothing_profiled(kernel_name, extra, app_exit, output.available))
        raise ProfilingError(
            f"ncu wrote no report at {rep} (exit status {returncode}"
            f"{'; ' + output.log[-1] if output.log else ''})"
        )

    raw_csv = details_csv = None
    kernels = len(output.passes) or len(output.kernels)
    if export_csv or not can_read_ncu_rep():
        started = time.monotonic()
        raw_csv, details_csv = export_csvs(ncu_path, rep)
        timings["export"] = time.monotonic() - started
        kernels = _count_launches(raw_csv)
        if kernels == 0 and not interrupted:
            raise ProfilingError(_nothing_profiled(kernel_name, extra, app_exit,
                                                  output.available))
    warnings += output.warnings
    warnings += [f"ncu: {e}" for e in output.errors]
    plural = "s" if kernels != 1 else ""
    if interrupted:
        warnings.append(f"interrupted (Ctrl-C): the report covers the {kernels} kernel{plural} "
                        "profiled before that")
    elif app_exit:
        warnings.append(
            f"the program exited with status {app_exit}; the report covers the {kernels} "
            f"kernel{plural} profiled before that"
        )
    elif returncode != 0:
        warnings.append(f"ncu exited with status {returncode}; the report may be incomplete")

    return ProfileResult(
        rep_path=rep,
        raw_csv=raw_csv,
        details_csv=details_csv,
        command=cmd,
        ncu_version=version,
        program_exit_code=app_exit,
        warnings=warnings,
        kernels_profiled=kernels,
        log=output.log,
        ncu=ncu_path,
        section_set=_option_value(extra, "--set") or section_set,
        clock_control=_option_value(extra, "--clock-control") or "none",
        cache_control=_option_value(extra, "--cache-control") or "all",
        passes=list(output.passes),
        interrupted=interrupted,
        timings=timings,
        log_path=log_path,
    )
